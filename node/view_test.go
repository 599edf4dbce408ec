package node

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/sketchmesh/sketchmesh/codec"
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
		for _, o := range sortedPending(n, c) {
			applySparse(w, *o.u)
		}
	}
	return w
}

// originUpdate is a pending update and its origin.
type originUpdate struct {
	origin string
	u      *codec.Sparse
}

// sortedPending is row c of n's pending updates, sorted by origin here
// rather than read in pendingRow's order.
func sortedPending(n *Node, c uint64) []originUpdate {
	var row []originUpdate
	for q, u := range n.pending[c] {
		if u != nil {
			row = append(row, originUpdate{n.vc.nameAt(q), u})
		}
	}
	slices.SortFunc(row, func(a, b originUpdate) int { return strings.Compare(a.origin, b.origin) })
	return row
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
			for _, u := range n.pendingRow(c) {
				for _, k := range u.Keys {
					pages[k>>pageBits] = true
				}
			}
		}
		if len(pages) > 0 && len(n.workMarks.pages.list) != len(pages) {
			t.Fatalf("%s at clock %d: %d pages marked, the overlay touches %d", id, n.Clock(), len(n.workMarks.pages.list), len(pages))
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

// Updates of one clock that arrive in any order are read in canonical
// order: pendingRow yields the row by origin, pendingOf finds each, and
// the view is the same bit for bit as with the updates added in order.
func TestPendingRowSortsArrivals(t *testing.T) {
	views := [2][]float64{}
	for run, order := range [][]int{{0, 1, 2, 3}, {3, 1, 0, 2}} {
		cl := newCluster(t, 4, 3, 5, "raw", 1)
		n := cl.nodes["node-00"]
		n.clock = 1 // the row of clock 1 is at or below the node's clock, so View reads it
		for _, k := range order {
			origin := cl.ids[k]
			n.add(origin, 1, &codec.Sparse{Keys: []uint64{0, uint64(k + 1)}, Values: []float32{0.1 * float32(k+1), 1e-7}})
		}
		var row []originUpdate
		for q, u := range n.pendingRow(1) {
			row = append(row, originUpdate{n.vc.nameAt(q), u})
		}
		if want := sortedPending(n, 1); !slices.Equal(row, want) || len(row) != 4 {
			t.Fatalf("order %v: row %v, want %v", order, row, want)
		}
		for k, id := range cl.ids {
			if u, ok := n.pendingOf(1, id); !ok || u.Values[0] != 0.1*float32(k+1) {
				t.Fatalf("order %v: pendingOf(%s) = %v, %v", order, id, u, ok)
			}
		}
		views[run] = slices.Clone(n.View())
	}
	if !sameFloats(views[0], views[1]) {
		t.Fatal("the view depends on the order the updates arrived in")
	}
}
