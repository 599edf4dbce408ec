package node

import (
	"bytes"
	"fmt"
	"slices"
	"testing"

	"github.com/sketchmesh/sketchmesh/codec"
	"github.com/sketchmesh/sketchmesh/model"
)

// Nodes that share a decode cache keep one copy of a frame they applied,
// whichever message it came in; without one each keeps its own.
func TestKeptFramesShareTheDecodeCachesCopy(t *testing.T) {
	train := testData(t)
	mdl, err := model.New(model.Config{Kind: model.LogisticRegression, MaxFeature: train.MaxFeature})
	if err != nil {
		t.Fatal(err)
	}
	ids := []string{"a", "b", "c"}
	for _, shared := range []bool{true, false} {
		var cache *DecodeCache
		if shared {
			cache = NewDecodeCache(8)
		}
		nodes := map[string]*Node{}
		for i, id := range ids {
			opt, _ := model.NewOptimizer(model.SGD, 1, mdl.NumParams())
			n, err := New(Config{ID: id, Members: ids, Model: mdl, Optimizer: opt, Codec: codec.Raw{},
				Iterations: 2, BatchSize: 5, Seed: 1, Shard: train.Shard(i, 3).Rows, DecodeCache: cache})
			if err != nil {
				t.Fatal(err)
			}
			nodes[id] = n
		}
		if err := nodes["a"].Train(); err != nil {
			t.Fatal(err)
		}
		for _, m := range nodes["a"].Ready().Messages {
			nodes[m.To].Receive("a", m.Data)
		}
		kept := func(id string) []byte {
			n := nodes[id]
			log := n.logOf(n.memberSlot("a"))
			if len(log) != 1 {
				t.Fatalf("%s keeps %d frames of a, want 1", id, len(log))
			}
			return log[0].frame
		}
		b, c := kept("b"), kept("c")
		label := fmt.Sprintf("shared cache %v", shared)
		if !bytes.Equal(b, c) || !bytes.Equal(b, nodes["a"].lastOwn.frame) {
			t.Fatalf("%s: b and c keep different bytes for a's frame", label)
		}
		if same := &b[0] == &c[0]; same != shared {
			t.Errorf("%s: b and c keep one array: %v", label, same)
		}
		entry := func(id string) *keptUpdate { return nodes[id].logOf(nodes[id].memberSlot("a"))[0].keptUpdate }
		if same := entry("b") == entry("c") && entry("a") == entry("b"); same != shared {
			t.Errorf("%s: a, b and c keep one entry: %v", label, same)
		}
	}
}

// Two origins that send the same frame at the same clock (members training
// on the same rows) each have one kept entry that every node on the cache
// shares, which names that origin.
func TestKeptEntriesOfOneFrameArePerOrigin(t *testing.T) {
	cache := NewDecodeCache(8)
	frame := []byte("frame")
	cache.put(cache.key(frame), frame, decoded{u: &codec.Sparse{}})
	var first []*keptUpdate
	for pass := range 2 {
		for i, origin := range []string{"a", "b", "c"} {
			k := cache.kept(Update{Origin: origin, Clock: 3, Frame: slices.Clone(frame)})
			if k == nil || k.origin != origin || k.clock != 3 || !bytes.Equal(k.frame, frame) {
				t.Fatalf("pass %d: %s's entry %+v", pass, origin, k)
			}
			if pass == 0 {
				first = append(first, k)
			} else if k != first[i] {
				t.Fatalf("%s's update kept again made a second entry", origin)
			}
		}
	}
	if first[0] == first[1] || first[1] == first[2] {
		t.Fatal("two origins share one entry")
	}
	if k := cache.kept(Update{Origin: "a", Clock: 4, Frame: frame}); k == first[0] || k.clock != 4 {
		t.Fatalf("another clock's entry %+v", k)
	}
}

// The entry kept for a frame is found by its signature too: the same
// origin, clock and frame under another signature (of the same length or
// none) is another entry, and each is found again.
func TestKeptEntriesOfOneFrameArePerSignature(t *testing.T) {
	cache := NewDecodeCache(8)
	frame := []byte("frame")
	cache.put(cache.key(frame), frame, decoded{u: &codec.Sparse{}})
	sigs := [][]byte{[]byte("sig-1"), []byte("sig-2"), nil, []byte("longer-sig")}
	var first []*keptUpdate
	for pass := range 2 {
		for i, sig := range sigs {
			k := cache.kept(Update{Origin: "a", Clock: 3, Frame: frame, Sig: slices.Clone(sig)})
			if k == nil || !bytes.Equal(k.sig, sig) {
				t.Fatalf("pass %d: the entry for signature %q is %+v", pass, sig, k)
			}
			if pass == 0 {
				first = append(first, k)
			} else if k != first[i] {
				t.Fatalf("the update signed %q kept again made a second entry", sig)
			}
		}
	}
	for i := range first {
		for j := range i {
			if first[i] == first[j] {
				t.Fatalf("signatures %q and %q share one entry", sigs[j], sigs[i])
			}
		}
	}
}

// An update that comes twice in one envelope is applied once and kept by
// neither copy (which of the two passed the checks is not known), while
// one that comes once is kept; the second copy counts as a duplicate.
func TestUpdateTwiceInOneEnvelopeIsAppliedOnceAndNotKept(t *testing.T) {
	net := newPnet(t, []string{"a/1", "b/1", "c/1"}, 4)
	a, b, c := net.nodes["a/1"], net.nodes["b/1"], net.nodes["c/1"]
	if err := a.Train(); err != nil {
		t.Fatal(err)
	}
	u := a.lastOwn.update()
	if u.Origin != "a/1" {
		t.Fatalf("the kept entry names origin %q, want a/1", u.Origin)
	}
	b.Receive("a/1", EncodeEnvelope([]Update{u, u}))
	c.Receive("a/1", EncodeEnvelope([]Update{u}))
	if !b.vc.Has("a/1", u.Clock) || !c.vc.Has("a/1", u.Clock) {
		t.Fatal("the update was not applied")
	}
	if got := b.stats.Rejected[RejectDuplicate]; got != 1 {
		t.Fatalf("b counted %d duplicates, want 1", got)
	}
	if log := b.logOf(b.memberSlot("a/1")); len(log) != 0 {
		t.Fatalf("b keeps %d frames of an update that came twice, want none", len(log))
	}
	if log := c.logOf(c.memberSlot("a/1")); len(log) != 1 {
		t.Fatalf("c keeps %d frames of an update that came once, want 1", len(log))
	}
}
