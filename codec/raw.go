package codec

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Raw is the uncompressed codec: a flags byte, a uvarint count, then count
// little-endian uint64 keys (absent for a dense update) and count float32
// values. It is lossless.
type Raw struct{}

const rawFlagDense = 1

func init() { register(IDRaw, Raw{}, decodeRaw) }

// Name implements Codec.
func (Raw) Name() string { return "raw" }

// Encode implements Codec.
func (Raw) Encode(dst []byte, u Sparse) ([]byte, error) {
	if err := validate(u); err != nil {
		return dst, err
	}
	dst = appendHeader(dst, IDRaw)
	var flags byte
	if u.Dense() {
		flags = rawFlagDense
	}
	dst = append(dst, flags)
	dst = binary.AppendUvarint(dst, uint64(len(u.Values)))
	for _, k := range u.Keys {
		dst = binary.LittleEndian.AppendUint64(dst, k)
	}
	for _, v := range u.Values {
		dst = binary.LittleEndian.AppendUint32(dst, math.Float32bits(v))
	}
	return dst, nil
}

func decodeRaw(body []byte) (Sparse, error) {
	if len(body) < 1 {
		return Sparse{}, fmt.Errorf("%w: missing flags", ErrCorrupt)
	}
	flags := body[0]
	if flags&^rawFlagDense != 0 {
		return Sparse{}, fmt.Errorf("%w: unknown flags %#x", ErrCorrupt, flags)
	}
	dense := flags&rawFlagDense != 0
	n, w := binary.Uvarint(body[1:])
	if w <= 0 {
		return Sparse{}, fmt.Errorf("%w: bad count", ErrCorrupt)
	}
	rest := body[1+w:]
	per := uint64(12)
	if dense {
		per = 4
	}
	if n > uint64(len(rest))/per || uint64(len(rest)) != n*per {
		return Sparse{}, fmt.Errorf("%w: count %d needs %d bytes, frame has %d", ErrCorrupt, n, n*per, len(rest))
	}
	u := Sparse{Values: make([]float32, n)}
	if !dense {
		u.Keys = make([]uint64, n)
		for i := range u.Keys {
			u.Keys[i] = binary.LittleEndian.Uint64(rest[8*i:])
			if i > 0 && u.Keys[i] <= u.Keys[i-1] {
				return Sparse{}, fmt.Errorf("%w: key %d follows key %d", ErrCorrupt, u.Keys[i], u.Keys[i-1])
			}
		}
		rest = rest[8*n:]
	}
	for i := range u.Values {
		v := math.Float32frombits(binary.LittleEndian.Uint32(rest[4*i:]))
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return Sparse{}, fmt.Errorf("%w: value %v at index %d: %w", ErrCorrupt, v, i, ErrNotFinite)
		}
		u.Values[i] = v
	}
	return u, nil
}

// encode is Encode with the statistics Measure reports.
func (r Raw) encode(dst []byte, u Sparse, _ bool) ([]byte, frameStats, error) {
	dst, err := r.Encode(dst, u)
	if u.Dense() {
		return dst, frameStats{}, err
	}
	return dst, frameStats{keyBytes: 8 * len(u.Keys)}, err
}
