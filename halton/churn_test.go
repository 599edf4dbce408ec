package halton

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// edgeSet lists an overlay's edges as "from→to" strings.
func edgeSet(o *Overlay) map[string]bool {
	s := map[string]bool{}
	for _, v := range o.Members() {
		for _, w := range o.Out(v) {
			s[v+"→"+w] = true
		}
	}
	return s
}

func TestEdgesChangedIsTheSymmetricDifference(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	pick := func() []string {
		var ids []string
		for i := range 40 {
			if rng.IntN(3) > 0 {
				ids = append(ids, fmt.Sprintf("m-%d", i))
			}
		}
		return ids
	}
	for range 50 {
		a, b := Build(pick()), Build(pick())
		ea, eb := edgeSet(a), edgeSet(b)
		want := 0
		for e := range ea {
			if !eb[e] {
				want++
			}
		}
		for e := range eb {
			if !ea[e] {
				want++
			}
		}
		if got, rev := EdgesChanged(a, b), EdgesChanged(b, a); got != want || rev != want {
			t.Fatalf("EdgesChanged = %d (reversed %d), want %d", got, rev, want)
		}
	}
	o := Build(nodes(30))
	if got, want := EdgesChanged(nil, o), len(edgeSet(o)); got != want || EdgesChanged(o, nil) != want || EdgesChanged(o, o) != 0 {
		t.Fatalf("EdgesChanged(nil, o) = %d, want %d; EdgesChanged(o, o) = %d", got, want, EdgesChanged(o, o))
	}
}

// churnBound is the most edges one join or leave may change on average.
//
// A joiner y brings its own out-links, ≈ log2 P + ½ of them; takes over the
// link targets that fall in its sixteen arcs, which cover ≈ 1/P of the ring
// and so catch ≈ one mean out-degree (log2 P + ½) of targets, each counted
// twice as the old edge goes and the new one comes; turns its predecessor's
// successor link (2); and gives one more link to the ≈ 1/ln 2 members whose
// degree threshold P crosses. That is ≈ 3·log2 P + 5, and the measured means
// are 3·log2 P + 3 to 4. The bound allows 25% on the log term plus one
// edge: c = 3.75. A leave is the mirror image.
func churnBound(p int) float64 { return 3.75*math.Log2(float64(p)) + 6 }

func meanChurn(t *testing.T, p, trials int, limit int) float64 {
	rng := rand.New(rand.NewPCG(uint64(p), uint64(limit+1)))
	total := 0
	for trial := range trials {
		ids := series(fmt.Sprintf("c%d-%d-%%d", p, trial), p)
		o := build(ids, limit)
		joined := build(append(ids[:p:p], fmt.Sprintf("joiner-%d-%d", p, trial)), limit)
		k := rng.IntN(p)
		left := build(append(ids[:k:k], ids[k+1:]...), limit)
		total += EdgesChanged(o, joined) + EdgesChanged(o, left)
	}
	return float64(total) / float64(2*trials)
}

// A join or a leave rewires O(log P) edges on average.
func TestJoinAndLeaveChangeLogarithmicallyManyEdges(t *testing.T) {
	for _, c := range []struct{ p, trials int }{{8, 200}, {16, 150}, {64, 80}, {256, 40}, {1024, 16}} {
		t.Run(fmt.Sprint(c.p), func(t *testing.T) {
			t.Parallel()
			mean := meanChurn(t, c.p, c.trials, -1)
			lg := math.Log2(float64(c.p))
			t.Logf("P=%d: mean %.1f edges per join or leave (%.2f·log2 P), bound %.1f", c.p, mean, mean/lg, churnBound(c.p))
			// The joiner's own links alone are ≈ log2 P, so a mean below that
			// means the count is broken, not that churn is low.
			if mean > churnBound(c.p) || mean < lg {
				t.Fatalf("P=%d: mean %.1f edges changed per join or leave, want within [%.1f, %.1f]", c.p, mean, lg, churnBound(c.p))
			}
		})
	}
}

// The same test rejects a rank-based placement: the fallback's offsets are
// ring ranks, so a join shifts every offset that spans it.
func TestRankPlacementFailsTheChurnBound(t *testing.T) {
	mean := meanChurn(t, 256, 10, 0)
	if mean < 4*churnBound(256) {
		t.Fatalf("rank-based links changed only %.1f edges per join or leave at P=256; the churn test would not catch them", mean)
	}
}
