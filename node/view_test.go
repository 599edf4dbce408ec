package node

import (
	"math"
	"testing"
)

// freshView is the view as its definition reads: a copy of the committed
// rows with every pending update up to the node's clock added in canonical
// order.
func freshView(n *Node) []float64 {
	w := make([]float64, len(n.committed))
	copy(w, n.committed)
	for _, c := range n.pendingClocks() {
		if c > n.clock {
			break
		}
		for _, p := range n.pending[c] {
			applySparse(w, p.u)
		}
	}
	return w
}

// View restores and overlays only the keys that changed; under staleness and
// out-of-order delivery, rows commit between reads and updates arrive for
// rows already committed, and the view must still be the fresh copy bit for
// bit at every read.
func TestViewOverlayMatchesFreshCopy(t *testing.T) {
	cl := newCluster(t, 4, 3, 25, "sketchml", 7)
	cl.speed["node-03"] = 0.3
	reads, overlaid := 0, 0
	check := func(id string) {
		n := cl.nodes[id]
		want := freshView(n)
		got := n.View()
		if len(n.pending) > 0 {
			overlaid++
		}
		reads++
		for k := range want {
			if math.Float64bits(got[k]) != math.Float64bits(want[k]) {
				t.Fatalf("%s at clock %d: view[%d] = %v, fresh copy %v", id, n.Clock(), k, got[k], want[k])
			}
		}
		// What the overlay keeps is its distinct pages, however many
		// updates share them.
		pages := map[uint64]bool{}
		for _, c := range n.pendingClocks() {
			if c > n.clock {
				break
			}
			for _, p := range n.pending[c] {
				for _, k := range p.u.Keys {
					pages[k>>pageBits] = true
				}
			}
		}
		if len(pages) > 0 && len(n.workPages.list) != len(pages) {
			t.Fatalf("%s at clock %d: %d pages marked, the overlay touches %d", id, n.Clock(), len(n.workPages.list), len(pages))
		}
	}
	cl.runToEnd(func(id string) {
		for _, other := range cl.ids {
			check(other)
		}
	})
	if overlaid == 0 {
		t.Fatalf("no read of %d had pending updates to overlay", reads)
	}
}
