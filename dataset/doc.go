// Package dataset owns reading training data: it parses LIBSVM files into
// sparse rows, whole (Read) or one row at a time for data larger than
// memory (Scanner, and Stream, which draws shuffled mini-batches from a
// file epoch after epoch through a bounded buffer); it tells the formats
// apart (Detect); it maps feature ids into a fixed number of keys by
// hashing (HashFunction, Hasher); it carries the built-in datasets that
// ship inside the binary (rcv1 and a9a) together with their licences (see
// builtin/NOTICE); and it draws seeded synthetic click-log-like sets
// (Synthetic: power-law feature frequencies, labels from a planted logistic
// model) for meshes too large for the built-in sets to give every member
// rows of its own. Synthetic data is for scale; real sets are the
// reference for accuracy.
//
// # Format
//
// A file holds one example per line:
//
//	<label> <index>:<value> <index>:<value> ...
//
// The label is any finite number: +1/-1 or 1/0 for binary tasks, a class id
// for multiclass tasks, a real value for regression. Indices are decimal
// feature ids, any uint64 from 1, strictly ascending within a row; id 0 is rejected
// because the model reserves key 0 for its bias. Values must be finite and
// representable as float32. A row may have a label and no features.
// Tokens are separated by spaces or tabs; a '#' starts a comment that runs to
// the end of the line, and blank or comment-only lines are skipped. Lines may
// end in LF or CRLF, and a single line is capped at [MaxLineLen] bytes.
//
// Input is gzip-compressed or plain: [Read] recognises gzip by its magic
// bytes, so the file name does not matter.
//
// Input is untrusted: malformed data gives an error naming the file and line,
// never a panic, and the reader allocates no more than a small multiple of
// the (decompressed) input size.
package dataset
