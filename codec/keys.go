package codec

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
)

// A key list is a strictly ascending run of uint64 keys coded as gaps: the
// first gap is the first key itself, each later gap is key[i]-key[i-1]-1, so
// every uint64 gap is representable and the list is lossless for any sorted
// key set, keys 0 and 2^64-1 included. Two coders write the gaps.
//
// Delta-binary (the paper's section 3.4, with a per-list width table):
//
//	widths   2 bytes: four byte widths w0<w1<w2<w3 in 1..8, stored as w-1 in
//	         3-bit fields: byte 0 bits 0-2 = w0, 3-5 = w1; byte 1 bits 0-2 = w2,
//	         3-5 = w3; the other bits are zero
//	flags    ceil(count/4) bytes: a 2-bit width selector per gap, gap i in
//	         bits 2(i%4)..2(i%4)+1 of byte i/4; unused bits zero
//	data     each gap little-endian in its selected width
//
// The encoder picks the four widths that minimise the data bytes of the
// list, with the largest width large enough for the largest gap, so a list
// of 8-byte gaps costs 8 bytes a gap and a dense one 1 byte.
//
// Huffman gaps (entropy-coded): each gap is a symbol of a shared canonical
// Huffman code (see gapSymbol) followed by its extra bits, all in one
// LSB-first bit stream per list, padded with zero bits to a whole byte.

// keyCoding values as written in frames.
const (
	keyCodeDeltaBinary = 0
	keyCodeHuffman     = 1
)

// Minimum cost of one key in each coder, which bounds how many keys a frame
// of a given size can claim: delta-binary spends a 2-bit flag and at least
// one data byte, a Huffman gap at least one bit.
const (
	minBitsPerKeyDeltaBinary = 10
	minBitsPerKeyHuffman     = 1
)

// gapSymbols is the size of the gap alphabet. Gaps below 16 are their own
// symbol; a larger gap of bit length L (5..64) maps to 16+4(L-5)+t, where t
// is the two bits below its leading one, followed by its L-3 low bits. The
// buckets are log-linear, so the code adapts to any gap distribution while
// the extra bits stay nearly uniform.
const gapSymbols = 256

func gapSymbol(x uint64) (sym int, extraBits uint) {
	if x < 16 {
		return int(x), 0
	}
	l := uint(bits.Len64(x))
	t := int(x>>(l-3)) & 3
	return 16 + 4*int(l-5) + t, l - 3
}

func byteLen(x uint64) int {
	if x == 0 {
		return 1
	}
	return (bits.Len64(x) + 7) / 8
}

// dbWidths are the four byte widths a delta-binary list selects from.
type dbWidths [4]uint8

// chooseWidths returns the widths minimising the data bytes of a list with
// byte-length histogram hist, and that size.
func chooseWidths(hist *[9]int) (dbWidths, int) {
	maxLen := 1
	for l := 8; l >= 1; l-- {
		if hist[l] > 0 {
			maxLen = l
			break
		}
	}
	best, bestSize := dbWidths{}, math.MaxInt
	for a := 1; a <= 8; a++ {
		for b := a + 1; b <= 8; b++ {
			for c := b + 1; c <= 8; c++ {
				for d := c + 1; d <= 8; d++ {
					if d < maxLen {
						continue
					}
					w := dbWidths{uint8(a), uint8(b), uint8(c), uint8(d)}
					size := 0
					for l := 1; l <= 8; l++ {
						size += hist[l] * int(w[w.sel(l)])
					}
					if size < bestSize {
						best, bestSize = w, size
					}
				}
			}
		}
	}
	return best, bestSize
}

// sel is the selector of the narrowest width holding l bytes.
func (w dbWidths) sel(l int) int {
	for i := range 3 {
		if int(w[i]) >= l {
			return i
		}
	}
	return 3
}

func dbPayloadLen(count, dataBytes int) int { return 2 + (count+3)/4 + dataBytes }

// appendDeltaBinary appends the delta-binary payload of keys.
func appendDeltaBinary(dst []byte, keys []uint64) []byte {
	w, dataBytes := deltaBinaryPlan(keys)
	return appendDeltaBinaryWidths(dst, keys, w, dataBytes)
}

// deltaBinaryPlan returns the widths of keys' delta-binary list and the
// bytes of its gaps (the payload is dbPayloadLen of them).
func deltaBinaryPlan(keys []uint64) (dbWidths, int) {
	var hist [9]int
	prev := uint64(0)
	for i, k := range keys {
		x := k
		if i > 0 {
			x = k - prev - 1
		}
		prev = k
		hist[byteLen(x)]++
	}
	return chooseWidths(&hist)
}

func appendDeltaBinaryWidths(dst []byte, keys []uint64, w dbWidths, dataBytes int) []byte {
	start := len(dst)
	flagsLen := (len(keys) + 3) / 4
	total := 2 + flagsLen + dataBytes
	dst = slicesGrow(dst, total+8)
	out := dst[start : start+total+8]
	clear(out[:2+flagsLen])
	out[0] = (w[0] - 1) | (w[1]-1)<<3
	out[1] = (w[2] - 1) | (w[3]-1)<<3
	var lenSel [9]uint8
	for l := 1; l <= 8; l++ {
		lenSel[l] = uint8(w.sel(l))
	}
	flags := out[2 : 2+flagsLen]
	pos := 2 + flagsLen
	prev := uint64(0)
	for i, k := range keys {
		x := k
		if i > 0 {
			x = k - prev - 1
		}
		prev = k
		sel := lenSel[byteLen(x)]
		flags[i>>2] |= sel << (2 * uint(i&3))
		binary.LittleEndian.PutUint64(out[pos:], x)
		pos += int(w[sel])
	}
	return dst[:start+total]
}

// appendHuffGaps appends the Huffman payload of keys with code enc.
func appendHuffGaps(dst []byte, keys []uint64, enc *huffEncoder) []byte {
	bw := bitWriter{buf: dst}
	prev := uint64(0)
	for i, k := range keys {
		x := k
		if i > 0 {
			x = k - prev - 1
		}
		prev = k
		sym, eb := gapSymbol(x)
		enc.put(&bw, sym)
		if eb > 0 {
			bw.writeLong(x, eb)
		}
	}
	return bw.flush()
}

// slicesGrow returns b with room for n more bytes.
func slicesGrow(b []byte, n int) []byte {
	if cap(b)-len(b) < n {
		nb := make([]byte, len(b), 2*cap(b)+n)
		copy(nb, b)
		return nb
	}
	return b
}

// keyReader decodes one key list of either coder a batch at a time, so a
// decoder can merge several lists without buffering them whole. Keys are
// rebuilt with wrapping arithmetic: a gap that overflows uint64 yields a key
// not above its predecessor, which the caller's ascending-order check
// rejects.
type keyReader struct {
	count int
	i     int
	prev  uint64 // last key; MaxUint64 before the first, so key = prev+gap+1 throughout

	// delta-binary
	flags  []byte
	data   []byte
	pos    int
	widths dbWidths

	// Huffman
	huff *huffDecoder
	br   bitReader
}

// maxKeys is the largest count a payload of n bytes can hold in coder.
func maxKeys(coder int, n int) int {
	if coder == keyCodeDeltaBinary {
		return n * 8 / minBitsPerKeyDeltaBinary
	}
	return n * 8 / minBitsPerKeyHuffman
}

// newKeyReader checks payload's framing for count keys and returns a reader.
// huff is the gap code for keyCodeHuffman; its alphabet must be within
// gapSymbols.
func newKeyReader(coder int, payload []byte, count int, huff *huffDecoder) (keyReader, error) {
	r := keyReader{count: count, prev: math.MaxUint64}
	if count > maxKeys(coder, len(payload)) {
		return r, fmt.Errorf("%w: %d keys cannot fit in %d bytes", ErrCorrupt, count, len(payload))
	}
	if coder == keyCodeHuffman {
		r.huff = huff
		r.br = newBitReader(payload)
		return r, nil
	}
	flagsLen := (count + 3) / 4
	if len(payload) < 2+flagsLen {
		return r, fmt.Errorf("%w: delta-binary list of %d keys needs %d header bytes, has %d", ErrCorrupt, count, 2+flagsLen, len(payload))
	}
	if payload[0]>>6 != 0 || payload[1]>>6 != 0 {
		return r, fmt.Errorf("%w: delta-binary width table has reserved bits set", ErrCorrupt)
	}
	r.widths = dbWidths{payload[0]&7 + 1, payload[0]>>3&7 + 1, payload[1]&7 + 1, payload[1]>>3&7 + 1}
	for i := 1; i < 4; i++ {
		if r.widths[i] <= r.widths[i-1] {
			return r, fmt.Errorf("%w: delta-binary widths %v are not increasing", ErrCorrupt, r.widths)
		}
	}
	r.flags = payload[2 : 2+flagsLen]
	if rem := count % 4; rem != 0 && r.flags[flagsLen-1]>>(2*uint(rem)) != 0 {
		return r, fmt.Errorf("%w: delta-binary unused flag bits are set", ErrCorrupt)
	}
	r.data = payload[2+flagsLen:]
	if len(r.data) < count*int(r.widths[0]) || len(r.data) > count*int(r.widths[3]) {
		return r, fmt.Errorf("%w: delta-binary data of %d bytes cannot hold %d keys of widths %v", ErrCorrupt, len(r.data), count, r.widths)
	}
	return r, nil
}

// rewind returns the reader to its first key.
func (r *keyReader) rewind() {
	r.i, r.prev, r.pos = 0, math.MaxUint64, 0
	if r.huff != nil {
		r.br = newBitReader(r.br.b)
	}
}

// remaining is the number of keys not yet decoded.
func (r *keyReader) remaining() int { return r.count - r.i }

// batch decodes the next len(buf) keys, which must not exceed remaining.
func (r *keyReader) batch(buf []uint64) error {
	prev := r.prev
	if r.huff == nil {
		flags, data, pos, i, widths := r.flags, r.data, r.pos, r.i, r.widths
		for j := range buf {
			w := int(widths[flags[i>>2]>>(2*uint(i&3))&3])
			var x uint64
			if pos+8 <= len(data) {
				x = binary.LittleEndian.Uint64(data[pos:]) & (^uint64(0) >> (64 - 8*uint(w)))
			} else {
				if pos+w > len(data) {
					return fmt.Errorf("%w: delta-binary data ends inside key %d", ErrCorrupt, i)
				}
				for b := w - 1; b >= 0; b-- {
					x = x<<8 | uint64(data[pos+b])
				}
			}
			pos += w
			i++
			prev += x + 1
			buf[j] = prev
		}
		r.pos = pos
	} else {
		// The stream state stays in locals (registers); the buffer is
		// refilled only when the next code or its extra bits may not fit.
		b, pos, acc, n := r.br.b, r.br.pos, r.br.acc, r.br.n
		table := &r.huff.table
		for j := range buf {
			// A code and up to 32 extra bits fit in one refill.
			if n < huffMaxBits+32 {
				pos, acc, n = fillBits(b, pos, acc, n)
			}
			e := table[acc&(huffTableSize-1)]
			if e == 0 {
				return fmt.Errorf("%w: invalid gap code at key %d", ErrCorrupt, r.i+j)
			}
			cl := uint(e & 15)
			acc >>= cl
			n -= cl
			sym := uint(e >> 4)
			x := uint64(sym)
			if sym >= 16 {
				eb := (sym-16)>>2 + 2
				x = uint64(4|sym&3) << eb
				if eb > 32 {
					// Gaps of 2^35 and more: the low 32 extra bits first.
					if n < 32 {
						pos, acc, n = fillBits(b, pos, acc, n)
					}
					x |= acc & (1<<32 - 1)
					acc >>= 32
					n -= 32
					eb -= 32
					pos, acc, n = fillBits(b, pos, acc, n)
					x |= (acc & (1<<eb - 1)) << 32
				} else {
					x |= acc & (1<<eb - 1)
				}
				acc >>= eb
				n -= eb
			}
			prev += x + 1
			buf[j] = prev
		}
		r.br.pos, r.br.acc, r.br.n = pos, acc, n
	}
	r.prev = prev
	r.i += len(buf)
	return nil
}

// finish checks that the list's payload was consumed exactly.
func (r *keyReader) finish() error {
	if r.huff != nil {
		if err := r.br.finish(); err != nil {
			return fmt.Errorf("key list: %w", err)
		}
		return nil
	}
	if r.pos != len(r.data) {
		return fmt.Errorf("%w: delta-binary data has %d bytes, keys used %d", ErrCorrupt, len(r.data), r.pos)
	}
	return nil
}
