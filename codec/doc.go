// Package codec owns the wire format of one additive update: a sparse vector
// of (uint64 key, float32 value) pairs with strictly ascending keys, or a
// dense vector of float32 values (Sparse.Keys == nil).
//
// # Codecs
//
//	raw       lossless, 12 bytes a pair
//	sketchml  SketchML (Jiang et al., SIGMOD'18): quantile buckets, grouped
//	          MinMaxSketch, delta-binary or Huffman keys; lossy values,
//	          lossless keys
//	uniform8  ZipML-style one-byte uniform quantization, delta-binary keys
//	zstd      the raw body compressed with zstd; lossless
//
// Every frame is self-describing: a receiver decodes any frame with [Decode]
// and no configuration. A frame starts with
//
//	byte 0-1  magic "SK"
//	byte 2    format version (1)
//	byte 3    codec id: 1 raw, 2 sketchml, 3 uniform8, 4 zstd
//
// and a codec body follows. Below, uvarint is encoding/binary's unsigned
// varint, multi-byte integers and floats are little-endian, and bit streams
// are filled least-significant bit first and padded with zero bits to a
// byte.
//
// # Guarantees
//
// Encoding is deterministic: the same update gives the same bytes, on any
// platform (decoders do no float arithmetic that could fuse or round
// differently, except uniform8's one multiply and divide in float64).
// Encoders refuse NaN and infinite values (naming the key), unsorted or
// repeated keys, and key/value length mismatches with errors wrapping
// [ErrBadInput].
//
// Frames come from untrusted peers. Decoding arbitrary bytes returns an
// error wrapping [ErrCorrupt] (and [ErrNotFinite] when the frame carries a
// NaN or an infinity) or a well-formed update (ascending keys, finite
// values); it never panics. Decoding allocates at most 8 bytes per
// frame byte plus 64 KiB: each decoder computes from header fields what it
// will allocate (the pairs, 12 bytes each, and its tables), checks every
// count and length against the bytes that remain, and refuses the frame
// before allocating if the total exceeds the budget. A key costs at least
// 10 bits in a delta-binary list and 1 bit in a Huffman list, and each
// decoder also refuses lists that claim more keys than that allows. The
// fuzz corpus in testdata/fuzz and a test that measures Decode's
// allocations hold this.
//
// The budget bounds expansion: a frame of F bytes decodes to at most about
// (16F + 48 KiB)/12 sparse pairs. An encoder whose frame would compress
// better pads it with zero bytes up to the size the budget needs (and
// Measurement.PadBytes reports them), so every frame it writes decodes.
// This caps the compression ratio of large frames near 16× for sparse
// updates (the 64 KiB slack raises it for small ones) and 48× for dense
// ones; the factor is 16 because at 8 a decoded pair's 12 bytes would cap
// sparse frames at 8× and force padding onto the wire. Raising
// decodeBudgetFactor lifts the cap at the cost of a weaker bound.
//
// Guarantees per codec:
//   - raw, zstd: bit-exact.
//   - sketchml: keys exact. A value of ±0 decodes to 0. Any other value v
//     decodes to the representative of v's bucket or of a bucket closer to
//     zero in the same group, so the decoded value has v's sign and its
//     magnitude is at most the largest magnitude among the values that
//     share v's bucket (the paper's underestimation property, made exact).
//     The decoded bucket is at most ceil(q/r)-1 buckets from v's.
//     That holds for sketchml's own frames (id 2). The sketchml encoder
//     writes the update's round-to-nearest uniform8 frame instead (id 3,
//     uniform8's guarantee) where that frame costs fewer bits, counting a
//     bit a value for each halving of the L2 error, up to 4 (with
//     ByteBudget: where it fits with less error; with TargetError: where
//     it is no larger and meets the target or beats the sketch); so a
//     frame no larger and no less accurate always replaces the sketch.
//     Below a few hundred pairs the sketch's fixed part, up to q
//     representatives and two code tables, outweighs what bucketing
//     saves. SketchOnly turns this off.
//   - uniform8: the decoded value has v's sign or is zero, its magnitude is
//     at most the grid point at or above |v|, and it is within one grid
//     step (max|v|/127) of v; half a step when rounding to nearest.
//     Stochastic rounding (the registered default) is unbiased.
//
// # raw (id 1)
//
//	flags      1 byte: bit 0 dense; other bits zero
//	n          uvarint: pairs
//	keys       n × 8 bytes (absent when dense)
//	values     n × 4 bytes, float32 bits
//
// # sketchml (id 2), sparse
//
//	flags      1 byte: bit 0 = 0 (sparse); bit 1 key lists are Huffman
//	           gaps (else delta-binary); bit 2 cells are Huffman-coded
//	           (else packed); bits 3-7 zero
//	n          uvarint: pairs
//	qpos       uvarint: positive buckets
//	qneg       uvarint: negative buckets (qpos+qneg ≤ 4096)
//	gpos, gneg uvarints: positive and negative groups (r in all; a side
//	           with buckets has at least one group, each group at least one
//	           bucket)
//	widths     gpos then gneg uvarints: each group's bucket count, in
//	           ascending magnitude; each side's widths sum to its buckets
//	s          1 byte: hash rows (1..16)
//	seed       8 bytes: hash seed
//	reps       qpos then qneg uvarints: each side's representative
//	           magnitudes in ascending order (bucket 0 is nearest zero), as
//	           float32 bits: the first as is, each next as bits-prev-1; all
//	           finite and strictly increasing
//	gap code   if flags bit 1: a Huffman table over the 256 gap symbols
//	cell code  if flags bit 2: a Huffman table over in-group ranks (below
//	           the widest group's width)
//	headers    one per key list, L = 1 + gpos + gneg lists in order: the
//	           zero list (keys whose value is ±0), the positive groups, the
//	           negative groups.
//	           Each: uvarint count; if count > 0, uvarint key payload length;
//	           if the list is a group whose width wg > 1, uvarint t (its
//	           sketch columns) and, if flags bit 2, uvarint cell stream
//	           length
//	payloads   for each list with count > 0: its key payload, then its cells
//	           if it has a t: s rows × t columns, row-major, each cell the
//	           key's rank within the group; packed in bitsFor(wg-1) bits each
//	           (ceil(s·t·bits/8) bytes), or Huffman-coded
//	padding    zero bytes, as many as the decode budget needs (usually none)
//
// The key payloads are key lists (see keys.go for the two layouts):
// delta-binary is the paper's section 3.4 with a 2-bit width selector per
// gap choosing among four byte widths that the list's 2-byte width table
// picks from 1..8, so 8-byte gaps are representable; Huffman lists code
// each gap as one of 256 log-linear symbols plus extra bits. A Huffman
// table is uvarint A (one past the largest symbol) and A 4-bit code
// lengths (0 unused, at most 12), two per byte, low nibble first; codes are
// canonical.
//
// The encoder's groups: with GroupsEqualWidth (the paper's)
// each side is cut into groups of ceil(q/r) buckets from bucket 0 up (the
// last may be narrower), and q is shared between the sides in whole groups
// in proportion to their value counts, so there are r groups in all. With
// GroupsEqualEnergy (the default) each side keeps its number of groups but
// they are cut, from the largest bucket down, so that each holds a similar
// share of the side's squared magnitudes. A group's sketch has
// ceil(ColumnRatio × its keys) columns, or, with TargetError or ByteBudget,
// the columns a per-frame search picks (columns.go); every group's t travels
// in its header either way, so decoders need nothing new.
//
// MinMaxSketch hash: h = splitmix64-finaliser(key XOR seed), a = h>>32,
// b = (h mod 2^32) | 1; row i reads column ((a + i·b) mod 2^32) · t >> 32.
// A key's rank is the largest of its s cells; its value is the group's
// representative for that rank, negated for a negative group. The encoder
// inserts a key's rank into its s cells keeping the smallest (empty cells
// hold 0), which is why a decoded rank never exceeds the true one.
//
// # sketchml (id 2), dense
//
//	flags      1 byte: bit 0 = 1 (dense); bit 1 zero; bit 2 indexes are
//	           Huffman-coded (else packed); bit 3 the update has zeros
//	n          uvarint: values
//	qpos, qneg uvarints, and reps, as above
//	indexes    one symbol per value: 0..qpos-1 positive buckets,
//	           qpos..qpos+qneg-1 negative buckets, qpos+qneg zero (if bit 3).
//	           Packed: ceil(n·bits/8) bytes of bitsFor(A-1)-bit symbols, A the
//	           alphabet size; Huffman: a code table, uvarint stream length,
//	           the stream
//	padding    zero bytes
//
// With no keys to leave out, a sketch cannot beat storing each bucket index,
// so a dense frame stores them; values decode exactly to their bucket's
// representative.
//
// # uniform8 (id 3)
//
//	flags      1 byte: bit 0 dense
//	n          uvarint
//	scale      4 bytes: float32 max|v| (finite, not negative)
//	keys       sparse only: uvarint length, then a delta-binary key list
//	codes      n bytes: int8 in [-127, 127]; value = code·scale/127 in
//	           float64, rounded to float32
//	padding    zero bytes (this layout never needs any)
//
// Stochastic rounding draws its numbers from splitmix64 of a hash of the
// whole update plus the value's index.
//
// # zstd (id 4)
//
//	rawlen     uvarint: length of the raw body (a raw frame less its header)
//	zlen       uvarint
//	zstd       zlen bytes: one zstd frame of the raw body
//	padding    zero bytes
//
// The decoder checks rawlen against the budget before decompressing and
// decompresses into a buffer of exactly rawlen bytes, refusing more.
//
// # Choices and measurements
//
// Figures below are for the news20 logistic-regression gradient at w=0
// over a seeded 10% mini-batch (23,393 keys from 47,539 features;
// BenchmarkNews20, which skips when the data set is absent) and for a
// synthetic 50,000-key Laplace gradient (BenchmarkEncode/Decode).
//
// Quantile sketch. The buckets come from a logarithmic histogram sketch
// (quantile.go): bins of the float bits' exponent and top 8 mantissa bits,
// mergeable by adding counts. Quantiles are within a factor 1+2^-8 of the
// exact ones and bucket boundaries within half a bin's count of the exact
// equal-count ranks (tested against exact quantiles). datasketches-go's KLL
// (v0.2.0) was measured first: it flips its compaction coins with the
// process-wide math/rand source, so the same update gave different splits
// on 20 of 20 runs, which breaks deterministic frames; it sustained about
// 12 M updates/s on one core, below the encoder's 15 M pairs/s target for
// the whole frame; and it needs a module not otherwise required.
//
// Representatives. The mean of a bucket's members (clamped to the bucket
// and kept strictly increasing) gives lower error than the paper's mean of
// the two splits: on a 20k-pair Laplace update, relative L2 error 0.071
// against 0.115 with a wide sketch (mostly quantification error) and 0.354
// against 0.361 at the defaults, where sketch collisions dominate
// (TestRepresentativeChoice); on news20 0.671 against 0.681. Member means
// are the default; RepresentativeSplitMidpoint selects the paper's.
//
// Groups. With equal-width groups almost all of the error comes from each
// side's top group: its 32 equal-count buckets span the heavy tail (a 26×
// range of magnitudes on news20, holding 59% and 33% of the squared norm),
// and an underestimated rank there costs the most. GroupsEqualEnergy cuts
// narrow groups at the top and halves the error (news20: relative L2 0.360
// against 0.671; Laplace: 0.345 against 0.392) at the same padded size
// with automatic coders, but its wide low groups need more cell bits
// (paper coders on news20: 6.57× against 7.19×). It is the default: on
// the codec-bench gradients of every set in the shared data with more than
// a thousand pairs, and on w8a, it gave more compression at less error
// (news20.binary, first gradient: 12.36× at 0.62 against 11.52× at 0.79);
// on mnist10k's and digits' first gradients the paper's layout did better
// (README, "Codecs").
//
// Coders. With KeyCodingAuto and CellCodingAuto (the defaults) the encoder
// computes the size of every combination, including padding, and writes
// the smallest. On news20 Huffman gaps take 0.67 bytes a key against 1.26
// for delta-binary; the frame is 10.8× smaller than 12 bytes a pair.
// Huffman cells save little over packing and the decoder must then hold the unpacked cells, which the
// budget charges, so the encoder often packs.
//
// Throughput on one core (news20, best of five runs on a shared machine,
// so figures varied between runs): sketchml encodes 22-24 M pairs/s and
// decodes 44-49 M; with the paper's coders 58-69 M. Decoding does not
// merge the groups' sorted key lists: it decodes each list whole into its
// stretch of the output, sets each key's bit in a bitmap over the keys'
// range (a bit set twice is a key repeated across lists), counts the keys
// below each 64-bit word, writes each key's value at its rank, and reads
// the sorted keys back off the bitmap. When the bitmap would not fit the
// decode budget beside what the header already claims, the lists are
// decoded again and merged with a branch-free tournament over at most 16
// list heads (a tree of losers beyond that).
package codec
