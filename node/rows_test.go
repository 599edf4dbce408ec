package node

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/sketchmesh/sketchmesh/codec"
	"github.com/sketchmesh/sketchmesh/model"
)

// Cores sharing a RowStore (and a DecodeCache and a gradient scratch, as
// the simulator's do) read the views cores without them read, bit for bit,
// at every step of a run with stragglers and staleness; most of them take
// a view another core computed, and at the end, all holding the same rows,
// they hold one copy. Their own reads (training) overlay the pending
// updates on one scratch. 36 iterations of 4 nodes add 144 updates, past
// two folds of foldEvery.
func TestSharedRowsReadAsPrivateRows(t *testing.T) {
	for _, s := range []int{0, 2} {
		for seed := uint64(1); seed <= 3; seed++ {
			reads := func(cl *cluster) map[string]uint64 {
				seen := map[string]uint64{}
				cl.speed[cl.ids[seed%4]] = 0.3
				cl.runToEnd(func(id string) {
					n := cl.nodes[id]
					seen[fmt.Sprintf("%s@%d", id, n.Clock())] = digestView(n.View(), n.Clock())
					seen[fmt.Sprintf("%s@%d own", id, n.Clock())] = digestView(n.view(), n.Clock())
				})
				for _, id := range cl.ids {
					seen[id+"@end"] = digestView(cl.nodes[id].View(), 0)
				}
				return seen
			}
			private := reads(newCluster(t, 4, s, 36, "sketchml", seed))
			store, cache, scratch := NewRowStore(0, 64), NewDecodeCache(64), new(model.Scratch)
			shared := newClusterWith(t, 4, s, 36, "sketchml", seed, func(c *Config) {
				store.size = c.Model.NumParams()
				c.SharedRows, c.DecodeCache, c.Scratch = store, cache, scratch
			})
			got := reads(shared)
			if len(got) != len(private) {
				t.Fatalf("s=%d seed %d: %d reads shared, %d private", s, seed, len(got), len(private))
			}
			for k, d := range private {
				if got[k] != d {
					t.Fatalf("s=%d seed %d: read %s: digest %x shared, %x private", s, seed, k, got[k], d)
				}
			}
			if store.SumReads != 0 {
				t.Fatalf("s=%d seed %d: cores of their own slot tables read %d rows through shared sums", s, seed, store.SumReads)
			}
			if store.Taken == 0 || store.Computed == 0 {
				t.Fatalf("s=%d seed %d: %d views computed, %d taken", s, seed, store.Computed, store.Taken)
			}
			first := &shared.nodes[shared.ids[0]].committedRows()[0]
			for _, id := range shared.ids[1:] {
				if &shared.nodes[id].committedRows()[0] != first {
					t.Fatalf("s=%d seed %d: %s holds its own copy of the same rows", s, seed, id)
				}
			}
			if held := store.held(); held != 1 {
				t.Fatalf("s=%d seed %d: cores hold %d views at the end, want 1", s, seed, held)
			}
			// Dropped nodes leave nothing held in the store.
			for i, id := range shared.ids {
				shared.nodes[id].DropSharedRows()
				if left := store.held(); (i < len(shared.ids)-1) != (left == 1) {
					t.Fatalf("s=%d seed %d: %d views held after %d of %d nodes dropped", s, seed, left, i+1, len(shared.ids))
				}
			}
			// Training alone reads the shared scratch: no node holds a
			// working view of its own.
			store, cache = NewRowStore(0, 64), NewDecodeCache(64)
			alone := newClusterWith(t, 4, s, 36, "sketchml", seed, func(c *Config) {
				store.size = c.Model.NumParams()
				c.SharedRows, c.DecodeCache = store, cache
			})
			alone.runToEnd(nil)
			for _, id := range alone.ids {
				if alone.nodes[id].work != nil {
					t.Fatalf("s=%d seed %d: %s holds a working view of its own", s, seed, id)
				}
			}
			if s > 0 && store.work.vals == nil { // at s = 0 every read is of the committed rows
				t.Fatalf("s=%d seed %d: no read used the shared scratch", s, seed)
			}
		}
	}
}

// A view no core holds any more stays in the store for the cores behind,
// up to the limit; past it the least recently released goes (a view
// released again, after a core behind took it, stays), and its values
// hold the next view computed.
func TestRowStoreKeepsIdleViewsForCoresBehind(t *testing.T) {
	s := NewRowStore(4, 2*foldEvery) // room for 4 idle views
	views := make([]*sharedRows, 7)
	for i := range views {
		views[i] = &sharedRows{key: rowKey{a: uint64(i + 1)}, vals: make([]float64, 4), refs: 1, stored: true}
		s.byKey[views[i].key] = views[i]
	}
	stored := func(i int) bool { _, ok := s.byKey[views[i].key]; return ok }
	for _, r := range views[:4] {
		s.release(r)
	}
	if len(s.byKey) != 7 {
		t.Fatalf("%d views stored after 4 of 7 were released, want 7 (the released kept)", len(s.byKey))
	}
	views[0].refs++ // a core behind takes the oldest again, and moves on
	s.release(views[0])
	s.release(views[4])
	if !stored(0) || stored(1) || s.spare == nil {
		t.Fatalf("past the limit: view 1 stored %v, view 2 stored %v, spare %v; want the least recently released (2) dropped", stored(0), stored(1), s.spare != nil)
	}
	views[2].refs++ // held when its turn comes
	s.release(views[5])
	if !stored(2) {
		t.Fatal("a view a core holds was dropped")
	}
	spare := &s.spare[0]
	if c := s.copyOf([]float64{1, 2, 3, 4}); &c[0] != spare || c[3] != 4 {
		t.Fatal("a new view did not reuse the dropped view's values")
	}
}

// An update's digest is of its content: the same content in other arrays
// has the same digest, any other key or value bit another; the digest of
// an address reused after it was forgotten is of the new content.
func TestRowStoreDigestIsOfContent(t *testing.T) {
	s := NewRowStore(8, 1)
	u := codec.Sparse{Keys: []uint64{1, 5}, Values: []float32{0.5, 0}}
	d := s.digest(u)
	same := codec.Sparse{Keys: []uint64{1, 5}, Values: []float32{0.5, 0}}
	if s.digest(same) != d || s.digest(u) != d {
		t.Fatal("the same content has another digest")
	}
	for name, v := range map[string]codec.Sparse{
		"key":        {Keys: []uint64{1, 6}, Values: []float32{0.5, 0}},
		"value":      {Keys: []uint64{1, 5}, Values: []float32{0.5, 1e-30}},
		"-0":         {Keys: []uint64{1, 5}, Values: []float32{0.5, float32(math.Copysign(0, -1))}},
		"dense":      {Values: []float32{0.5, 0}},
		"prefix":     {Keys: []uint64{1}, Values: []float32{0.5}},
		"empty":      {},
		"empty keys": {Keys: []uint64{}, Values: []float32{}},
	} {
		if s.digest(v) == d {
			t.Errorf("%s: same digest as another content", name)
		}
	}
	// A prefix of u's arrays starts at the same address.
	if s.digest(codec.Sparse{Keys: u.Keys[:1], Values: u.Values[:1]}) == d {
		t.Fatal("a prefix at the same address has the whole's digest")
	}
	u.Values[1] = 2 // as if the address were reused after it was forgotten
	s.digest(codec.Sparse{Keys: []uint64{3}, Values: []float32{3}})
	if s.digest(u) == d {
		t.Fatal("new content at a forgotten address has the old digest")
	}
}

// held counts the views some core holds.
func (s *RowStore) held() int {
	n := 0
	for _, r := range s.byKey {
		if r.refs > 0 {
			n++
		}
	}
	return n
}

// Cores that share a slot table read their pending rows through the sums
// of the rows by clock (rowsums.go) where that costs fewer additions: what
// they read equals the private overlay in the origins' order to within
// rounding, their committed views stay bit for bit the same, and at 64
// nodes most rows are read through a sum.
func TestPendingRowsReadThroughSharedSums(t *testing.T) {
	const p = 64
	store, cache, scratch, slots := NewRowStore(0, 64), NewDecodeCache(256), new(model.Scratch), NewSlotTable(p)
	cl := newClusterWith(t, p, 2, 8, "sketchml", 5, func(c *Config) {
		store.size = c.Model.NumParams()
		c.SharedRows, c.DecodeCache, c.Scratch, c.Slots = store, cache, scratch, slots
	})
	private := newCluster(t, p, 2, 8, "sketchml", 5)
	reads, through := 0, uint64(0)
	cl.runToEnd(func(id string) {
		n := cl.nodes[id]
		before := store.SumReads
		shared := slices.Clone(n.view())
		if store.SumReads == before {
			return
		}
		through += store.SumReads - before
		want := n.View()
		for k, v := range want {
			if d := math.Abs(shared[k] - v); d > 1e-9*max(1, math.Abs(v)) {
				t.Fatalf("%s at clock %d, key %d: read %v through sums, %v in order", id, n.Clock(), k, shared[k], v)
			}
		}
		reads++
	})
	if reads == 0 || through == 0 {
		t.Fatalf("no read went through a sum (%d rows read through sums)", store.SumReads)
	}
	// The same run without shared state commits the same rows.
	private.runToEnd(nil)
	for _, id := range cl.ids {
		if got, want := digestView(cl.nodes[id].committedRows(), 0), digestView(private.nodes[id].committedRows(), 0); got != want {
			t.Fatalf("%s: committed view %x with sums, %x without", id, got, want)
		}
	}
	t.Logf("%d reads, %d rows through sums", reads, through)
}
