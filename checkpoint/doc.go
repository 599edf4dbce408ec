// Package checkpoint owns a node's checkpoint: the state a node needs to
// resume after a restart (its mesh, its member id, the mesh's settings, its
// clock, its committed rows with their vector clock, and its optimizer
// state), written atomically and read back with validation.
//
// # Writing
//
// Save writes the whole checkpoint to a temporary file in the checkpoint
// directory, syncs it, renames it over the checkpoint file (FileName) and
// syncs the directory, so a crash at any point leaves either the previous
// checkpoint or the new one, never a mix; no temporary file outlives a
// Save, whether it succeeds or fails. Save refuses to replace a file that
// is not an intact checkpoint (a foreign file, a truncated one, one whose
// checksum does not match): a corrupt checkpoint is reported, never
// silently replaced. Whoever wants to start over removes it by hand.
//
// # Reading
//
// Load reports a missing checkpoint with an error that is
// errors.Is(err, fs.ErrNotExist), and anything wrong with the file's
// contents with an error that wraps ErrCorrupt and says what was wrong. It
// checks the header, the length and the checksum before it decodes a byte
// of the body, and the decoder checks every declared length against the
// bytes that remain before it allocates (see package wire).
//
// # File format
//
// All integers in the header are big-endian:
//
//	magic     8 bytes   "SKMCKPT\n"
//	version   uint32    3
//	length    uint64    number of body bytes
//	body      msgpack   see below
//	checksum  32 bytes  SHA-256 of magic, version, length and body
//
// The body is one msgpack array of six fields:
//
//	[mesh str, member str, settings, clock uint, rows, optimizer]
//	settings:  as node.Settings.WriteTo writes it
//	rows:      as node.Snapshot.WriteTo writes it
//	optimizer: [kind str, steps uint, m bin, v bin]   m and v as wire.Writer.Floats
//
// A decoded checkpoint is validated as Save validates what it writes: a
// mesh name, a member id of the form "<peer id>/<incarnation>", a
// rows' clock at most the node's clock, member entries that a node can
// start from (node.Snapshot.CheckMembers: a member admitted above the rows
// has High = Entry), and an optimizer state of the settings' optimizer that fits the
// rows (Adam moments as long as the view, SGD without any).
package checkpoint
