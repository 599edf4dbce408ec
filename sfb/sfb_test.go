package sfb

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/sketchmesh/sketchmesh/codec"
)

func sample() Factors {
	return Factors{
		K:      3,
		Stride: 5,
		B:      [][]float32{{0.5, -0.25, 0}, {1, 2, -3}},
		C: []codec.Sparse{
			{Keys: []uint64{0, 2, 4}, Values: []float32{1, 2, -1}},
			{Keys: []uint64{0, 1}, Values: []float32{1, 0.5}},
		},
	}
}

// The reconstruction is exactly Σ b_i c_iᵀ, laid out class block by block.
func TestReconstructExact(t *testing.T) {
	got := sample().Reconstruct(nil)
	want := map[uint64]float32{}
	f := sample()
	for i := range f.B {
		for j, key := range f.C[i].Keys {
			for c, b := range f.B[i] {
				want[uint64(c)*f.Stride+key] += b * f.C[i].Values[j]
			}
		}
	}
	if len(got.Keys) != len(want) {
		t.Fatalf("%d keys, want %d", len(got.Keys), len(want))
	}
	for i, k := range got.Keys {
		if got.Values[i] != want[k] {
			t.Errorf("key %d: %v, want %v", k, got.Values[i], want[k])
		}
		if i > 0 && k <= got.Keys[i-1] {
			t.Fatal("keys not ascending")
		}
	}
	// Key 0 (class 0, bias) gets 0.5·1 + 1·1.
	if got.Keys[0] != 0 || got.Values[0] != 1.5 {
		t.Fatalf("first pair (%d, %v), want (0, 1.5)", got.Keys[0], got.Values[0])
	}
}

func TestRoundTripLossless(t *testing.T) {
	frame, err := Encode(codec.Raw{}, sample())
	if err != nil {
		t.Fatal(err)
	}
	f, err := Decode(frame, 3, 5)
	if err != nil {
		t.Fatal(err)
	}
	var acc Accumulator
	a, b := sample().Reconstruct(&acc), f.Reconstruct(&acc)
	for i := range a.Keys {
		if a.Keys[i] != b.Keys[i] || a.Values[i] != b.Values[i] {
			t.Fatalf("pair %d differs after the round trip", i)
		}
	}
	if want := sample().Norm(); f.Norm() != want {
		t.Fatalf("norm %v, want %v", f.Norm(), want)
	}
}

// ‖b cᵀ‖_F = ‖b‖·‖c‖: the norm bound is exact for one factor pair.
func TestNormIdentity(t *testing.T) {
	f := Factors{K: 2, Stride: 4, B: [][]float32{{3, 4}}, C: []codec.Sparse{{Keys: []uint64{1, 3}, Values: []float32{1, 2}}}}
	u := f.Reconstruct(nil)
	var fro float64
	for _, v := range u.Values {
		fro += float64(v) * float64(v)
	}
	if got, want := f.Norm(), math.Sqrt(fro); math.Abs(got-want) > 1e-9 || math.Abs(got-5*math.Sqrt(5)) > 1e-9 {
		t.Fatalf("norm %v, Frobenius %v, want 5√5", got, want)
	}
}

func TestDecodeRefusesMismatchAndGarbage(t *testing.T) {
	frame, err := Encode(codec.Raw{}, sample())
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		data   []byte
		k      int
		stride uint64
		want   string
	}{
		{"other class count", frame, 4, 5, "3 classes, the model has 4"},
		{"other stride", frame, 3, 6, "stride 5, the model has 6"},
		{"not a factor frame", []byte("SK\x01\x01"), 3, 5, "bad magic"},
		{"truncated", frame[:8], 3, 5, "factor frame"},
		{"huge sample count", []byte{'S', 'F', 1, 3, 5, 0xff, 0xff, 0xff, 0xff, 0x0f, 0}, 3, 5, "cannot fit"},
		{"bad version", []byte{'S', 'F', 9}, 3, 5, "version 9"},
	}
	for _, c := range cases {
		_, err := Decode(c.data, c.k, c.stride)
		if !errors.Is(err, ErrBadFrame) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want ErrBadFrame mentioning %q", c.name, err, c.want)
		}
	}
}

func TestEncodeRefusesInconsistentFactors(t *testing.T) {
	f := sample()
	f.B[1] = f.B[1][:2]
	if _, err := Encode(codec.Raw{}, f); err == nil {
		t.Fatal("b factor of the wrong length accepted")
	}
	f = sample()
	f.C[0].Keys[2] = 9
	if _, err := Encode(codec.Raw{}, f); err == nil {
		t.Fatal("c key outside the stride accepted")
	}
}

func FuzzDecode(f *testing.F) {
	frame, _ := Encode(codec.Raw{}, sample())
	f.Add(frame)
	f.Add([]byte{'S', 'F', 1, 3, 5, 0xff, 0xff, 0xff, 0xff, 0x0f, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		fs, err := Decode(data, 3, 5)
		if err != nil {
			return
		}
		u := fs.Reconstruct(nil)
		for _, k := range u.Keys {
			if k >= 15 {
				t.Fatalf("reconstructed key %d outside 3 classes × stride 5", k)
			}
		}
	})
}
