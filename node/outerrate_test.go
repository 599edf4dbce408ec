package node

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/sketchmesh/sketchmesh/codec"
)

// A key's rate rises by 0.5 per row whose combined change keeps the sign of
// the row before, up to 2, and is back to 1 at a flip; a row that sums to
// zero (members that cancel) or leaves the key out changes nothing.
func TestKeyRatesFollowTheSignOfEachRow(t *testing.T) {
	r := newKeyRates(6)
	row := func(updates ...codec.Sparse) {
		for _, u := range updates {
			r.add(u)
		}
		r.endRow()
	}
	sparse := func(keys []uint64, values ...float32) codec.Sparse { return codec.Sparse{Keys: keys, Values: values} }
	want := func(step string, rates ...float64) {
		t.Helper()
		for k, w := range rates {
			if got := r.rate(uint64(k)); got != w {
				t.Fatalf("%s: key %d at rate %v, want %v", step, k, got, w)
			}
		}
	}
	want("before any row", 1, 1, 1, 1, 1, 1)
	// Keys 0–2 keep their sign throughout; key 3's members cancel in the
	// second row; key 4 flips in the third; key 5 only ever comes dense.
	row(sparse([]uint64{0, 1, 3}, 1, -2, 1), sparse([]uint64{1, 2, 3, 4, 99}, 1, 3, 1, 2, 7))
	want("after row 1", 1, 1, 1, 1, 1, 1)
	row(sparse([]uint64{0, 1, 2, 3, 4}, 1, -1, 1, 1, 1), sparse([]uint64{3}, -1))
	want("after row 2", 1.5, 1.5, 1.5, 1, 1.5, 1)
	row(sparse([]uint64{0, 1, 2, 3, 4}, 2, -1, 1, 1, -1), codec.Sparse{Values: []float32{0, 0, 0, 0, 0, 1}})
	want("after row 3", 2, 2, 2, 1.5, 1, 1)
	row(sparse([]uint64{0, 2, 4}, 1, float32(math.NaN()), -1), codec.Sparse{Values: []float32{0, -1, 0, 0, 0, 1}})
	want("after row 4", 2, 2, 2, 1.5, 1.5, 1.5)
	row(sparse([]uint64{0, 1}, -1, 5))
	want("after row 5", 1, 1, 2, 1.5, 1.5, 1.5)
	r.endRow() // a row with no update
	want("after an empty row", 1, 1, 2, 1.5, 1.5, 1.5)
}

// A node alone with the adaptive outer step sends its first two exchanges
// as sgd does (no key has two rows yet), and its third at 1.5 × the change
// on each key whose first two changes had one sign, 1 × on the others.
func TestAdaptiveOuterStepScalesByTheRows(t *testing.T) {
	run := func(steps uint64, outer OuterKind) []float64 {
		return soloView(t, steps, func(c *Config) { c.LocalSteps, c.Outer = 2, outer; c.Optimizer = plainSGD(t, c) })
	}
	first, second := run(2, OuterAdaptive), run(4, OuterAdaptive)
	if !sameFloats(first, run(2, OuterSGD)) || !sameFloats(second, run(4, OuterSGD)) {
		t.Fatal("the first two exchanges differ from sgd's")
	}
	sgd, adaptive := run(6, OuterSGD), run(6, OuterAdaptive)
	var raised, kept int
	for k := range sgd {
		change := sgd[k] - second[k]
		rate := 1.0
		if first[k]*(second[k]-first[k]) > 0 {
			rate = 1.5
		}
		if change == 0 {
			continue
		}
		if rate == 1 {
			kept++
		} else {
			raised++
		}
		got := adaptive[k] - second[k]
		if math.Abs(got-rate*change) > 1e-6*math.Abs(rate*change)+1e-9 {
			t.Fatalf("key %d: third exchange applies %v, want %v × %v", k, got, rate, change)
		}
	}
	if raised == 0 || kept == 0 {
		t.Fatalf("%d keys raised and %d kept: the run tests neither case", raised, kept)
	}
}

// BenchmarkKeyRatesRow measures the adaptive step's cost per committed row:
// a row of 8 members' updates of 18,000 keys each, drawn from 1.35 M
// features (news20.binary's size, and the keys of one of its exchanges of
// 8 local steps). It reports ns per key of the row.
func BenchmarkKeyRatesRow(b *testing.B) {
	const features, members, keys = 1_355_192, 8, 18_000
	rng := rand.New(rand.NewPCG(1, 2))
	row := make([]codec.Sparse, members)
	for m := range row {
		set := map[uint64]bool{}
		for len(set) < keys {
			set[uint64(rng.IntN(features))] = true
		}
		u := codec.Sparse{Keys: make([]uint64, 0, keys), Values: make([]float32, keys)}
		for k := range set {
			u.Keys = append(u.Keys, k)
		}
		slices.Sort(u.Keys)
		for i := range u.Values {
			u.Values[i] = float32(rng.NormFloat64())
		}
		row[m] = u
	}
	r := newKeyRates(features)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		for _, u := range row {
			r.add(u)
		}
		r.endRow()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*members*keys), "ns/key")
}
