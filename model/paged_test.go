package model

import (
	"math"
	"slices"
	"testing"

	"github.com/sketchmesh/sketchmesh/dataset"
)

// denseAdam is lazy Adam over dense moments, as it was before the moments
// were paged: the reference the paged one must match bit for bit.
func denseAdam(lr float64, n int, steps []Gradient, scale float64) (out [][]float64, m, v []float64) {
	m, v = make([]float64, n), make([]float64, n)
	for t, g := range steps {
		c1 := 1 - math.Pow(AdamBeta1, float64(t+1))
		c2 := 1 - math.Pow(AdamBeta2, float64(t+1))
		d := make([]float64, len(g.Keys))
		for i, k := range g.Keys {
			m[k] = AdamBeta1*m[k] + (1-AdamBeta1)*g.Values[i]
			v[k] = AdamBeta2*v[k] + (1-AdamBeta2)*g.Values[i]*g.Values[i]
			d[i] = -lr * scale * (m[k] / c1) / (math.Sqrt(v[k]/c2) + AdamEpsilon)
		}
		out = append(out, d)
	}
	return out, m, v
}

func TestPagedAdamMatchesDense(t *testing.T) {
	const n = 1 << 17
	steps := []Gradient{
		{Keys: []uint64{0, 3, 64, 65535, n - 1}, Values: []float64{0.5, -1, 2e-9, 7, -0.25}},
		{Keys: []uint64{3, 64, 100}, Values: []float64{-3, 0, 1}},
		{Keys: []uint64{0, n - 1}, Values: []float64{1e6, -1e-12}},
	}
	want, wm, wv := denseAdam(0.02, n, steps, 0.5)
	opt, err := NewOptimizer(Adam, 0.02, n)
	if err != nil {
		t.Fatal(err)
	}
	for i, g := range steps {
		if got := opt.Update(g, 0.5); !slices.Equal(got, want[i]) {
			t.Fatalf("step %d: %v, want %v", i+1, got, want[i])
		}
	}
	st := opt.State()
	if !slices.Equal(st.M, wm) || !slices.Equal(st.V, wv) {
		t.Fatal("moments differ from the dense reference")
	}
	// Keys 0, 3; 64; 100; 65535; n-1: five 8-key pages of each moment.
	a := opt.(*adam)
	for name, p := range map[string]PagedVec{"m": a.m, "v": a.v} {
		used := 0
		p.each(func(int, []float64) { used++ })
		if used != 5 || len(p.chunks) != n/pageLen {
			t.Errorf("%s: %d pages, %d chunks, want 5 pages and %d chunks", name, used, len(p.chunks), n/pageLen)
		}
	}
}

func TestPagedAdamRestoresSignedZeros(t *testing.T) {
	opt, _ := NewOptimizer(Adam, 0.1, 130)
	m, v := make([]float64, 130), make([]float64, 130)
	m[129], m[5], v[5] = math.Copysign(0, -1), -2, 4
	if err := opt.Restore(OptimizerState{Kind: Adam, Steps: 7, M: m, V: v}); err != nil {
		t.Fatal(err)
	}
	st := opt.State()
	if st.Steps != 7 || math.Float64bits(st.M[129]) != math.Float64bits(m[129]) || st.M[5] != -2 || st.V[5] != 4 || len(st.M) != 130 {
		t.Fatalf("restored state %v %v at steps %d", st.M[125:], st.V[:8], st.Steps)
	}
}

func TestScratchPagesOnlyTouchedKeys(t *testing.T) {
	m, err := New(Config{Kind: LogisticRegression, MaxFeature: 1 << 16})
	if err != nil {
		t.Fatal(err)
	}
	var s Scratch
	w := make([]float64, m.NumParams())
	g, _ := m.Gradient(w, []dataset.Row{{Label: 1, Keys: []uint64{2, 40000}, Values: []float32{1, 3}}}, &s)
	if !slices.Equal(g.Keys, []uint64{0, 2, 40000}) || !slices.Equal(g.Values, []float64{-0.5, -0.5, -1.5}) {
		t.Fatalf("gradient %v %v", g.Keys, g.Values)
	}
	used := 0
	for _, p := range s.pages {
		if p != nil {
			used++
			if p.touched != 0 || p.sum != [pageLen]float64{} {
				t.Fatal("a page kept a sum or a mark after the gradient was taken")
			}
		}
	}
	if used != 2 {
		t.Errorf("%d pages allocated, want 2 (keys 0 and 2, key 40000)", used)
	}
}

// A paged vector reads +0 where nothing was written, allocates only the
// 8-key pages written to (and a chunk for each 64 keys that has one), and
// keeps what was written at the same addresses as more pages come.
func TestPagedVecAllocatesWrittenPages(t *testing.T) {
	v := NewPagedVec(1000) // 16 chunks of 64 keys
	if len(v.chunks) != 16 {
		t.Fatalf("%d chunks for 1000 values, want 16", len(v.chunks))
	}
	if x := v.Get(999); math.Float64bits(x) != 0 {
		t.Fatalf("unwritten value %v, want +0", x)
	}
	*v.At(130) = -2.5
	*v.At(130) -= 0.5
	*v.At(999) = math.Copysign(0, -1)
	if v.Get(130) != -3 || math.Float64bits(v.Get(999)) != math.Float64bits(math.Copysign(0, -1)) || v.Get(131) != 0 {
		t.Fatalf("values %v %v %v, want -3 -0 0", v.Get(130), v.Get(999), v.Get(131))
	}
	held := func() []int {
		var out []int
		v.each(func(first int, _ []float64) { out = append(out, first) })
		return out
	}
	chunks := 0
	for _, c := range v.chunks {
		if c != nil {
			chunks++
		}
	}
	if !slices.Equal(held(), []int{128, 992}) || chunks != 2 {
		t.Fatalf("pages held from keys %v in %d chunks, want [128 992] in 2", held(), chunks)
	}
	at := v.At(130)
	want := make([]float64, 1000)
	want[130], want[999] = -3, math.Copysign(0, -1)
	for k := uint64(16); k < 1000; k += 16 {
		*v.At(k) += float64(k)
		want[k] += float64(k)
	}
	if v.At(130) != at {
		t.Fatal("a value moved as pages were added")
	}
	got := v.dense(1000)
	for k := range want {
		if math.Float64bits(got[k]) != math.Float64bits(want[k]) || math.Float64bits(v.Get(uint64(k))) != math.Float64bits(want[k]) {
			t.Fatalf("key %d: %v (Get %v), want %v", k, got[k], v.Get(uint64(k)), want[k])
		}
	}
	// Keys 16 apart, one 8-key page each: 62, with 128's and 992's among them.
	if len(held()) != 62 {
		t.Fatalf("%d pages held, want 62", len(held()))
	}
}
