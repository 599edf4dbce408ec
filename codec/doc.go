// Package codec owns the wire format of one additive update: a sparse vector
// of (uint64 key, float32 value) pairs, or a dense vector of float32 values.
//
// Every frame is self-describing. It starts with a fixed header
//
//	magic "SK" | format version (1 byte) | codec id (1 byte)
//
// followed by a codec-specific body that carries every parameter the decoder
// needs, so a receiver decodes any frame with [Decode] and no configuration.
//
// Frames arrive from untrusted peers, so every decoder validates before it
// allocates: each count and length is checked against the bytes that remain
// in the frame, and a frame never makes a decoder allocate more than a small
// multiple of its own size. Decoders return errors wrapping [ErrCorrupt] and
// never panic.
//
// The codec is pure, deterministic code: the same update always encodes to
// the same bytes, which is what lets every node of a mesh hold a bit-identical
// view when the codec is lossless.
package codec
