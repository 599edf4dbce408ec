package codec

import (
	"encoding/binary"
	"fmt"
)

// bitWriter appends bits least-significant first: the first bit written is
// bit 0 of the first byte. Huffman codes are stored bit-reversed so a reader
// can index its decode table with the next bits as they come.
type bitWriter struct {
	buf []byte
	acc uint64
	n   uint // valid bits in acc, always < 32 between calls
}

// write appends the low nb bits of v; nb ≤ 32.
func (w *bitWriter) write(v uint64, nb uint) {
	w.acc |= (v & (1<<nb - 1)) << w.n
	w.n += nb
	if w.n >= 32 {
		w.buf = binary.LittleEndian.AppendUint32(w.buf, uint32(w.acc))
		w.acc >>= 32
		w.n -= 32
	}
}

// writeLong appends the low nb bits of v for any nb ≤ 64.
func (w *bitWriter) writeLong(v uint64, nb uint) {
	if nb > 32 {
		w.write(v, 32)
		v >>= 32
		nb -= 32
	}
	w.write(v, nb)
}

// flush pads the last byte with zero bits and returns the buffer.
func (w *bitWriter) flush() []byte {
	for w.n > 0 {
		w.buf = append(w.buf, byte(w.acc))
		w.acc >>= 8
		w.n -= min(w.n, 8)
	}
	return w.buf
}

// bitReader reads what bitWriter wrote. Past the end of its slice it reads
// zero bits and counts them, so a hostile stream cannot make it read outside
// its slice; finish reports whether the stream was consumed exactly.
type bitReader struct {
	b   []byte
	pos int // next byte of b to load; may pass len(b) when reading zeros
	acc uint64
	n   uint // valid bits in acc
}

func newBitReader(b []byte) bitReader { return bitReader{b: b} }

// refill tops acc up to at least 57 valid bits. The check is separate from
// the work so that it inlines.
func (r *bitReader) refill() {
	if r.n <= 56 {
		r.fill()
	}
}

func (r *bitReader) fill() { r.pos, r.acc, r.n = fillBits(r.b, r.pos, r.acc, r.n) }

// fillBits is fill on explicit state, so hot loops can keep the state in
// registers.
func fillBits(b []byte, pos int, acc uint64, n uint) (int, uint64, uint) {
	if pos+8 <= len(b) {
		// Load 8 bytes and keep the whole ones that fit. The bits loaded
		// above n+8k are the true next stream bits, so the next refill ORs
		// identical values over them.
		acc |= binary.LittleEndian.Uint64(b[pos:]) << n
		k := (64 - n) >> 3
		return pos + int(k), acc, n + k<<3
	}
	for n <= 56 {
		var c byte
		if pos < len(b) {
			c = b[pos]
		}
		pos++
		acc |= uint64(c) << n
		n += 8
	}
	return pos, acc, n
}

// peek returns the next nb bits without consuming them; call refill first.
func (r *bitReader) peek(nb uint) uint64 { return r.acc & (1<<nb - 1) }

func (r *bitReader) skip(nb uint) {
	r.acc >>= nb
	r.n -= nb
}

// read consumes nb ≤ 56 bits; it refills as needed.
func (r *bitReader) read(nb uint) uint64 {
	if r.n < nb {
		r.refill()
	}
	v := r.acc & (1<<nb - 1)
	r.acc >>= nb
	r.n -= nb
	return v
}

// consumed is the number of bits read so far.
func (r *bitReader) consumed() int { return r.pos*8 - int(r.n) }

// finish checks that the reader consumed its slice exactly: no bit past the
// end, no whole byte left over, and zero padding bits in the last byte.
func (r *bitReader) finish() error {
	c := r.consumed()
	if c > 8*len(r.b) {
		return fmt.Errorf("%w: bit stream overrun: read %d bits of %d", ErrCorrupt, c, 8*len(r.b))
	}
	if (c+7)/8 != len(r.b) {
		return fmt.Errorf("%w: bit stream has %d bytes, used %d", ErrCorrupt, len(r.b), (c+7)/8)
	}
	if c%8 != 0 && r.b[len(r.b)-1]>>(c%8) != 0 {
		return fmt.Errorf("%w: bit stream padding is not zero", ErrCorrupt)
	}
	return nil
}
