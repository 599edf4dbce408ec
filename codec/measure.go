package codec

import (
	"fmt"
	"math"
)

// Measurement compares an update with what its frame decodes to.
type Measurement struct {
	Name  string `json:"name"`
	Pairs int    `json:"pairs"`
	// Bytes is the frame size, header and any padding included.
	Bytes int `json:"bytes"`
	// KeyBytes is what the frame spends on keys (for sketchml: key lists
	// with their counts and lengths and the gap code table), 0 for a dense
	// update, -1 when the codec cannot separate it (zstd).
	KeyBytes int `json:"key_bytes"`
	// PadBytes is zero padding added so the frame's decode stays within its
	// budget (see doc.go); it is included in Bytes.
	PadBytes int `json:"pad_bytes"`
	// RatioVs12B and RatioVs8B compare Bytes with 12 bytes a pair (uint64
	// key, float32 value) and 8 bytes a pair (uint32 key, float32 value).
	RatioVs12B float64 `json:"ratio_vs_12b"`
	RatioVs8B  float64 `json:"ratio_vs_8b"`
	// BytesPerKey is KeyBytes/Pairs, or Bytes/Pairs when KeyBytes is -1,
	// and 0 for a dense update.
	BytesPerKey float64 `json:"bytes_per_key"`
	// RelL2Error is ‖decoded − original‖₂ / ‖original‖₂ over the values
	// (the absolute ‖decoded − original‖₂ when the original is all zero).
	RelL2Error float64 `json:"rel_l2_error"`
	// SignFlips counts values decoded with the sign opposite to the
	// original's (a zero on either side is no flip).
	SignFlips int `json:"sign_flips"`
	// Overestimates counts values whose decoded magnitude exceeds the bound
	// the codec promises: for lossless codecs the original magnitude, for
	// sketchml the largest magnitude in the original's bucket, for
	// uniform8 the grid point at or above the original.
	Overestimates int `json:"overestimates"`
}

// measurer is implemented by codecs that can report frame statistics.
type measurer interface {
	encode(dst []byte, u Sparse, wantBounds bool) ([]byte, frameStats, error)
}

// Measure encodes u with c, decodes the frame, checks that the keys survive
// exactly and compares the values. Timing is the caller's business.
func Measure(c Codec, u Sparse) (Measurement, error) {
	var frame []byte
	st := frameStats{keyBytes: -1}
	var err error
	if m, ok := c.(measurer); ok {
		frame, st, err = m.encode(nil, u, true)
	} else {
		frame, err = c.Encode(nil, u)
	}
	if err != nil {
		return Measurement{}, err
	}
	d, err := Decode(frame)
	if err != nil {
		return Measurement{}, fmt.Errorf("decoding own frame: %w", err)
	}
	if d.Len() != u.Len() || d.Dense() != u.Dense() {
		return Measurement{}, fmt.Errorf("%s: decoded %d values (dense %v), encoded %d (dense %v)", c.Name(), d.Len(), d.Dense(), u.Len(), u.Dense())
	}
	for i, k := range u.Keys {
		if d.Keys[i] != k {
			return Measurement{}, fmt.Errorf("%s: key %d decoded as %d at index %d", c.Name(), k, d.Keys[i], i)
		}
	}
	n := u.Len()
	m := Measurement{Name: c.Name(), Pairs: n, Bytes: len(frame), KeyBytes: st.keyBytes, PadBytes: st.padBytes}
	if u.Dense() {
		m.KeyBytes = 0
	}
	if len(frame) > 0 {
		m.RatioVs12B = 12 * float64(n) / float64(len(frame))
		m.RatioVs8B = 8 * float64(n) / float64(len(frame))
	}
	if n > 0 && !u.Dense() {
		if m.KeyBytes >= 0 {
			m.BytesPerKey = float64(m.KeyBytes) / float64(n)
		} else {
			m.BytesPerKey = float64(len(frame)) / float64(n)
		}
	}
	var errSq, normSq float64
	for i, v := range u.Values {
		o, x := float64(v), float64(d.Values[i])
		errSq += (x - o) * (x - o)
		normSq += o * o
		if o*x < 0 {
			m.SignFlips++
		}
		bound := float32(math.Abs(o))
		if st.upper != nil {
			bound = st.upper[i]
		}
		if float32(math.Abs(x)) > bound {
			m.Overestimates++
		}
	}
	m.RelL2Error = math.Sqrt(errSq)
	if normSq > 0 {
		m.RelL2Error /= math.Sqrt(normSq)
	}
	return m, nil
}
