package model

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// BenchmarkAdamNews20Sized times Adam's step on gradients of news20's
// shape: 8,000 keys a step of 1.35 million, most among the first few
// hundred thousand. The moments are paged (PagedVec); a map of pages cost
// five times the step of a directory here, which this benchmark shows:
//
//	go test ./model -run '^$' -bench AdamNews20Sized -cpu 1
func BenchmarkAdamNews20Sized(b *testing.B) {
	const n = 1_355_192
	opt, err := NewOptimizer(Adam, 0.02, n)
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	grads := make([]Gradient, 64)
	for i := range grads {
		seen := map[uint64]bool{}
		keys := make([]uint64, 0, 8000)
		for len(keys) < cap(keys) {
			if k := uint64(r.ExpFloat64() * 60000); k < n && !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		vals := make([]float64, len(keys))
		for j := range vals {
			vals[j] = r.NormFloat64()
		}
		grads[i] = Gradient{Keys: keys, Values: vals}
	}
	// Every page the run writes, written once before the timing.
	for _, g := range grads {
		opt.Update(g, 1)
	}
	i := 0
	for b.Loop() {
		opt.Update(grads[i%len(grads)], 1)
		i++
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(i*8000), "ns/key")
}
