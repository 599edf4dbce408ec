package sfb

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/sketchmesh/sketchmesh/codec"
)

// ErrBadFrame is wrapped by every decoding error.
var ErrBadFrame = errors.New("bad factor frame")

const (
	magic0  = 'S'
	magic1  = 'F'
	version = 1
)

// Factors are the sufficient factors of one update: B[i] has K values, C[i]
// is sample i's sparse features (keys below Stride, key 0 the bias).
type Factors struct {
	K      int
	Stride uint64
	B      [][]float32
	C      []codec.Sparse
}

// IsFrame reports whether data starts like a factor frame.
func IsFrame(data []byte) bool {
	return len(data) >= 3 && data[0] == magic0 && data[1] == magic1
}

// Encode writes f as a factor frame, coding both parts with c.
func Encode(c codec.Codec, f Factors) ([]byte, error) {
	if f.K < 1 || f.Stride < 1 || len(f.B) != len(f.C) {
		return nil, fmt.Errorf("sfb: encode: K %d, stride %d, %d b and %d c factors", f.K, f.Stride, len(f.B), len(f.C))
	}
	s := len(f.B)
	if f.Stride > math.MaxUint64/uint64(max(s, 1)) {
		return nil, fmt.Errorf("sfb: encode: %d samples × stride %d overflows the key space", s, f.Stride)
	}
	bs := make([]float32, 0, s*f.K)
	var ckeys []uint64
	var cvals []float32
	for i := range f.B {
		if len(f.B[i]) != f.K {
			return nil, fmt.Errorf("sfb: encode: b_%d has %d values, want K=%d", i, len(f.B[i]), f.K)
		}
		bs = append(bs, f.B[i]...)
		for j, k := range f.C[i].Keys {
			if k >= f.Stride {
				return nil, fmt.Errorf("sfb: encode: c_%d key %d is outside the stride %d", i, k, f.Stride)
			}
			ckeys = append(ckeys, uint64(i)*f.Stride+k)
			cvals = append(cvals, f.C[i].Values[j])
		}
	}
	bFrame, err := c.Encode(nil, codec.Sparse{Values: bs})
	if err != nil {
		return nil, fmt.Errorf("sfb: encode b factors: %w", err)
	}
	if ckeys == nil {
		ckeys = []uint64{}
	}
	out := []byte{magic0, magic1, version}
	out = binary.AppendUvarint(out, uint64(f.K))
	out = binary.AppendUvarint(out, f.Stride)
	out = binary.AppendUvarint(out, uint64(s))
	out = binary.AppendUvarint(out, uint64(len(bFrame)))
	out = append(out, bFrame...)
	out, err = c.Encode(out, codec.Sparse{Keys: ckeys, Values: cvals})
	if err != nil {
		return nil, fmt.Errorf("sfb: encode c factors: %w", err)
	}
	return out, nil
}

// Decode parses a factor frame for a model with k classes and the given
// stride; a frame for another shape is refused before its factors are
// decoded.
func Decode(data []byte, k int, stride uint64) (Factors, error) {
	if !IsFrame(data) {
		return Factors{}, fmt.Errorf("%w: bad magic", ErrBadFrame)
	}
	if data[2] != version {
		return Factors{}, fmt.Errorf("%w: version %d, want %d", ErrBadFrame, data[2], version)
	}
	rest := data[3:]
	next := func(what string) (uint64, error) {
		v, n := binary.Uvarint(rest)
		if n <= 0 {
			return 0, fmt.Errorf("%w: bad %s", ErrBadFrame, what)
		}
		rest = rest[n:]
		return v, nil
	}
	fk, err := next("K")
	if err != nil {
		return Factors{}, err
	}
	if fk != uint64(k) {
		return Factors{}, fmt.Errorf("%w: %d classes, the model has %d", ErrBadFrame, fk, k)
	}
	fs, err := next("stride")
	if err != nil {
		return Factors{}, err
	}
	if fs != stride {
		return Factors{}, fmt.Errorf("%w: stride %d, the model has %d", ErrBadFrame, fs, stride)
	}
	s, err := next("sample count")
	if err != nil {
		return Factors{}, err
	}
	bLen, err := next("b length")
	if err != nil {
		return Factors{}, err
	}
	// Each sample needs at least one b value of at least one byte, so the
	// count is bounded by the frame before anything is allocated.
	if s > uint64(len(rest)) || bLen > uint64(len(rest)) {
		return Factors{}, fmt.Errorf("%w: %d samples and a %d-byte b frame cannot fit in %d bytes", ErrBadFrame, s, bLen, len(rest))
	}
	b, err := codec.Decode(rest[:bLen])
	if err != nil {
		return Factors{}, fmt.Errorf("%w: b factors: %v", ErrBadFrame, err)
	}
	if !b.Dense() || uint64(len(b.Values)) != s*uint64(k) {
		return Factors{}, fmt.Errorf("%w: b frame holds %d values, want %d samples × %d classes", ErrBadFrame, len(b.Values), s, k)
	}
	c, err := codec.Decode(rest[bLen:])
	if err != nil {
		return Factors{}, fmt.Errorf("%w: c factors: %v", ErrBadFrame, err)
	}
	if c.Dense() {
		return Factors{}, fmt.Errorf("%w: c frame is dense", ErrBadFrame)
	}
	f := Factors{K: k, Stride: stride, B: make([][]float32, s), C: make([]codec.Sparse, s)}
	for i := range f.B {
		f.B[i] = b.Values[i*k : (i+1)*k : (i+1)*k]
	}
	// Keys ascend, so each sample's keys are one contiguous run.
	start := 0
	for i := range f.C {
		lo, hi := uint64(i)*stride, uint64(i+1)*stride
		end := start
		for end < len(c.Keys) && c.Keys[end] < hi {
			end++
		}
		keys := make([]uint64, end-start)
		for j := range keys {
			keys[j] = c.Keys[start+j] - lo
		}
		f.C[i] = codec.Sparse{Keys: keys, Values: c.Values[start:end:end]}
		start = end
	}
	if start != len(c.Keys) {
		return Factors{}, fmt.Errorf("%w: c frame has keys beyond sample %d", ErrBadFrame, s)
	}
	return f, nil
}

// Norm returns Σ_i ‖b_i‖·‖c_i‖, an upper bound on the Frobenius norm of the
// update, computed without building it. It is NaN or Inf when a factor is.
func (f Factors) Norm() float64 {
	var sum float64
	for i := range f.B {
		sum += l2(f.B[i]) * l2(f.C[i].Values)
	}
	return sum
}

func l2(v []float32) float64 {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	return math.Sqrt(s)
}

// Accumulator holds reusable memory for Reconstruct. The zero value is
// ready; it is not safe for concurrent use.
type Accumulator struct {
	dense   []float64
	touched []bool
	keys    []uint64
}

// Reconstruct builds the update Σ_i b_i c_iᵀ as a sparse vector over the
// model's keys (class c's block starts at c·Stride). Summation runs sample by
// sample in index order, so the result is deterministic. acc may be nil.
func (f Factors) Reconstruct(acc *Accumulator) codec.Sparse {
	if acc == nil {
		acc = &Accumulator{}
	}
	size := f.K * int(f.Stride)
	if len(acc.dense) < size {
		acc.dense = make([]float64, size)
		acc.touched = make([]bool, size)
	}
	acc.keys = acc.keys[:0]
	for i := range f.B {
		for j, key := range f.C[i].Keys {
			x := float64(f.C[i].Values[j])
			for c, b := range f.B[i] {
				k := uint64(c)*f.Stride + key
				if !acc.touched[k] {
					acc.touched[k] = true
					acc.keys = append(acc.keys, k)
				}
				acc.dense[k] += float64(b) * x
			}
		}
	}
	slices.Sort(acc.keys)
	out := codec.Sparse{Keys: slices.Clone(acc.keys), Values: make([]float32, len(acc.keys))}
	for i, k := range out.Keys {
		out.Values[i] = float32(acc.dense[k])
		acc.dense[k] = 0
		acc.touched[k] = false
	}
	if out.Keys == nil {
		out.Keys = []uint64{}
	}
	return out
}
