package codec

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"slices"
	"sync"
)

// Canonical Huffman coding with codes of at most huffMaxBits bits, so one
// table lookup on the next huffMaxBits bits decodes a symbol. The frame
// carries only the code lengths; both sides derive the same canonical codes.
const (
	huffMaxBits    = 12
	huffMaxSymbols = 1 << huffMaxBits
	huffTableSize  = 1 << huffMaxBits
)

// huffLengths returns length-limited Huffman code lengths for the symbol
// frequencies freq (len(freq) ≤ huffMaxSymbols); unused symbols get 0. A
// lone used symbol gets length 1. Ties are broken by symbol so the result is
// deterministic.
func huffLengths(freq []uint32) []uint8 {
	lens := make([]uint8, len(freq))
	type leaf struct {
		f uint64
		s int
	}
	leaves := make([]leaf, 0, 64)
	for s, f := range freq {
		if f > 0 {
			leaves = append(leaves, leaf{uint64(f), s})
		}
	}
	switch len(leaves) {
	case 0:
		return lens
	case 1:
		lens[leaves[0].s] = 1
		return lens
	}
	slices.SortFunc(leaves, func(a, b leaf) int {
		if a.f != b.f {
			if a.f < b.f {
				return -1
			}
			return 1
		}
		return a.s - b.s
	})
	// Two-queue construction: leaves sorted ascending, internal nodes are
	// created in ascending weight order, so the two lightest nodes are always
	// at the head of one of the two queues.
	m := len(leaves)
	weight := make([]uint64, 2*m-1)
	parent := make([]int32, 2*m-1)
	for i, l := range leaves {
		weight[i] = l.f
	}
	li, ii, next := 0, m, m
	pick := func() int {
		if li < m && (ii >= next || weight[li] <= weight[ii]) {
			li++
			return li - 1
		}
		ii++
		return ii - 1
	}
	for next < 2*m-1 {
		a, b := pick(), pick()
		weight[next] = weight[a] + weight[b]
		parent[a], parent[b] = int32(next), int32(next)
		next++
	}
	// Parents always have larger indexes than their children, so one
	// downward sweep yields every depth.
	depth := make([]int32, 2*m-1)
	maxDepth := int32(0)
	for i := 2*m - 3; i >= 0; i-- {
		depth[i] = depth[parent[i]] + 1
		if i < m && depth[i] > maxDepth {
			maxDepth = depth[i]
		}
	}
	count := make([]int, maxDepth+1)
	for i := range m {
		count[depth[i]]++
	}
	// Limit lengths the way JPEG (ITU T.81 K.3) does: move pairs of the
	// deepest leaves up while keeping the Kraft sum exactly one.
	for i := int(maxDepth); i > huffMaxBits; i-- {
		for count[i] > 0 {
			j := i - 2
			for count[j] == 0 {
				j--
			}
			count[i] -= 2
			count[i-1]++
			count[j+1] += 2
			count[j]--
		}
	}
	// The most frequent symbols (end of leaves) get the shortest codes.
	idx := m - 1
	for l := 1; l <= huffMaxBits && l < len(count); l++ {
		for range count[l] {
			lens[leaves[idx].s] = uint8(l)
			idx--
		}
	}
	return lens
}

// huffCanonical assigns canonical codes to lens and stores them in codes
// bit-reversed (first code bit in bit 0), ready for an LSB-first bit stream.
func huffCanonical(lens []uint8, codes []uint16) {
	var count [huffMaxBits + 1]int
	for _, l := range lens {
		count[l]++
	}
	count[0] = 0
	var nextCode [huffMaxBits + 1]uint32
	code := uint32(0)
	for l := 1; l <= huffMaxBits; l++ {
		code = (code + uint32(count[l-1])) << 1
		nextCode[l] = code
	}
	for s, l := range lens {
		if l == 0 {
			continue
		}
		c := nextCode[l]
		nextCode[l]++
		codes[s] = uint16(bits.Reverse32(c) >> (32 - uint(l)))
	}
}

// huffEncoder writes symbols with the codes of a set of lengths.
type huffEncoder struct {
	lens  []uint8
	codes []uint16
}

func newHuffEncoder(lens []uint8) huffEncoder {
	codes := make([]uint16, len(lens))
	huffCanonical(lens, codes)
	return huffEncoder{lens: lens, codes: codes}
}

func (e *huffEncoder) put(w *bitWriter, sym int) {
	w.write(uint64(e.codes[sym]), uint(e.lens[sym]))
}

// huffBits is the number of payload bits freq costs with lens.
func huffBits(freq []uint32, lens []uint8) int {
	total := 0
	for s, f := range freq {
		total += int(f) * int(lens[s])
	}
	return total
}

// appendHuffTable writes the code lengths: uvarint alphabet size A (one past
// the largest used symbol), then A 4-bit lengths, two per byte, low nibble
// first.
func appendHuffTable(dst []byte, lens []uint8) []byte {
	a := len(lens)
	for a > 0 && lens[a-1] == 0 {
		a--
	}
	dst = binary.AppendUvarint(dst, uint64(a))
	for i := 0; i < a; i += 2 {
		b := lens[i]
		if i+1 < a {
			b |= lens[i+1] << 4
		}
		dst = append(dst, b)
	}
	return dst
}

// huffTableLen is the size appendHuffTable writes for lens.
func huffTableLen(lens []uint8) int {
	a := len(lens)
	for a > 0 && lens[a-1] == 0 {
		a--
	}
	return uvarintLen(uint64(a)) + (a+1)/2
}

// huffDecoder maps the next huffMaxBits stream bits to (symbol<<4 | length);
// zero marks bit patterns that no code starts with.
type huffDecoder struct {
	table    [huffTableSize]uint16
	alphabet int
}

// huffDecoders recycles decoders: allocating one per table, 8 KiB each,
// was a third of a small frame's decode time. A decoder is done with
// when its frame is decoded (releaseHuff).
var huffDecoders = sync.Pool{New: func() any { return new(huffDecoder) }}

// releaseHuff returns the decoders of a decoded frame for reuse.
func releaseHuff(ds ...*huffDecoder) {
	for _, d := range ds {
		if d != nil {
			huffDecoders.Put(d)
		}
	}
}

// huffDecoderAlloc is what parseHuffTable allocates.
const huffDecoderAlloc = huffTableSize*2 + 64

// parseHuffTable reads a table written by appendHuffTable whose symbols
// must be below maxSymbols, and returns the decoder and the bytes after it.
func parseHuffTable(b []byte, maxSymbols int, what string) (*huffDecoder, []byte, error) {
	a, n := binary.Uvarint(b)
	if n <= 0 {
		return nil, nil, fmt.Errorf("%w: %s code table: bad alphabet size", ErrCorrupt, what)
	}
	if a == 0 || a > uint64(maxSymbols) {
		return nil, nil, fmt.Errorf("%w: %s code table: alphabet size %d outside [1, %d]", ErrCorrupt, what, a, maxSymbols)
	}
	b = b[n:]
	need := (int(a) + 1) / 2
	if need > len(b) {
		return nil, nil, fmt.Errorf("%w: %s code table needs %d bytes, frame has %d", ErrCorrupt, what, need, len(b))
	}
	var lens [huffMaxSymbols]uint8
	kraft := 0
	used := 0
	longest := uint8(0)
	for i := 0; i < int(a); i++ {
		l := b[i/2] >> (4 * uint(i%2)) & 15
		if l > huffMaxBits {
			return nil, nil, fmt.Errorf("%w: %s code table: code length %d exceeds %d", ErrCorrupt, what, l, huffMaxBits)
		}
		lens[i] = l
		if l > 0 {
			kraft += 1 << (huffMaxBits - l)
			used++
			longest = max(longest, l)
		}
	}
	if a%2 == 1 && b[need-1]>>4 != 0 {
		return nil, nil, fmt.Errorf("%w: %s code table: nonzero padding nibble", ErrCorrupt, what)
	}
	if used == 0 {
		return nil, nil, fmt.Errorf("%w: %s code table has no symbols", ErrCorrupt, what)
	}
	if kraft > huffTableSize {
		return nil, nil, fmt.Errorf("%w: %s code table is over-subscribed", ErrCorrupt, what)
	}
	size := 1 << longest
	d := huffDecoders.Get().(*huffDecoder)
	d.alphabet = int(a)
	// The codes fill the first 2^longest entries (unused patterns stay 0),
	// which repeat up to the table's end, as bits past the longest code
	// do not change an entry: copying is far cheaper than filling every
	// code's 2^(12-length) entries one by one.
	clear(d.table[:size])
	var codes [huffMaxSymbols]uint16
	huffCanonical(lens[:a], codes[:a])
	for s := 0; s < int(a); s++ {
		l := lens[s]
		if l == 0 {
			continue
		}
		e := uint16(s)<<4 | uint16(l)
		for k := int(codes[s]); k < size; k += 1 << l {
			d.table[k] = e
		}
	}
	for k := size; k < huffTableSize; k *= 2 {
		copy(d.table[k:2*k], d.table[:k])
	}
	return d, b[need:], nil
}

// next decodes one symbol; ok is false on a bit pattern no code starts with.
func (d *huffDecoder) next(r *bitReader) (sym int, ok bool) {
	if r.n < huffMaxBits {
		r.refill()
	}
	e := d.table[r.peek(huffMaxBits)]
	r.skip(uint(e & 15))
	return int(e >> 4), e != 0
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}
