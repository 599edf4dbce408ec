package codec

import (
	"math"
	"strings"
	"testing"
)

// rawVariant writes raw frames of transformed values, so Measure sees a
// codec with known errors.
type rawVariant struct {
	name string
	f    func(float32) float32
}

func (r rawVariant) Name() string { return r.name }
func (r rawVariant) Encode(dst []byte, u Sparse) ([]byte, error) {
	v := make([]float32, len(u.Values))
	for i, x := range u.Values {
		v[i] = r.f(x)
	}
	return Raw{}.Encode(dst, Sparse{Keys: u.Keys, Values: v})
}

func TestMeasure(t *testing.T) {
	u := Sparse{Keys: []uint64{1, 2, 3, 4}, Values: []float32{3, -4, 0, 0}}
	m, err := Measure(Raw{}, u)
	if err != nil {
		t.Fatal(err)
	}
	bytes := 4 + 1 + 1 + 4*12
	want := Measurement{Name: "raw", Pairs: 4, Bytes: bytes, KeyBytes: 32, RatioVs12B: 48.0 / float64(bytes),
		RatioVs8B: 32.0 / float64(bytes), BytesPerKey: 8}
	if m != want {
		t.Fatalf("raw: %+v, want %+v", m, want)
	}

	flip := rawVariant{"flip", func(x float32) float32 { return -x }}
	m, _ = Measure(flip, u)
	if m.SignFlips != 2 || m.Overestimates != 0 || m.RelL2Error != 2 || m.KeyBytes != -1 || m.BytesPerKey != float64(bytes)/4 {
		t.Fatalf("flip: %+v", m)
	}
	double := rawVariant{"double", func(x float32) float32 { return 2 * x }}
	m, _ = Measure(double, u)
	if m.SignFlips != 0 || m.Overestimates != 2 || m.RelL2Error != 1 {
		t.Fatalf("double: %+v", m)
	}
	half := rawVariant{"half", func(x float32) float32 { return x / 2 }}
	if m, _ = Measure(half, u); m.Overestimates != 0 || m.RelL2Error != 0.5 {
		t.Fatalf("half: %+v", m)
	}

	// Uniform8 rounding to nearest: scale 4, step 4/127; 3 → code 95
	// (95.25 rounds down), decoded 380/127.
	m, err = Measure(Uniform8{}, u)
	if err != nil {
		t.Fatal(err)
	}
	want3 := float64(float32(95.0 * 4 / 127))
	if e := math.Abs(m.RelL2Error - math.Abs(want3-3)/5); e > 1e-9 {
		t.Fatalf("uniform8: rel L2 %v, want %v", m.RelL2Error, math.Abs(want3-3)/5)
	}
	if m.KeyBytes != 1+2+1+4 || m.Overestimates != 0 {
		t.Fatalf("uniform8: %+v", m)
	}

	dense := Sparse{Values: []float32{1, 2}}
	if m, _ = Measure(Raw{}, dense); m.KeyBytes != 0 || m.BytesPerKey != 0 {
		t.Fatalf("dense: %+v", m)
	}
	if _, err := Measure(Raw{}, Sparse{Keys: []uint64{2, 1}, Values: []float32{1, 1}}); err == nil || !strings.Contains(err.Error(), "follows") {
		t.Fatalf("bad input: %v", err)
	}
}

func containsAll(s string, frags ...string) bool {
	for _, f := range frags {
		if !strings.Contains(s, f) {
			return false
		}
	}
	return true
}
