package node

import (
	"encoding/binary"
	"hash/fnv"
	"math"
	"testing"
)

func TestViewDigestIsFNV1aOfTheViewAndClock(t *testing.T) {
	view := []float64{0, 1.5, -2.25e-300, math.Inf(1), math.Copysign(0, -1)}
	h := fnv.New64a()
	var b [8]byte
	for _, v := range view {
		binary.LittleEndian.PutUint64(b[:], math.Float64bits(v))
		h.Write(b[:])
	}
	binary.LittleEndian.PutUint64(b[:], 42)
	h.Write(b[:])
	if got, want := digestView(view, 42), h.Sum64(); got != want {
		t.Fatalf("digest %016x, want %016x", got, want)
	}
	if digestView(view, 42) == digestView(view, 43) {
		t.Fatal("the clock does not enter the digest")
	}
	// +0 and −0 are equal floats but different replicas' bits.
	if digestView([]float64{0}, 1) == digestView([]float64{math.Copysign(0, -1)}, 1) {
		t.Fatal("+0 and -0 hash alike")
	}
}

func TestDigestEvery(t *testing.T) {
	for _, c := range []struct {
		params int
		want   uint64
	}{{0, 1}, {1, 1}, {2048, 1}, {2049, 2}, {47237, 24}, {1 << 20, 512}} {
		if got := DigestEvery(c.params); got != c.want {
			t.Errorf("DigestEvery(%d) = %d, want %d", c.params, got, c.want)
		}
	}
}

// digestPair returns two bulk-synchronous members that hash every row.
func digestPair(t *testing.T) (a, b *Node, ids []string) {
	t.Helper()
	nodes, ids := newNodes(t, 2, 0, 20, SyncConfig{})
	for _, n := range nodes {
		n.digestEvery = 1
	}
	return nodes[0], nodes[1], ids
}

// lockstep runs one iteration at both members and delivers their updates.
func lockstep(t *testing.T, a, b *Node) {
	t.Helper()
	nodes := []*Node{a, b}
	for _, n := range nodes {
		if err := n.Train(); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range nodes {
		settle(nodes, deliver(nodes, n.ID(), n.Ready().Messages, nil))
	}
}

// entropyTo hands from's anti-entropy request to to and returns the
// events to's Ready reports.
func entropyTo(t *testing.T, from, to *Node) []Event {
	t.Helper()
	reqs := from.AntiEntropy()
	if len(reqs) != 1 || reqs[0].To != to.ID() {
		t.Fatalf("anti-entropy of %s: %d requests, want one to %s", from.ID(), len(reqs), to.ID())
	}
	to.Receive(from.ID(), reqs[0].Data)
	return to.Ready().Events
}

func TestAntiEntropyEqualViewsDoNotDiverge(t *testing.T) {
	a, b, _ := digestPair(t)
	for round := uint64(1); round <= 3; round++ {
		lockstep(t, a, b)
		if a.LatestDigest() != b.LatestDigest() || a.LatestDigest().Clock != round {
			t.Fatalf("round %d: digests %+v and %+v", round, a.LatestDigest(), b.LatestDigest())
		}
		if ev := entropyTo(t, a, b); len(ev) != 0 {
			t.Fatalf("round %d: events %+v", round, ev)
		}
		if ev := entropyTo(t, b, a); len(ev) != 0 {
			t.Fatalf("round %d: events %+v", round, ev)
		}
		// Lacking nothing, a node offers each digest once to each other
		// live member, then stays quiet.
		if reqs := a.AntiEntropy(); reqs != nil {
			t.Fatalf("round %d: a sends %d more requests for the same digest", round, len(reqs))
		}
	}
	for _, n := range []*Node{a, b} {
		if st := n.SyncStats(); st.DigestsCompared != 3 || st.ViewDivergence != 0 {
			t.Fatalf("%s: %d digests compared, %d divergences; want 3 and 0", n.ID(), st.DigestsCompared, st.ViewDivergence)
		}
	}
}

func TestAntiEntropyCountsADivergenceOncePerExchange(t *testing.T) {
	a, b, ids := digestPair(t)
	lockstep(t, a, b)
	// a's replica drifts: one parameter changes under it.
	a.committed[3] += 1e-9
	for round := uint64(1); round <= 2; round++ {
		lockstep(t, a, b)
		c := a.Clock()
		ev := entropyTo(t, a, b)
		if len(ev) != 1 || ev[0].Kind != EventDiverged || ev[0].Member != ids[0] || ev[0].Clock != c {
			t.Fatalf("round %d: events at b %+v, want one diverged from %s at %d", round, ev, ids[0], c)
		}
		st := b.SyncStats()
		if st.ViewDivergence != round || st.DivergedFrom != ids[0] || st.DivergedAt != c {
			t.Fatalf("round %d: b's stats %+v", round, st)
		}
		// The same digest again (a replay, or the request to another
		// member that reached b too) is not a second divergence.
		b.Receive(ids[0], EncodeSync(SyncMessage{Digest: a.LatestDigest()}))
		if ev := b.Ready().Events; len(ev) != 0 || b.SyncStats().ViewDivergence != round {
			t.Fatalf("round %d: the same digest again: events %+v, %d divergences", round, ev, b.SyncStats().ViewDivergence)
		}
		if ev := entropyTo(t, b, a); len(ev) != 1 || ev[0].Member != ids[1] {
			t.Fatalf("round %d: events at a %+v", round, ev)
		}
	}
	if st := a.SyncStats(); st.ViewDivergence != 2 || st.DigestsCompared != 2 {
		t.Fatalf("a's stats %+v", st)
	}
	if EventDiverged.String() != "diverged" {
		t.Fatalf("EventDiverged is %q", EventDiverged)
	}
}

// A digest of a row the answerer has not hashed (not committed yet, or
// dropped from its ring) is not compared, and not counted either way.
func TestDigestOfAnUnknownRowIsNotCompared(t *testing.T) {
	a, b, ids := digestPair(t)
	lockstep(t, a, b)
	for _, d := range []ViewDigest{{Clock: 5, Sum: 1}, {Clock: 0, Sum: 1}} {
		b.Receive(ids[0], EncodeSync(SyncMessage{Digest: d}))
	}
	if st := b.SyncStats(); st.DigestsCompared != 0 || st.ViewDivergence != 0 || len(b.Ready().Events) != 0 {
		t.Fatalf("b compared digests of rows it has not hashed: %+v", st)
	}
	for range 2*a.sc.Window + 1 {
		lockstep(t, a, b)
	}
	if _, ok := a.DigestAt(1); ok || len(a.digests) != 2*a.sc.Window {
		t.Fatalf("a keeps %d digests (row 1 among them: %v), want the last %d", len(a.digests), ok, 2*a.sc.Window)
	}
}
