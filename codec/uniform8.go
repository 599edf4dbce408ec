package codec

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Uniform8 is the ZipML-style baseline: each value becomes a signed byte
// code in [-127, 127] on a uniform grid of step max|v|/127, keys are
// delta-binary coded. With Stochastic, a value rounds up with probability
// equal to its fractional position between the two grid points around it,
// which makes the decoded value unbiased; the random numbers come from a
// hash of the update's content, so encoding stays deterministic. Without
// it, values round to the nearest grid point. Either way a decoded value
// keeps its sign or is zero, and its magnitude is at most the grid point at
// or above the original's.
type Uniform8 struct {
	Stochastic bool
}

func init() { register(IDUniform8, Uniform8{Stochastic: true}, decodeUniform8) }

// Name implements Codec.
func (Uniform8) Name() string { return "uniform8" }

const u8FlagDense = 1

// Encode implements Codec.
func (c Uniform8) Encode(dst []byte, u Sparse) ([]byte, error) {
	dst, _, err := c.encode(dst, u, false)
	return dst, err
}

// u8Value is the value code c decodes to on the grid of scale; encoder
// bounds and decoder share it so they agree to the bit.
func u8Value(c int, scale float32) float32 {
	return float32(float64(c) * float64(scale) / 127)
}

// contentSeed hashes an update's keys and values.
func contentSeed(u Sparse) uint64 {
	h := uint64(len(u.Values))
	for _, k := range u.Keys {
		h = mix64(h ^ k)
	}
	for _, v := range u.Values {
		h = mix64(h ^ uint64(math.Float32bits(v)))
	}
	return h
}

func (c Uniform8) encode(dst []byte, u Sparse, wantBounds bool) ([]byte, frameStats, error) {
	if err := validate(u); err != nil {
		return dst, frameStats{}, err
	}
	n := len(u.Values)
	var scale float32
	for _, v := range u.Values {
		scale = max(scale, float32(math.Abs(float64(v))))
	}
	var st frameStats
	start := len(dst)
	dst = appendHeader(dst, IDUniform8)
	var flags byte
	if u.Dense() {
		flags = u8FlagDense
	}
	dst = append(dst, flags)
	dst = binary.AppendUvarint(dst, uint64(n))
	dst = binary.LittleEndian.AppendUint32(dst, math.Float32bits(scale))
	if !u.Dense() {
		mark := len(dst)
		keys := appendDeltaBinary(nil, u.Keys)
		dst = binary.AppendUvarint(dst, uint64(len(keys)))
		dst = append(dst, keys...)
		st.keyBytes = len(dst) - mark
	}
	var seed uint64
	if c.Stochastic {
		seed = contentSeed(u)
	}
	if wantBounds {
		st.upper = make([]float32, n)
	}
	step := float64(scale) / 127
	for i, v := range u.Values {
		code := 0
		if scale > 0 {
			x := math.Abs(float64(v)) / step
			fl := math.Floor(x)
			if c.Stochastic {
				r := float64(mix64(seed+uint64(i))>>11) * 0x1p-53
				if r < x-fl {
					fl++
				}
			} else {
				fl = math.Round(x)
			}
			code = int(min(fl, 127))
			if wantBounds {
				st.upper[i] = u8Value(int(min(math.Ceil(x), 127)), scale)
			}
		}
		if v < 0 {
			code = -code
		}
		d := float64(u8Value(code, scale)) - float64(v)
		st.sqErr += d * d
		dst = append(dst, byte(int8(code)))
	}
	// Uniform8 frames cost at least 2.25 bytes per pair and need at most 12
	// to decode, so they always fit the decode budget; the call keeps that
	// true if the layout changes.
	dst, st.padBytes = appendPadding(dst, start, u8Need(n, u.Dense()))
	return dst, st, nil
}

// u8Len is the length of u's uniform8 frame.
func u8Len(u Sparse) int {
	n := len(u.Values)
	size := headerLen + 1 + uvarintLen(uint64(n)) + 4 + n
	if !u.Dense() {
		_, dataBytes := deltaBinaryPlan(u.Keys)
		keys := dbPayloadLen(n, dataBytes)
		size += uvarintLen(uint64(keys)) + keys
	}
	return size
}

func u8Need(n int, dense bool) int {
	if dense {
		return allocCost(4 * n)
	}
	return allocCost(8*n) + allocCost(4*n)
}

func decodeUniform8(body []byte) (Sparse, error) {
	p := parser{b: body}
	flags := p.byte("flags")
	n := p.count("pair count n", maxCount)
	scaleBits := p.uint32("scale")
	if p.err != nil {
		return Sparse{}, p.err
	}
	if flags&^u8FlagDense != 0 {
		return Sparse{}, fmt.Errorf("%w: unknown flags %#x", ErrCorrupt, flags)
	}
	scale := math.Float32frombits(scaleBits)
	if math.IsNaN(float64(scale)) || math.IsInf(float64(scale), 0) {
		return Sparse{}, fmt.Errorf("%w: scale %v: %w", ErrCorrupt, scale, ErrNotFinite)
	}
	if scaleBits > 0x7F7FFFFF {
		return Sparse{}, fmt.Errorf("%w: scale %v is negative", ErrCorrupt, scale)
	}
	dense := flags&u8FlagDense != 0
	var kr keyReader
	if !dense {
		kl := p.count("key list length", uint64(len(p.b)))
		kp := p.bytes(kl, "key list")
		if p.err != nil {
			return Sparse{}, p.err
		}
		var err error
		if kr, err = newKeyReader(keyCodeDeltaBinary, kp, n, nil); err != nil {
			return Sparse{}, err
		}
	}
	codes := p.bytes(n, "value codes")
	if p.err != nil {
		return Sparse{}, p.err
	}
	if err := checkBudget(u8Need(n, dense), len(body)+headerLen, fmt.Sprintf("n=%d pairs", n)); err != nil {
		return Sparse{}, err
	}
	if err := checkPadding(p.b); err != nil {
		return Sparse{}, err
	}
	u := Sparse{Values: make([]float32, n)}
	if !dense {
		u.Keys = make([]uint64, n)
		if err := kr.batch(u.Keys); err != nil {
			return Sparse{}, err
		}
		if err := kr.finish(); err != nil {
			return Sparse{}, err
		}
		for i := 1; i < n; i++ {
			if u.Keys[i] <= u.Keys[i-1] {
				return Sparse{}, fmt.Errorf("%w: key %d overflows uint64 after key %d", ErrCorrupt, i, u.Keys[i-1])
			}
		}
	}
	for i, b := range codes {
		c := int(int8(b))
		if c == -128 {
			return Sparse{}, fmt.Errorf("%w: value code -128 at index %d", ErrCorrupt, i)
		}
		u.Values[i] = u8Value(c, scale)
	}
	return u, nil
}
