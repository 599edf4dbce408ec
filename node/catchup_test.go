package node

import (
	"math"
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
		n.nodes[old] = nil
		n.admitThrough("a/1", nameOf(old)+"/2", i+1)
	}
	n.runUntilDone(400)
	if got := a.Live(); !slices.Equal(got, []string{"a/1", "b/2", "c/2"}) {
		t.Fatalf("a counts %v live", got)
	}
	n.checkSameViews()
}

// A member that lies that its own updates the others lack are gone (it
// sends hellos with a rising clock, withholds its updates and answers
// "gone" for them) stalls nobody. Each honest node decides once to rejoin
// through it (a member alone cannot be told from one that trained on while
// the others were paused); until the driver carries the rejoin out, the
// node suspects the liar of withholding, calls the rejoin off and finishes
// without it. A rejoin carried out takes a snapshot checked by witnesses
// (VerifySnapshot), so the lie costs time, not state.
func TestLyingAboutGoneUpdatesStallsNobody(t *testing.T) {
	ids := []string{"a/1", "b/1", "c/1", "d/1"}
	n := newPnet(t, ids, 60)
	for range 3 {
		n.round()
	}
	liar := n.nodes["a/1"]
	n.nodes["a/1"] = nil // its driver now only says hello and lies
	seq, clock := uint64(100), liar.Clock()
	honest := ids[1:]
	done := func() bool {
		for _, id := range honest {
			if !n.nodes[id].Done() {
				return false
			}
		}
		return true
	}
	var took int
	for r := 0; r < 600 && !done(); r++ {
		seq++
		clock++
		h := n.sign(Announcement{Kind: KindHello, Member: "a/1", Clock: clock, Seq: seq}, "a/1")
		for _, id := range honest {
			n.nodes[id].Receive("a/1", h)
			n.nodes[id].Receive("a/1", EncodeGone("a/1", clock+1))
			took += btoi(n.nodes[id].lacksGone("a/1"))
		}
		n.round()
	}
	if took == 0 {
		t.Fatal("no honest node ever took the lie: the test shows nothing")
	}
	if !done() {
		t.Fatal("the honest nodes did not finish")
	}
	decided := map[string]int{}
	for _, e := range n.events {
		if e.Kind == EventRejoin && e.Member == "a/1" {
			decided[e.Member]++
		}
	}
	if decided["a/1"] > len(honest) {
		t.Errorf("%d rejoins decided through the liar, want at most one per honest node", decided["a/1"])
	}
	for _, id := range honest {
		if n.nodes[id].live.up("a/1") || n.nodes[id].Rejoining() != "" {
			t.Errorf("%s: liar live %v, rejoining through %q", id, n.nodes[id].live.up("a/1"), n.nodes[id].Rejoining())
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
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

// The rows hold only contiguous updates of each origin. An update of a
// member out of the live set that arrived ahead of a gap is withdrawn when
// its row commits, comes back only in order, and the ledger stays exact;
// otherwise an update above a gap nobody can close (a split past the
// history) stays in the rows of whichever member it happened to reach and
// views differ for good.
func TestRowsHoldOnlyContiguousUpdates(t *testing.T) {
	nodes, ids := newNodes(t, 3, 2, 10, SyncConfig{})
	a, b, c := nodes[0], nodes[1], nodes[2]
	own := map[uint64][]byte{} // c's envelopes to a, by clock
	for clock := uint64(1); clock <= 2; clock++ {
		if err := c.Train(); err != nil {
			t.Fatal(err)
		}
		for _, m := range c.Ready().Messages {
			if m.To == ids[0] {
				own[clock] = m.Data
			}
		}
	}
	a.Receive(ids[2], own[2]) // c's update 1 is lost
	if !a.VectorClock().Has(ids[2], 2) {
		t.Fatal("a did not take c's update 2 ahead of the gap while c is live")
	}
	a.PeerDown(ids[2])
	b.PeerDown(ids[2])
	for range 3 {
		for _, n := range []*Node{a, b} {
			if err := n.Train(); err != nil {
				t.Fatal(err)
			}
			settle(nodes[:2], deliver(nodes[:2], n.ID(), n.Ready().Messages, nil))
		}
	}
	ledger := func(when string) {
		t.Helper()
		base, applied, held := a.Ledger()
		if base+applied != held {
			t.Errorf("%s: a's ledger: %d + %d applied for %d held", when, base, applied, held)
		}
	}
	if a.VectorClock().Has(ids[2], 2) || a.Stats().Rejected[RejectLateGap] != 0 {
		t.Fatalf("a still holds c's update 2 above the gap after committing row 3")
	}
	ledger("withdrawn")
	a.Receive(ids[2], own[2])
	if a.VectorClock().Has(ids[2], 2) || a.Stats().Rejected[RejectLateGap] != 1 {
		t.Fatalf("a took c's late update 2 above the gap (%d refused as late_gap)", a.Stats().Rejected[RejectLateGap])
	}
	a.Receive(ids[2], own[1])
	a.Receive(ids[2], own[2])
	if a.VectorClock().Get(ids[2]) != 2 {
		t.Fatalf("a holds c up to %d after its updates came in order, want 2", a.VectorClock().Get(ids[2]))
	}
	ledger("in order")
	// b took c's updates in order only: both rows hold the same updates.
	b.Receive(ids[2], own[1])
	b.Receive(ids[2], own[2])
	for i, v := range a.View() {
		if math.Abs(v-b.View()[i]) > 1e-12 {
			t.Fatalf("a and b differ at parameter %d: %g and %g", i, v, b.View()[i])
		}
	}
}

// An update of a live member for a row committed more than History rows
// past its entry is taken from its origin, or from another member once the
// origin itself sent one at or below it: a member that kept it longer than
// the origin (a leaver still up after a long split) must not hand a
// keeping member what the origin answers "gone" for to the others. A
// member that died without notice has its last updates taken from
// whoever holds them.
func TestLateUpdatesOfALiveMemberStartAtItsOrigin(t *testing.T) {
	const history = 4
	nodes, ids := newNodes(t, 3, 2, 10, SyncConfig{Window: history, History: history})
	a, b, c := nodes[0], nodes[1], nodes[2]
	own := map[uint64][]byte{} // c's envelopes to a, by clock
	for clock := uint64(1); clock <= 2; clock++ {
		if err := c.Train(); err != nil {
			t.Fatal(err)
		}
		for _, m := range c.Ready().Messages {
			if m.To == ids[0] {
				own[clock] = m.Data
			}
		}
	}
	a.PeerDown(ids[2])
	b.PeerDown(ids[2])
	for range history + 2 {
		for _, n := range []*Node{a, b} {
			if err := n.Train(); err != nil {
				t.Fatal(err)
			}
			settle(nodes[:2], deliver(nodes[:2], n.ID(), n.Ready().Messages, nil))
		}
	}
	if got := a.Rows().Clock; got <= history {
		t.Fatalf("a committed up to row %d, want past History", got)
	}
	// b counts c dead: its last updates come from whoever holds them.
	b.Receive(ids[0], own[1])
	if !b.VectorClock().Has(ids[2], 1) {
		t.Fatal("b refused a dead member's late update passed on by a")
	}
	a.PeerUp(ids[2])
	a.Receive(ids[1], own[1])
	if a.VectorClock().Has(ids[2], 1) || a.Stats().Rejected[RejectLateRelayed] != 1 {
		t.Fatalf("a took live c's late update 1 from b (refused: %v)", a.Stats().Rejected)
	}
	a.Receive(ids[2], own[1])
	a.Receive(ids[1], own[2])
	if got := a.VectorClock().Get(ids[2]); got != 2 || a.Stats().Rejected[RejectLateRelayed] != 1 {
		t.Fatalf("a holds c up to %d after c sent 1 and b passed on 2, want 2", got)
	}
}

// A leaving member answers sync requests with its own updates only: it
// trains no more and keeps the others' frames long after their origins
// dropped them (a leaver still up after a long split would hand a rejoining
// side's updates to some members of the keeping side).
func TestLeaverResendsOnlyItsOwnUpdates(t *testing.T) {
	nodes, ids := newNodes(t, 3, 2, 10, SyncConfig{})
	b, c := nodes[1], nodes[2]
	for _, n := range []*Node{b, c} {
		if err := n.Train(); err != nil {
			t.Fatal(err)
		}
		settle(nodes, deliver(nodes, n.ID(), n.Ready().Messages, nil))
	}
	ask := func() map[string]int {
		c.Receive(ids[0], EncodeSync(SyncMessage{Upto: 1, Have: []SyncEntry{{Origin: ids[1]}, {Origin: ids[2]}}}))
		got := map[string]int{}
		for _, m := range c.Ready().Messages {
			if m.To != ids[0] || IsAnnouncement(m.Data) || IsSyncMessage(m.Data) {
				continue
			}
			updates, err := DecodeEnvelope(m.Data)
			if err != nil {
				t.Fatal(err)
			}
			for _, u := range updates {
				got[u.Origin]++
			}
		}
		return got
	}
	if got := ask(); got[ids[1]] != 1 || got[ids[2]] != 1 {
		t.Fatalf("c, a member, resent %v, want one update of each", got)
	}
	c.Tick() // a new round of the answers' budget
	c.StartLeave()
	if got := ask(); got[ids[1]] != 0 || got[ids[2]] != 1 {
		t.Fatalf("c, leaving, resent %v, want its own update only", got)
	}
}

// A joiner the other side admitted during a long split is an ordinary
// member of the side that keeps its state: its origin, young, still keeps
// its split-era updates, so the keeping node takes them, and the members
// that rejoin start from its rows with them. The joiner's side rejoins,
// the joiner as a new incarnation, and the mesh ends with one view, which
// holds the old incarnation's split-era updates.
func TestJoinerAdmittedAcrossALongSplitEndsInOneView(t *testing.T) {
	n := &pnet{t: t, nodes: map[string]*Node{}, auth: macAuth{mesh: "m"}, iters: 80,
		sync: SyncConfig{HeartbeatTicks: 2, SuspectTicks: 10, DeadTicks: 30, History: 8}}
	ids := []string{"a/1", "b/1", "c/1"}
	for i, id := range ids {
		n.add(id, n.config(id, i, ids, nil))
	}
	for range 5 {
		n.round()
	}
	side := map[string]int{"a/1": 0, "b/1": 1, "c/1": 1, "j/1": 1}
	n.drop = func(from, to string, _ []byte) bool { return side[from] != side[to] }
	for range 40 {
		n.round()
	}
	j, adm := n.admitThrough("b/1", "j/1", 3)
	for range 5 { // fewer updates than the history: the joiner keeps all
		n.round()
	}
	a := n.nodes["a/1"]
	if j.Clock() <= adm.Entry+1 {
		t.Fatalf("the joiner did not train during the split: clock %d, entry %d", j.Clock(), adm.Entry)
	}
	n.drop = nil
	rejoined := map[string]bool{}
	for r := 0; r < 100 && len(rejoined) < 3; r++ {
		n.round()
		for _, e := range n.events {
			if e.Kind != EventRejoin {
				continue
			}
			for _, id := range []string{"b/1", "c/1", "j/1"} {
				if s := n.nodes[id]; s != nil && s.Rejoining() == e.Member && !rejoined[id] && e.Member == "a/1" {
					rejoined[id] = true
				}
			}
		}
		n.events = n.events[:0]
	}
	if !a.isMember("j/1") {
		t.Fatal("the keeping node never learned of the joiner")
	}
	if got := a.VectorClock().Get("j/1"); got <= adm.Entry+1 {
		t.Fatalf("the keeping node holds the joiner's split-era updates up to %d (entry %d, joiner at %d)", got, adm.Entry, j.Clock())
	}
	if len(rejoined) != 3 || a.Rejoining() != "" {
		t.Fatalf("rejoined through a: %v; a rejoins through %q", rejoined, a.Rejoining())
	}
	for i, old := range []string{"b/1", "c/1", "j/1"} {
		n.nodes[old] = nil
		n.admitThrough("a/1", nameOf(old)+"/2", i+1)
	}
	n.runUntilDone(400)
	if got := a.Live(); !slices.Equal(got, []string{"a/1", "b/2", "c/2", "j/2"}) {
		t.Fatalf("a counts %v live", got)
	}
	n.checkSameViews()
}

// A node whose side keeps by the side rule, and that knows of no member it
// lacks that lacks anything of its side, waits two SuspectTicks before it
// rejoins as simply behind: whether the lacker lacks its side's gone
// updates too is learned only by the members the lacker happened to ask,
// and when it does, the lacker rejoins itself within that time. Deciding
// after one, members that had not been asked rejoined through the lacker
// while it was deciding to rejoin, took its dropped state and ended in a
// second view (a simulated split healed near the history, under other
// timing than today's). A node still rejoins when the lack is one-way, and
// does not when the lacker is superseded by a new incarnation meanwhile.
// lackerScene is a mesh of a/1, b/1 and z/1 after three rounds, in which
// z/1's driver then only says hello, at a clock five past its own, and
// tells b/1 that its updates up to that clock are gone: b/1 lacks them,
// and nothing tells b/1 that z/1 lacks anything.
type lackerScene struct {
	n          *pnet
	b          *Node
	seq, clock uint64
}

func newLackerScene(t *testing.T) *lackerScene {
	n := newPnet(t, []string{"a/1", "b/1", "z/1"}, 60)
	for range 3 {
		n.round()
	}
	lacker := n.nodes["z/1"]
	n.nodes["z/1"] = nil
	return &lackerScene{n: n, b: n.nodes["b/1"], seq: 100, clock: lacker.Clock() + 5}
}

// hello has z/1 say hello to a/1 and b/1.
func (s *lackerScene) hello() {
	s.seq++
	h := s.n.sign(Announcement{Kind: KindHello, Member: "z/1", Clock: s.clock, Seq: s.seq}, "z/1")
	s.n.nodes["a/1"].Receive("z/1", h)
	s.b.Receive("z/1", h)
}

// gone has z/1 tell b/1 that its updates up to its clock are gone.
func (s *lackerScene) gone() { s.b.Receive("z/1", EncodeGone("z/1", s.clock)) }

func TestSimplyBehindWaitsForTheLackerToRejoin(t *testing.T) {
	for _, superseded := range []bool{false, true} {
		sc := newLackerScene(t)
		n, b := sc.n, sc.b
		ticks := uint64(b.sc.SuspectTicks)
		goneAt := b.proto.tick
		decidedAt := uint64(0)
		for r := 0; r < 4*int(ticks) && decidedAt == 0; r++ {
			if n.nodes["z/2"] == nil {
				sc.hello()
			}
			if r == 0 {
				sc.gone()
				goneAt = b.proto.tick
			}
			if superseded && r == int(ticks)+2 {
				n.admitThrough("a/1", "z/2", 2)
			}
			n.round()
			if b.Rejoining() != "" {
				decidedAt = b.proto.tick
			}
		}
		switch {
		case superseded && decidedAt != 0:
			t.Errorf("b rejoined through %q %d ticks after the gone notice, though the lacker was superseded", b.Rejoining(), decidedAt-goneAt)
		case !superseded && b.Rejoining() != "z/1":
			t.Errorf("one-way lack: b rejoining through %q, want z/1", b.Rejoining())
		case !superseded && decidedAt-goneAt < 2*ticks:
			t.Errorf("b rejoined %d ticks after its first gone notice, want at least 2 × SuspectTicks = %d", decidedAt-goneAt, 2*ticks)
		}
		if a := n.nodes["a/1"]; a.Rejoining() != "" {
			t.Errorf("a, which lacks nothing, rejoins through %q", a.Rejoining())
		}
	}
}

// A decision to rejoin is reviewed until the driver carries it out: b
// decided to rejoin through z/1, whose gone updates it lacks, and z/1 then
// rejoined itself (z/2, admitted through a/1). z/1's gone updates are then
// no one's to lack, and b lacks nothing of a live member: it drops the
// decision instead of waiting for a donor that no longer exists (in the
// simulator, a split 0-6 | 7 with 2 % loss, before the review: n2 decided
// to rejoin through n7, which rejoined itself, and n2 waited for good).
func TestRejoinIsReviewedWhenTheLackerRejoinsItself(t *testing.T) {
	sc := newLackerScene(t)
	n, b := sc.n, sc.b
	for r := 0; r < 4*b.sc.SuspectTicks && b.Rejoining() == ""; r++ {
		sc.hello()
		if r == 0 {
			sc.gone()
		}
		n.round()
	}
	if got := b.Rejoining(); got != "z/1" {
		t.Fatalf("b rejoining through %q, want z/1", got)
	}
	n.admitThrough("a/1", "z/2", 2)
	for range 3 {
		n.round()
	}
	if got := b.Rejoining(); got != "" {
		t.Fatalf("b still rejoining through %q after z/1 rejoined itself", got)
	}
}

// The gap that makes an update late is measured up to the clock this node
// accepts (acceptBound), as far as its origin may be at the mesh's pace,
// not from this node's rows: an origin s + 1 clocks past the rows had
// dropped the oldest update of a gap of exactly History rows, and a relay
// that passed it on to a member the origin had told "gone" left that side
// lacking nothing, while the origin's side held it for behind: both sides
// kept their state, two views for good.
func TestLateGapIsMeasuredFromTheAcceptBound(t *testing.T) {
	const history = 4
	nodes, ids := newNodes(t, 3, 2, 20, SyncConfig{Window: history, History: history})
	a, b, c := nodes[0], nodes[1], nodes[2]
	var first []byte // c's update 1, to a
	if err := c.Train(); err != nil {
		t.Fatal(err)
	}
	for _, m := range c.Ready().Messages {
		if m.To == ids[0] {
			first = m.Data
		}
	}
	a.PeerDown(ids[2])
	b.PeerDown(ids[2])
	for a.Rows().Clock < history {
		for _, n := range []*Node{a, b} {
			if err := n.Train(); err != nil {
				t.Fatal(err)
			}
			settle(nodes[:2], deliver(nodes[:2], n.ID(), n.Ready().Messages, nil))
		}
	}
	if got := a.Rows().Clock; got != history || a.Clock() < history {
		t.Fatalf("a committed up to row %d at clock %d, want row %d", got, a.Clock(), history)
	}
	// A gap of exactly History rows, c up to s + 1 clocks past a's clock.
	a.PeerUp(ids[2])
	a.Receive(ids[1], first)
	if a.VectorClock().Has(ids[2], 1) || a.Stats().Rejected[RejectLateRelayed] != 1 {
		t.Fatalf("a took live c's update 1, History rows late, from b (refused: %v)", a.Stats().Rejected)
	}
	a.Receive(ids[2], first)
	if !a.VectorClock().Has(ids[2], 1) {
		t.Fatalf("a refused c's own update 1 (refused: %v)", a.Stats().Rejected)
	}
}

// A node that lacks none of the other side's gone updates (it took them
// from their origins in time, or from a member that held them while their
// origin was dead to it) follows its side when the side rejoins: the other
// side lacks some of its side's gone updates, and those must be lost to
// the mesh with the rest of what its side made while cut off. Keeping its
// state, it held updates of its side's old incarnations that the keeping
// side never will: two views for good.
func TestNodeFollowsItsSideWhenItRejoins(t *testing.T) {
	const history = 4
	nodes, ids := newNodes(t, 3, 2, 20, SyncConfig{Window: history, History: history})
	c := nodes[2] // ids[0] is the other side, ids[1] of c's side
	c.PeerDown(ids[0])
	c.PeerDown(ids[1])
	for range history + 2 {
		if err := c.Train(); err != nil {
			t.Fatal(err)
		}
		c.Ready()
	}
	c.PeerUp(ids[0])
	// ids[0] asks for c's updates, which c no longer keeps: c answers
	// "gone", so ids[0] lacks c's side's gone updates; c lacks none of
	// ids[0]'s.
	if !c.answerGone(ids[0], 0) {
		t.Fatal("c did not answer gone")
	}
	c.Tick()
	if c.Rejoining() != "" {
		t.Fatalf("c rejoins through %q before its side does", c.Rejoining())
	}
	// ids[1] rejoined through ids[0]: its new incarnation supersedes it.
	next := ids[1] + "/1"
	c.admit(next, c.Rows().Clock, ids[0])
	if c.MemberOf(ids[1]) != next {
		t.Fatalf("%s is not superseded by %s", ids[1], next)
	}
	c.Tick()
	if got := c.Rejoining(); got != ids[0] {
		t.Fatalf("c rejoins through %q, want %s: its side rejoined", got, ids[0])
	}
	if got := c.RejoinDonors(); len(got) != 1 || got[0] != ids[0] {
		t.Fatalf("c's donors %v, want [%s]", got, ids[0])
	}
	c.Tick()
	if got := c.Rejoining(); got != ids[0] {
		t.Fatalf("c called its rejoin off (through %q)", got)
	}
}

// A member that asks this node for another origin's updates it holds but
// no longer keeps is behind (lacks something of this side that may be
// gone) only when that origin cannot resend them either: a live origin
// keeps its last History updates. Counting it behind when the origin still
// kept them, a node of a split's larger side took the other side for
// behind, kept its state while its side rejoined, and held what the
// others dropped: two views for good (simulator, a split 0-6 | 7 healed
// within the history, the side 0-6 simply behind n7).
func TestBehindOnlyWhenTheOriginDroppedItToo(t *testing.T) {
	const history = 4
	nodes, ids := newNodes(t, 3, 0, 20, SyncConfig{Window: 2, History: history})
	b, c := nodes[1], nodes[2]
	for range 8 {
		for _, n := range nodes {
			if err := n.Train(); err != nil {
				t.Fatal(err)
			}
			settle(nodes, deliver(nodes, n.ID(), n.Ready().Messages, nil))
		}
	}
	if c.Clock() != 8 || !b.VectorClock().Has(ids[2], 8) {
		t.Fatalf("c at clock %d, b holds its 8: %v", c.Clock(), b.VectorClock().Has(ids[2], 8))
	}
	ask := func(have uint64) bool {
		b.behind = nil
		b.Receive(ids[0], EncodeSync(SyncMessage{Upto: 8, Have: []SyncEntry{{Origin: ids[2], Clock: have}}}))
		return b.behind[ids[0]]
	}
	// b keeps c's last 2 (the window); c keeps its last 4, 5 to 8.
	if ask(4) {
		t.Error("a, asking for c's 5 and on, which c still keeps, counted behind")
	}
	if !ask(1) {
		t.Error("a, asking for c's 2 and on, which c dropped, not counted behind")
	}
}

// A member told that this node's own updates it lacks are gone may still
// take them from a member of this node's side that kept them. Its later
// requests carry its entry for this node, anti-entropy's included when it
// lacks nothing of it, and an entry past the gone updates withdraws the
// "gone". Counted for good, a member that had since taken them made this
// node keep its state by the side rule while the rest of its side
// rejoined: two views (simulator, 0-3 | 4-7 healed at 8, seed 5, two
// workers).
func TestGoneWithdrawnOnceTheMemberHoldsThem(t *testing.T) {
	const history = 4
	nodes, ids := newNodes(t, 3, 0, 20, SyncConfig{Window: 2, History: history})
	a, c := nodes[0], nodes[2]
	a.digestEvery = 1 // a digest to offer, so that a lacking nothing still asks
	for range 8 {
		for _, n := range nodes {
			if err := n.Train(); err != nil {
				t.Fatal(err)
			}
			settle(nodes, deliver(nodes, n.ID(), n.Ready().Messages, nil))
		}
	}
	ask := func(have uint64) {
		c.Receive(ids[0], EncodeSync(SyncMessage{Upto: 8, Have: []SyncEntry{{Origin: ids[2], Clock: have}}}))
	}
	// c keeps its last 4, 5 to 8: a, asking for 2 and on, lacks gone ones.
	ask(1)
	if !c.lacksOurs(ids[0]) {
		t.Fatal("a, told that c's 2 to 4 are gone, does not count as lacking them")
	}
	ask(3)
	if !c.lacksOurs(ids[0]) {
		t.Fatal("a, still lacking c's 4, no longer counts as lacking c's gone updates")
	}
	ask(4)
	if c.lacksOurs(ids[0]) {
		t.Fatal("a, holding c's updates up to 4, still counts as lacking c's gone updates")
	}
	// a lacks nothing: its anti-entropy requests still carry its entry for
	// the member they go to.
	sent := 0
	for range len(nodes) {
		for _, m := range a.AntiEntropy() {
			sent++
			req, err := DecodeSync(m.Data)
			if err != nil {
				t.Fatal(err)
			}
			if len(req.Have) != 1 || req.Have[0].Origin != m.To || req.Have[0].Clock != a.VectorClock().Get(m.To) {
				t.Fatalf("a's anti-entropy request to %s has %+v, want its entry for %s alone", m.To, req.Have, m.To)
			}
		}
	}
	if sent == 0 {
		t.Fatal("a sent no anti-entropy request")
	}
}

// A hostile member may lie in its requests about what it holds of this
// node: claim everything (which withdraws the "gone" this node told it) or
// nothing (which brings it back). Either way it only says whether it lacks
// this node's gone updates, which it could always hide by not asking: this
// node neither rejoins nor stops training, and the lie of holding
// everything is answered with nothing.
func TestLyingEntriesMoveOnlyTheLiarsOwnLack(t *testing.T) {
	nodes, ids := newNodes(t, 3, 0, 40, SyncConfig{Window: 2, History: 4})
	c := nodes[2]
	train := func() {
		for _, n := range nodes {
			if err := n.Train(); err != nil {
				t.Fatal(err)
			}
			settle(nodes, deliver(nodes, n.ID(), n.Ready().Messages, nil))
		}
	}
	for range 8 {
		train()
	}
	for k := range 40 {
		have := uint64(1) // c's 2 to 4 are gone: c answers "gone"
		if k%2 == 1 {
			have = math.MaxUint64 // more than c ever made
		}
		c.Receive(ids[0], EncodeSync(SyncMessage{Upto: math.MaxUint64, Have: []SyncEntry{{Origin: ids[2], Clock: have}}}))
		if got := c.lacksOurs(ids[0]); got != (k%2 == 0) {
			t.Fatalf("lie %d (have %d): c counts a lacking its gone updates %v", k, have, got)
		}
		if k%2 == 1 {
			for _, m := range c.Ready().Messages {
				if m.To == ids[0] && !IsSyncMessage(m.Data) {
					t.Fatalf("c answered a claim of holding everything with %d bytes of updates", len(m.Data))
				}
			}
		}
		c.Tick()
		if c.Rejoining() != "" {
			t.Fatalf("lie %d made c rejoin through %s", k, c.Rejoining())
		}
	}
	before := c.Clock()
	train()
	if c.Clock() != before+1 {
		t.Fatalf("c at clock %d after a step from %d: the lies stopped it", c.Clock(), before)
	}
}
