package node

import (
	"math"
	"slices"
	"testing"

	"github.com/sketchmesh/sketchmesh/codec"
	"github.com/sketchmesh/sketchmesh/model"
)

// scaleRecorder is an optimizer that remembers the scale of every step.
type scaleRecorder struct {
	model.Optimizer
	scales []float64
}

func (r *scaleRecorder) Update(g model.Gradient, scale float64) []float64 {
	r.scales = append(r.scales, scale)
	return r.Optimizer.Update(g, scale)
}

func newScaleNode(t *testing.T, id string, members []string, iterations uint64) (*Node, *scaleRecorder) {
	t.Helper()
	train := testData(t)
	mdl, err := model.New(model.Config{Kind: model.LogisticRegression, MaxFeature: train.MaxFeature, L2: 1e-4})
	if err != nil {
		t.Fatal(err)
	}
	opt, err := model.NewOptimizer(model.SGD, 0.5, mdl.NumParams())
	if err != nil {
		t.Fatal(err)
	}
	rec := &scaleRecorder{Optimizer: opt}
	i := slices.Index(members, id)
	n, err := New(Config{ID: id, Members: members, Model: mdl, Optimizer: rec, Codec: codec.Raw{},
		Iterations: iterations, BatchSize: 10, Seed: 1, Shard: train.Shard(i, len(members)).Rows})
	if err != nil {
		t.Fatal(err)
	}
	return n, rec
}

// A suspected member is down for the gate but keeps its share of the step;
// a dead or departed one gives its share to the others.
func TestSuspectKeepsShare(t *testing.T) {
	ids := []string{"a", "b", "c", "d"}
	n, rec := newScaleNode(t, "a", ids, 10)
	step := func(wantShares int) {
		t.Helper()
		if got := n.Shares(); got != wantShares {
			t.Fatalf("shares %d, want %d (live %v)", got, wantShares, n.Live())
		}
		// The gate waits for nobody but the live members: keep their
		// entries at the node's clock.
		for _, m := range n.Live() {
			n.VectorClock().Set(m, n.Clock())
		}
		if err := n.Train(); err != nil {
			t.Fatal(err)
		}
		if got := rec.scales[len(rec.scales)-1]; got != 1/float64(wantShares) {
			t.Fatalf("step scaled by %v, want 1/%d", got, wantShares)
		}
	}
	step(4)
	n.PeerDown("b") // dead: its share goes to the others
	step(3)
	n.Suspect("c") // cut off: still counted
	if !n.Suspected("c") || n.Suspected("b") || n.Suspected("a") || slices.Contains(n.Live(), "c") {
		t.Fatalf("suspected c %v, b %v; live %v", n.Suspected("c"), n.Suspected("b"), n.Live())
	}
	step(3)
	n.PeerDown("c") // no effect on a suspected member
	step(3)
	n.DeclareDead("c")
	if n.Suspected("c") {
		t.Fatal("c still suspected after DeclareDead")
	}
	step(2)
	n.PeerUp("c")
	step(3)
	n.Suspect("b") // from dead to suspected
	step(4)
	n.Leave("b", 1) // left: no share, whatever it was
	if n.Suspected("b") {
		t.Fatal("b suspected after it left")
	}
	step(3)
	n.Suspect("b") // ignored: it left
	n.Suspect("a") // ignored: the node itself
	n.Suspect("x") // ignored: not a member
	step(3)
	n.Suspect("d")
	n.PeerUp("d")
	step(3)
}

// Two members cut off from each other train on, each at half a step; after
// the heal they exchange what they made and end with the same view, every
// update applied once and every step at the mesh-wide scale.
func TestSuspectedMembersRejoinRows(t *testing.T) {
	ids := []string{"a", "b"}
	a, recA := newScaleNode(t, "a", ids, 6)
	b, recB := newScaleNode(t, "b", ids, 6)
	nodes := map[string]*Node{"a": a, "b": b}
	// exchange delivers msgs from a node and everything they lead to.
	exchange := func(from string, msgs []Message) {
		queue := []flight{}
		for _, m := range msgs {
			queue = append(queue, flight{from: from, to: m.To, data: m.Data})
		}
		for len(queue) > 0 {
			f := queue[0]
			queue = queue[1:]
			nodes[f.to].Receive(f.from, f.data)
			for _, m := range nodes[f.to].Ready().Messages {
				queue = append(queue, flight{from: f.to, to: m.To, data: m.Data})
			}
		}
	}
	// Two iterations together.
	for range 2 {
		for _, id := range ids {
			if err := nodes[id].Train(); err != nil {
				t.Fatal(err)
			}
		}
		for _, id := range ids {
			exchange(id, nodes[id].Ready().Messages)
		}
	}
	// Cut off: each trains two iterations alone; nothing is routed across.
	a.Suspect("b")
	b.Suspect("a")
	for range 2 {
		for _, id := range ids {
			if err := nodes[id].Train(); err != nil {
				t.Fatal(err)
			}
			if rd := nodes[id].Ready(); len(rd.Messages) != 0 {
				t.Fatalf("%s sent %d messages to a suspected member", id, len(rd.Messages))
			}
		}
	}
	// Healed: the late updates join rows each side committed alone.
	a.PeerUp("b")
	b.PeerUp("a")
	for range 4 {
		for _, id := range ids {
			exchange(id, nodes[id].SyncRequest())
			exchange(id, nodes[id].AntiEntropy())
		}
		for _, id := range ids {
			if nodes[id].CanTrain() {
				if err := nodes[id].Train(); err != nil {
					t.Fatal(err)
				}
				exchange(id, nodes[id].Ready().Messages)
			}
		}
	}
	for _, id := range ids {
		exchange(id, nodes[id].SyncRequest())
	}
	for _, id := range ids {
		n := nodes[id]
		if !n.Done() {
			t.Fatalf("%s not done at clock %d, vc %v", id, n.Clock(), n.VectorClock().Snapshot())
		}
		if base, applied, held := n.Ledger(); base+applied != held || held != 12 {
			t.Fatalf("%s: ledger %d+%d for %d held, want 12", id, base, applied, held)
		}
	}
	if d := maxAbsDiff(a.View(), b.View()); d > 1e-9 {
		t.Fatalf("views differ by %g", d)
	}
	for _, s := range append(recA.scales, recB.scales...) {
		if s != 0.5 {
			t.Fatalf("scales %v and %v, want 1/2 throughout", recA.scales, recB.scales)
		}
	}
}

// A queue pool gives back queues empty, with their capacity, and keeps at
// most maxSpareQueues, so that nodes sharing it hold a bounded spare.
func TestQueuePoolBounded(t *testing.T) {
	var p QueuePool
	if q := p.get(); q != nil {
		t.Fatalf("an empty pool gave %v", q)
	}
	for range maxSpareQueues + 3 {
		p.put(append(make([]queued, 0, 8), queued{&keptUpdate{origin: "a", clock: 1, frame: []byte{1}}}))
	}
	if len(p.queues) != maxSpareQueues {
		t.Fatalf("pool keeps %d queues, want %d", len(p.queues), maxSpareQueues)
	}
	q := p.get()
	if len(q) != 0 || cap(q) != 8 || q[:1][0] != (queued{}) {
		t.Fatalf("queue from the pool: len %d cap %d, first slot %+v; want empty, cleared, capacity kept", len(q), cap(q), q[:1][0])
	}
}

// The highest incarnation admitted on a peer name is kept by the slot of
// the name, every incarnation included, the largest one too.
func TestPeerIncarnationsBySlot(t *testing.T) {
	n := newPnet(t, []string{"a/1", "b/1"}, 4).nodes["a/1"]
	if inc, ok := n.peerInc("b"); !ok || inc != 1 {
		t.Fatalf("b: incarnation %d, known %v; want 1", inc, ok)
	}
	if _, ok := n.peerInc("zz"); ok {
		t.Fatal("a name never admitted is known")
	}
	n.setPeerInc("zz", math.MaxUint64)
	if inc, ok := n.peerInc("zz"); !ok || inc != math.MaxUint64 {
		t.Fatalf("zz: incarnation %d, known %v; want the largest", inc, ok)
	}
	if got := n.MemberOf("b"); got != "b/1" {
		t.Fatalf("MemberOf(b) = %q", got)
	}
}

// Nodes on one slot table that start with the same members share the
// member and live lists, and a change in one (a member down, a member
// added) leaves the others' lists as they were.
func TestStartListsSharedUntilChanged(t *testing.T) {
	ids := []string{"a/1", "b/1", "c/1"}
	net := &pnet{t: t, nodes: map[string]*Node{}, auth: macAuth{mesh: "m"}, iters: 4}
	table := NewSlotTable(len(ids))
	for i, id := range ids {
		cfg := net.config(id, i, slices.Clone(ids), nil)
		cfg.Slots = table
		net.add(id, cfg)
	}
	a, b, c := net.nodes["a/1"], net.nodes["b/1"], net.nodes["c/1"]
	if &a.members[0] != &b.members[0] || &a.liveList[0] != &c.liveList[0] || &a.memberSlots[0] != &b.liveSlots[0] {
		t.Fatal("nodes starting with one member list each hold a copy")
	}
	c.PeerDown("a/1")
	b.insertMember("d/1")
	if want := []string{"b/1", "c/1"}; !slices.Equal(c.Live(), want) {
		t.Fatalf("c's live list %v, want %v", c.Live(), want)
	}
	if want := []string{"a/1", "b/1", "c/1", "d/1"}; !slices.Equal(b.Members(), want) {
		t.Fatalf("b's members %v, want %v", b.Members(), want)
	}
	for _, n := range []*Node{a, c} {
		if !slices.Equal(n.Members(), ids) || len(n.memberSlots) != len(ids) {
			t.Fatalf("%s's members %v (%d slots) changed with another node's", n.cfg.ID, n.Members(), len(n.memberSlots))
		}
	}
	for _, n := range []*Node{a, b} {
		if !slices.Equal(n.Live(), ids) || !slices.Equal(n.liveSlots, table.startSlots) {
			t.Fatalf("%s's live list %v (slots %v) changed with another node's", n.cfg.ID, n.Live(), n.liveSlots)
		}
	}
}
