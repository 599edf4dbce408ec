package codec

import "encoding/binary"

// The MinMaxSketch of SketchML: a key's row hashes and columns, and the
// packed cell table a decoder queries.

// mix64 is the splitmix64 finaliser, a bijective 64-bit mixer.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// keyHash derives a key's row hashes: row i uses a + i·b (mod 2^32), the
// double hashing of Kirsch and Mitzenmacher, mapped to a column by
// multiply-shift.
func keyHash(key, seed uint64) (a, b uint32) {
	h := mix64(key ^ seed)
	return uint32(h >> 32), uint32(h) | 1
}

func column(a, b uint32, row int, t uint32) uint32 {
	return uint32(uint64(a+uint32(row)*b) * uint64(t) >> 32)
}

// cellTable holds packed cells of nbits bits, row-major. data runs past
// the cells to the end of its buffer so most reads are one 4-byte load.
type cellTable struct {
	data  []byte
	t     uint32
	nbits uint32
	mask  uint32
}

// query returns the MinMaxSketch estimate for key: the largest of its
// cells over the rows.
func (c *cellTable) query(key, seed uint64, rows int) uint32 {
	a, b := keyHash(key, seed)
	data, t, nbits, mask := c.data, uint64(c.t), uint64(c.nbits), c.mask
	rank := uint32(0)
	rowBase := uint64(0)
	for ; rows > 0; rows-- {
		bit := (rowBase + uint64(a)*t>>32) * nbits
		off := bit >> 3
		var v uint32
		if off+4 <= uint64(len(data)) {
			v = binary.LittleEndian.Uint32(data[off : off+4])
		} else {
			v = loadTail(data, off)
		}
		rank = max(rank, v>>(bit&7)&mask)
		a += b
		rowBase += t
	}
	return rank
}

// loadTail reads up to 4 bytes at off, little-endian, zero past the end.
func loadTail(data []byte, off uint64) uint32 {
	var v uint32
	for j := uint64(0); j < 4 && off+j < uint64(len(data)); j++ {
		v |= uint32(data[off+j]) << (8 * j)
	}
	return v
}
