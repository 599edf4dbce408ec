// Package modelfile owns the model file: the trained model as it leaves a
// mesh, for predict, export and any other tool, together with what it takes
// to apply it to new data (the feature mapping) and where it came from.
//
// It exists apart from package checkpoint because the two answer different
// questions. A checkpoint is how one node resumes: its vector clock,
// pending rows and optimizer moments, tied to its peer id and useless
// elsewhere. A model file is what a user keeps: the weights alone, of any
// node, readable without a mesh, a key or the settings' wire format, and
// stable across releases (a reader refuses versions it does not know
// rather than guessing).
//
// # File format
//
// Integers in the header and trailer are big-endian:
//
//	magic     8 bytes   "SKMMODL\n"
//	version   uint32    1
//	length    uint64    number of body bytes
//	body      msgpack   see below
//	checksum  uint32    CRC-32C (Castagnoli) of magic, version, length and body
//
// The checksum detects damage (a truncated copy, a flipped bit), not
// tampering: a model file carries no secret and no signature. The body is
// one msgpack array of five fields:
//
//	[kind str, classes bin, mapping, weights bin, provenance]
//	kind:       "lr", "svm", "linear" or "softmax"
//	classes:    softmax label values, ascending, as float64 little-endian
//	            (empty for the other models)
//	mapping:    [dimension uint, hash bits uint, hash function str]
//	weights:    float64 little-endian, K blocks of dimension+1 values: block
//	            c holds class c's bias at index 0 and the weight of key j at
//	            index j (K = number of classes for softmax, 1 otherwise)
//	provenance: [mesh str, member str, clock uint,
//	             settings [[name str, value str] ...], data [str ...]]
//
// The mapping says how a row's feature ids become keys. With hash bits 0,
// id j is key j and ids above the dimension have no weight. With hash bits
// B > 0, the dimension is 2^B and ids are hashed with the named function
// (dataset.HashFunction, the only one so far): predict applies the same
// mapping the mesh trained with.
//
// Provenance records the mesh's name, the member whose view was saved and
// its clock, the mesh's settings by name (node.SettingNames) and the names
// of the data it trained on. It is informative: nothing reads it back to
// decide anything.
//
// # Reading
//
// Decode checks the magic, the version, the declared length against the
// bytes present and the checksum before it decodes a byte of the body, and
// the body decoder checks every declared length against the bytes that
// remain before it allocates (package wire). A decoded model is validated
// whole: a known kind, sorted distinct classes, a mapping whose dimension
// matches its hash bits, finite weights of exactly the model's length.
//
// # Writing
//
// Write encodes to a temporary file in the target's directory, syncs it and
// renames it over the target, so a reader (or a crash) sees the previous
// file or the new one, never a mix.
package modelfile
