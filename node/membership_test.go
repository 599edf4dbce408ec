package node

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/sketchmesh/sketchmesh/codec"
	"github.com/sketchmesh/sketchmesh/model"
)

// churn drives nodes over an in-memory network with random delivery, and
// lets a test add, remove and kill members while they train.
type churn struct {
	t      *testing.T
	nodes  map[string]*Node
	order  []string // every id ever started, in start order
	dead   map[string]bool
	flight []flight
	rng    *rand.Rand
	iters  uint64
	s      int
	// base[id] is what a node's rows held when it started: the sum of the
	// snapshot's entries; UpdatesApplied counts what came after.
	base map[string]uint64
	// entry[id] is the clock a joiner started at: everyone's vector clock
	// counts its first entry clocks without any update behind them.
	entry map[string]uint64
}

func newChurn(t *testing.T, p, s int, iters uint64, seed uint64) *churn {
	t.Helper()
	ch := &churn{t: t, nodes: map[string]*Node{}, dead: map[string]bool{}, rng: rand.New(rand.NewPCG(seed, 7)), iters: iters, s: s, base: map[string]uint64{}, entry: map[string]uint64{}}
	var ids []string
	for i := range p {
		ids = append(ids, fmt.Sprintf("node-%02d", i))
	}
	for _, id := range ids {
		ch.start(id, Config{ID: id, Members: ids})
	}
	return ch
}

func (ch *churn) start(id string, cfg Config) *Node {
	ch.t.Helper()
	train := testData(ch.t)
	mdl, err := model.New(model.Config{Kind: model.LogisticRegression, MaxFeature: train.MaxFeature, L2: 1e-4})
	if err != nil {
		ch.t.Fatal(err)
	}
	opt, err := model.NewOptimizer(model.SGD, 0.5, mdl.NumParams())
	if err != nil {
		ch.t.Fatal(err)
	}
	cfg.Model, cfg.Optimizer, cfg.Codec = mdl, opt, codec.Raw{}
	cfg.Staleness, cfg.Iterations, cfg.BatchSize, cfg.Seed = ch.s, ch.iters, 10, 3
	cfg.Shard = train.Shard(len(ch.order)%4, 4).Rows
	n, err := New(cfg)
	if err != nil {
		ch.t.Fatal(err)
	}
	ch.nodes[id] = n
	ch.order = append(ch.order, id)
	return n
}

func (ch *churn) live() []string {
	var out []string
	for _, id := range ch.order {
		if !ch.dead[id] {
			out = append(out, id)
		}
	}
	return out
}

func (ch *churn) send(from string, msgs []Message) {
	for _, m := range msgs {
		ch.flight = append(ch.flight, flight{from: from, to: m.To, data: m.Data})
	}
}

// join starts id from donor's snapshot and tells every live node.
func (ch *churn) join(id, donor string) {
	snap := ch.nodes[donor].Snapshot()
	n := ch.start(id, Config{ID: id, Start: &snap})
	var held uint64
	for _, e := range snap.Members {
		held += e.High - e.Entry + uint64(len(e.Ahead))
	}
	ch.base[id] = held
	ch.entry[id] = snap.Clock
	if len(snap.Pending) > 0 {
		n.Receive(donor, EncodeEnvelope(snap.Pending))
	}
	for _, other := range ch.live() {
		if other != id {
			ch.nodes[other].AddMember(id, snap.Clock)
		}
	}
}

// step delivers a random message or trains a random node; when neither is
// possible it asks every live node for its sync traffic. It reports false
// when nothing at all can happen.
func (ch *churn) step() bool {
	var trainable []string
	for _, id := range ch.live() {
		if ch.nodes[id].CanTrain() {
			trainable = append(trainable, id)
		}
	}
	if len(ch.flight) > 0 && (len(trainable) == 0 || ch.rng.IntN(2) == 0) {
		i := ch.rng.IntN(len(ch.flight))
		f := ch.flight[i]
		ch.flight = slices.Delete(ch.flight, i, i+1)
		if ch.dead[f.to] {
			return true
		}
		ch.nodes[f.to].Receive(f.from, f.data)
		ch.send(f.to, ch.nodes[f.to].Ready().Messages)
		return true
	}
	if len(trainable) > 0 {
		id := trainable[ch.rng.IntN(len(trainable))]
		if err := ch.nodes[id].Train(); err != nil {
			ch.t.Fatal(err)
		}
		ch.send(id, ch.nodes[id].Ready().Messages)
		return true
	}
	for _, id := range ch.live() {
		n := ch.nodes[id]
		ch.send(id, n.SyncRequest())
		ch.send(id, n.AntiEntropy())
	}
	return len(ch.flight) > 0
}

// runUntil steps until cond holds or nothing can happen.
func (ch *churn) runUntil(cond func() bool) {
	for guard := 0; !cond(); guard++ {
		if !ch.step() || guard > 1_000_000 {
			ch.t.Fatalf("stalled: %s", ch.describe())
		}
	}
}

// settle runs anti-entropy rounds until one applies nothing new: how the
// last updates of members that left or died reach everyone. (Members that
// died without notice are asked for forever; nobody has more of them.)
func (ch *churn) settle() {
	applied := func() (sum uint64) {
		for _, id := range ch.live() {
			sum += ch.nodes[id].Stats().UpdatesApplied
		}
		return sum
	}
	for round := 0; round < 20; round++ {
		before := applied()
		for _, id := range ch.live() {
			ch.send(id, ch.nodes[id].AntiEntropy())
		}
		for len(ch.flight) > 0 {
			ch.step()
		}
		if applied() == before {
			return
		}
	}
	ch.t.Fatalf("anti-entropy does not settle: %s", ch.describe())
}

func (ch *churn) allDone() bool {
	for _, id := range ch.live() {
		if !ch.nodes[id].Done() {
			return false
		}
	}
	return true
}

func (ch *churn) describe() string {
	out := ""
	for _, id := range ch.live() {
		n := ch.nodes[id]
		out += fmt.Sprintf("%s clock %d vc %v; ", id, n.Clock(), n.VectorClock().Snapshot())
	}
	return out
}

// checkConverged asserts that every live node holds the same updates, each
// once, and the same view up to summation order.
func (ch *churn) checkConverged() {
	ch.t.Helper()
	live := ch.live()
	ref := ch.nodes[live[0]]
	for _, id := range live {
		n := ch.nodes[id]
		var held uint64
		for _, m := range ch.order {
			if got, want := n.VectorClock().Get(m), ref.VectorClock().Get(m); got != want {
				ch.t.Errorf("%s holds %s up to %d, %s up to %d", id, m, got, live[0], want)
			}
			held += n.VectorClock().Get(m) - ch.entry[m]
		}
		if got := ch.base[id] + n.Stats().UpdatesApplied; got != held {
			ch.t.Errorf("%s applied %d updates on top of %d from its snapshot, for %d distinct updates held", id, n.Stats().UpdatesApplied, ch.base[id], held)
		}
		if base, applied, ledger := n.Ledger(); base != ch.base[id] || applied != n.Stats().UpdatesApplied || ledger != held {
			ch.t.Errorf("%s's ledger says %d+%d for %d held, want %d+%d for %d", id, base, applied, ledger, ch.base[id], n.Stats().UpdatesApplied, held)
		}
		if d := maxAbsDiff(n.View(), ref.View()); d > 1e-9 {
			ch.t.Errorf("%s's view differs from %s's by %g", id, live[0], d)
		}
	}
}

func maxAbsDiff(a, b []float64) float64 {
	var d float64
	for i := range a {
		d = max(d, math.Abs(a[i]-b[i]))
	}
	return d
}

// A node that joins mid-run from a member's snapshot catches up: it ends
// with every update of every member, each applied once, and the same view,
// whatever the delivery order and the staleness.
func TestJoinFromSnapshotCatchesUp(t *testing.T) {
	for _, s := range []int{0, 2} {
		for seed := uint64(1); seed <= 6; seed++ {
			ch := newChurn(t, 3, s, 30, seed)
			ch.runUntil(func() bool { return ch.nodes["node-00"].Clock() >= 10 })
			ch.join("node-03", ch.order[int(seed)%3])
			ch.runUntil(ch.allDone)
			ch.checkConverged()
			joiner := ch.nodes["node-03"]
			if joiner.Clock() != 30 || joiner.VectorClock().Get("node-03") != 30 {
				t.Fatalf("s=%d seed %d: joiner at clock %d", s, seed, joiner.Clock())
			}
			// Frames may arrive twice (from the snapshot and from their
			// origin); nothing else may be refused.
			for reason, k := range joiner.Stats().Rejected {
				if reason != RejectDuplicate {
					t.Errorf("s=%d seed %d: joiner rejected %d frames as %s", s, seed, k, reason)
				}
			}
		}
	}
}

// A killed member's last updates still reach every live node, a member
// that leaves with notice is not waited for, and a restarted member joins
// as a new incarnation whose clocks cannot collide with the old one's.
func TestKillLeaveAndRejoin(t *testing.T) {
	for seed := uint64(1); seed <= 6; seed++ {
		ch := newChurn(t, 4, 1, 40, seed)
		ch.runUntil(func() bool { return ch.nodes["node-01"].Clock() >= 12 })
		// Kill node-01: its in-flight messages still arrive, then silence.
		ch.dead["node-01"] = true
		for _, id := range ch.live() {
			ch.nodes[id].PeerDown("node-01")
		}
		ch.runUntil(func() bool { return ch.nodes["node-00"].Clock() >= 20 })
		// node-02 leaves with notice.
		last := ch.nodes["node-02"].Clock()
		ch.dead["node-02"] = true
		for _, id := range ch.live() {
			ch.nodes[id].Leave("node-02", last)
		}
		// node-01 comes back as its second incarnation.
		ch.join("node-01/2", "node-03")
		ch.runUntil(ch.allDone)
		ch.settle()
		ch.checkConverged()
		for _, id := range ch.live() {
			n := ch.nodes[id]
			if got := n.VectorClock().Get("node-02"); got != last {
				t.Errorf("seed %d: %s holds node-02 up to %d, it left after %d", seed, id, got, last)
			}
		}
	}
}

// A leave notice can overtake the leaver's last updates: the others keep
// waiting for them, and finish holding them; if they never come, the
// driver's PeerDown ends the wait.
func TestLeaveWaitsForLastUpdates(t *testing.T) {
	for _, lost := range []bool{false, true} {
		waited := 0
		for seed := uint64(1); seed <= 4; seed++ {
			ch := newChurn(t, 3, 1, 20, seed)
			ch.runUntil(func() bool { return ch.nodes["node-02"].Clock() >= 8 })
			// Hold back what node-02 has in flight, then let it leave.
			var held []flight
			ch.flight = slices.DeleteFunc(ch.flight, func(f flight) bool {
				if f.from == "node-02" {
					held = append(held, f)
					return true
				}
				return false
			})
			last := ch.nodes["node-02"].Clock()
			ch.dead["node-02"] = true
			for _, id := range ch.live() {
				n := ch.nodes[id]
				n.Leave("node-02", last)
				if got := n.VectorClock().Get("node-02"); got < last {
					if !n.Leaving("node-02") {
						t.Fatalf("seed %d: %s holds node-02 up to %d of %d and stopped waiting", seed, id, got, last)
					}
					waited++
				}
			}
			if lost {
				for _, id := range ch.live() {
					ch.nodes[id].PeerDown("node-02")
				}
			} else {
				// A joiner learns from its snapshot that node-02 left, and
				// after which update.
				ch.join("node-03", "node-00")
				joiner := ch.nodes["node-03"]
				if donor := ch.nodes["node-00"]; joiner.Leaving("node-02") != donor.Leaving("node-02") {
					t.Fatalf("seed %d: joiner leaving %v, donor %v", seed, joiner.Leaving("node-02"), donor.Leaving("node-02"))
				}
				ch.flight = append(ch.flight, held...)
			}
			ch.runUntil(ch.allDone)
			for _, id := range ch.live() {
				n := ch.nodes[id]
				if n.Leaving("node-02") || slices.Contains(n.Live(), "node-02") {
					t.Errorf("lost %v seed %d: %s still waits for node-02", lost, seed, id)
				}
				if got := n.VectorClock().Get("node-02"); !lost && got != last {
					t.Errorf("seed %d: %s finished holding node-02 up to %d, it left after %d", seed, id, got, last)
				}
			}
		}
		if waited == 0 {
			t.Errorf("lost %v: the notice never overtook an update", lost)
		}
	}
}

func TestStartRejectsSnapshotThatDoesNotFit(t *testing.T) {
	ch := newChurn(t, 2, 0, 5, 1)
	snap := ch.nodes["node-00"].Snapshot()
	bad := snap
	bad.View = bad.View[:10]
	mdl := ch.nodes["node-00"].Config()
	for name, s := range map[string]Snapshot{
		"short view":   bad,
		"entry beyond": {Clock: 0, View: snap.View, Members: []MemberEntry{{ID: "x", High: 3}}},
		"ahead below":  {Clock: 5, View: snap.View, Members: []MemberEntry{{ID: "x", High: 3, Ahead: []uint64{2}}}},
	} {
		cfg := mdl
		cfg.ID, cfg.Members, cfg.Start = "joiner", nil, &s
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: New accepted the snapshot", name)
		}
	}
}

// A member that joined above a donor's rows' clock has nothing below its
// entry: a second joiner taking that donor's snapshot must not wait for it.
func TestSecondJoinerFromASlowerDonor(t *testing.T) {
	for seed := uint64(1); seed <= 6; seed++ {
		ch := newChurn(t, 3, 2, 30, seed)
		ch.runUntil(func() bool { return ch.nodes["node-00"].Clock() >= 8 })
		fast, slow := "node-00", "node-00"
		for _, id := range ch.live() {
			c := ch.nodes[id].Snapshot().Clock
			if c > ch.nodes[fast].Snapshot().Clock {
				fast = id
			}
			if c < ch.nodes[slow].Snapshot().Clock {
				slow = id
			}
		}
		ch.join("node-03", fast)
		ch.join("node-04", slow)
		ch.runUntil(ch.allDone)
		ch.settle()
		ch.checkConverged()
	}
}

// What is queued for a member that goes down or leaves is dropped: it
// would go nowhere, and a member that comes back pulls what it missed.
func TestQueuedMessagesDroppedForGoneMembers(t *testing.T) {
	ch := newChurn(t, 4, 1, 5, 1)
	n := ch.nodes["node-00"]
	if err := n.Train(); err != nil {
		t.Fatal(err)
	}
	n.PeerDown("node-01")
	n.Leave("node-02", 3) // still waited for: nothing of node-02 is in yet
	if !n.Leaving("node-02") {
		t.Fatal("node-02 not waited for after leaving with updates outstanding")
	}
	var to []string
	for _, m := range n.Ready().Messages {
		to = append(to, m.To)
	}
	if !slices.Equal(to, []string{"node-03"}) {
		t.Fatalf("messages go to %v, want only node-03", to)
	}
}

// A member that left after clock c has no updates above c: one that
// arrives anyway is refused, since nobody would fetch it for the others.
func TestUpdateAfterLeaveRefused(t *testing.T) {
	ch := newChurn(t, 3, 1, 5, 1)
	leaver := ch.nodes["node-02"]
	if err := leaver.Train(); err != nil {
		t.Fatal(err)
	}
	first := leaver.Ready().Messages
	if err := leaver.Train(); err != nil {
		t.Fatal(err)
	}
	second := leaver.Ready().Messages
	n := ch.nodes["node-00"]
	n.Leave("node-02", 1)
	for _, m := range first {
		if m.To == "node-00" {
			n.Receive("node-02", m.Data)
		}
	}
	for _, m := range second {
		if m.To == "node-00" {
			n.Receive("node-02", m.Data)
		}
	}
	if got := n.VectorClock().Get("node-02"); got != 1 {
		t.Fatalf("node-00 holds node-02 up to %d, want 1 (it left after 1)", got)
	}
	if got := n.Stats().Rejected[RejectAfterLeave]; got != 1 {
		t.Fatalf("rejected after leave: %d, want 1 (%v)", got, n.Stats().Rejected)
	}
	if n.Leaving("node-02") || slices.Contains(n.Live(), "node-02") {
		t.Fatal("node-02 still waited for once its last update is in")
	}
}

// The slot-indexed state follows the member list: after members join in
// any order, each member's slot is its vector clock slot and its index
// entry, and its failure detector record is found by slot as by id.
func TestMemberSlotsFollowTheMembers(t *testing.T) {
	cl := newCluster(t, 3, 1, 5, "raw", 1)
	n := cl.nodes["node-01"]
	for _, id := range []string{"node-09", "node-00a", "node-05", "a-first"} {
		n.AddMember(id, 0)
	}
	if len(n.memberSlots) != len(n.members) || len(n.members) != 7 {
		t.Fatalf("%d members, %d slots", len(n.members), len(n.memberSlots))
	}
	seen := map[int]bool{}
	for k, m := range n.members {
		q := n.memberSlots[k]
		if seen[q] || n.vc.slot(m) != q || n.memberSlot(m) != q || n.infoAt(q) != n.info(m) || n.info(m) == nil {
			t.Fatalf("member %s: slot %d, clock's %d, index %d, info by slot %p by id %p", m, q, n.vc.slot(m), n.memberSlot(m), n.infoAt(q), n.info(m))
		}
		seen[q] = true
	}
	if n.memberSlot("node-77") != -1 || n.isMember("node-77") {
		t.Fatal("an id never admitted has a slot")
	}
}
