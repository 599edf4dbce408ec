package node

import (
	"slices"
	"testing"
)

// Defect 3: a partition longer than the frame history left each side
// waiting for the other's updates that nobody kept: both stopped for good.
// The side with the larger ids learns from the origins that those updates
// are gone and rejoins from a snapshot of the other side as a new
// incarnation; the mesh finishes with one view.
func TestPartitionLongerThanHistoryHealsBySnapshot(t *testing.T) {
	n := &pnet{t: t, nodes: map[string]*Node{}, auth: macAuth{mesh: "m"}, iters: 80,
		sync: SyncConfig{HeartbeatTicks: 2, SuspectTicks: 10, DeadTicks: 30, History: 8}}
	ids := []string{"a/1", "b/1", "c/1"}
	for i, id := range ids {
		n.add(id, n.config(id, i, ids, nil))
	}
	for range 5 {
		n.round()
	}
	side := map[string]int{"a/1": 0, "b/1": 1, "c/1": 1}
	n.drop = func(from, to string, _ []byte) bool { return side[from] != side[to] }
	for range 60 {
		n.round()
	}
	a, b, c := n.nodes["a/1"], n.nodes["b/1"], n.nodes["c/1"]
	if a.Clock() < 40 || b.Clock() < 40 {
		t.Fatalf("the sides did not train on while split: a at %d, b at %d", a.Clock(), b.Clock())
	}
	n.drop = nil
	var rejoins []Event
	for r := 0; r < 100 && len(rejoins) < 2; r++ {
		n.round()
		rejoins = rejoins[:0]
		for _, e := range n.events {
			if e.Kind == EventRejoin {
				rejoins = append(rejoins, e)
			}
		}
	}
	if len(rejoins) != 2 || b.Rejoining() != "a/1" || c.Rejoining() != "a/1" || a.Rejoining() != "" {
		t.Fatalf("rejoins %+v: b through %q, c through %q, a through %q; want b and c through a", rejoins, b.Rejoining(), c.Rejoining(), a.Rejoining())
	}
	if b.CanTrain() || c.CanTrain() {
		t.Fatal("a node that must rejoin still trains")
	}
	// The driver's part: each rejoins as a new incarnation through a.
	for i, old := range []string{"b/1", "c/1"} {
		id := nameOf(old) + "/2"
		snap, adm, err := a.Admit(id, n.joinSig(id, "a/1"))
		if err != nil {
			t.Fatal(err)
		}
		n.nodes[old] = nil
		cfg := n.config(id, i+1, nil, &snap)
		cfg.Admission = &adm
		n.add(id, cfg)
		n.flush()
	}
	n.runUntilDone(400)
	if got := a.Live(); !slices.Equal(got, []string{"a/1", "b/2", "c/2"}) {
		t.Fatalf("a counts %v live", got)
	}
	n.checkSameViews()
}

func FuzzDecodeGone(f *testing.F) {
	f.Add(EncodeGone("a/1", 9))
	f.Add(EncodeSync(SyncMessage{Upto: 3}))
	f.Fuzz(func(t *testing.T, data []byte) {
		origin, oldest, err := DecodeGone(data)
		if err != nil {
			return
		}
		o2, c2, err := DecodeGone(EncodeGone(origin, oldest))
		if err != nil || o2 != origin || c2 != oldest {
			t.Fatalf("round trip of (%q, %d): (%q, %d), %v", origin, oldest, o2, c2, err)
		}
	})
}
