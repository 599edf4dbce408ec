package node

import (
	"fmt"
	"slices"
	"testing"

	"github.com/sketchmesh/sketchmesh/codec"
	"github.com/sketchmesh/sketchmesh/halton"
	"github.com/sketchmesh/sketchmesh/model"
)

// pnet runs nodes with the membership protocol: it ticks them, trains
// those whose gate is open, and delivers messages and broadcasts at once,
// except what a filter drops.
type pnet struct {
	t     *testing.T
	nodes map[string]*Node
	order []string
	// drop, when set, decides whether a message from → to is lost.
	drop   func(from, to string, data []byte) bool
	events []Event
	auth   macAuth
	iters  uint64
	sync   SyncConfig
}

func newPnet(t *testing.T, ids []string, iters uint64) *pnet {
	t.Helper()
	n := &pnet{t: t, nodes: map[string]*Node{}, auth: macAuth{mesh: "m"}, iters: iters,
		sync: SyncConfig{HeartbeatTicks: 2, SuspectTicks: 10, DeadTicks: 30}}
	for i, id := range ids {
		n.add(id, n.config(id, i, ids, nil))
	}
	return n
}

func (n *pnet) config(id string, shard int, members []string, start *Snapshot) Config {
	train := testData(n.t)
	mdl, err := model.New(model.Config{Kind: model.LogisticRegression, MaxFeature: train.MaxFeature, L2: 1e-4})
	if err != nil {
		n.t.Fatal(err)
	}
	opt, _ := model.NewOptimizer(model.SGD, 1, mdl.NumParams())
	return Config{ID: id, Members: members, Model: mdl, Optimizer: opt, Codec: codec.Raw{},
		BatchSize: 5, Seed: 1, Shard: train.Shard(shard, 4).Rows, Staleness: 1, Iterations: n.iters,
		Auth: memberAuth{macAuth: n.auth, self: id}, Start: start}
}

func (n *pnet) add(id string, cfg Config) *Node {
	cfg.Sync = n.sync
	s, err := New(cfg)
	if err != nil {
		n.t.Fatal(err)
	}
	n.nodes[id] = s
	n.order = append(n.order, id)
	return s
}

// flush delivers everything every node has ready, until quiet.
func (n *pnet) flush() {
	for busy := true; busy; {
		busy = false
		for _, id := range n.order {
			s := n.nodes[id]
			if s == nil || !s.HasReady() {
				continue
			}
			busy = true
			rd := s.Ready()
			n.events = append(n.events, rd.Events...)
			for _, m := range rd.Messages {
				n.deliver(id, m.To, m.Data)
			}
			for _, b := range rd.Broadcast {
				for _, to := range n.order {
					if to != id {
						n.deliver(id, to, b)
					}
				}
			}
		}
	}
}

func (n *pnet) deliver(from, to string, data []byte) {
	if n.nodes[to] == nil || (n.drop != nil && n.drop(from, to, data)) {
		return
	}
	n.nodes[to].Receive(from, data)
}

// round ticks every node once, trains those that can, and delivers.
func (n *pnet) round() {
	n.checkOverlayKeys()
	for _, id := range n.order {
		if s := n.nodes[id]; s != nil {
			s.Tick()
			if s.CanTrain() {
				if err := s.Train(); err != nil {
					n.t.Fatal(err)
				}
			}
		}
	}
	n.flush()
	for _, id := range n.order {
		if s := n.nodes[id]; s != nil && !s.CanTrain() {
			n.flushMsgs(id, s.SyncRequest())
			n.flushMsgs(id, s.AntiEntropy())
		}
	}
	n.flush()
}

// checkOverlayKeys fails when a node's overlay key, kept up to date as
// labels come (Node.relabel), differs from the key summed afresh over its
// live members and their labels.
func (n *pnet) checkOverlayKeys() {
	n.t.Helper()
	for _, id := range n.order {
		s := n.nodes[id]
		if s == nil {
			continue
		}
		var want OverlayKey
		sites := s.Sites()
		for _, m := range slices.DeleteFunc(s.Live(), s.Leaving) {
			want.Labelled += keyOf(m, sites[m])
			want.Members += keyOf(m, "")
			if sites[m] == "" {
				want.Unlabelled++
			}
		}
		if got := s.currentOverlayKey(); got != want {
			n.t.Fatalf("%s: overlay key %+v, summed afresh %+v", id, got, want)
		}
	}
}

func (n *pnet) flushMsgs(from string, msgs []Message) {
	for _, m := range msgs {
		n.deliver(from, m.To, m.Data)
	}
}

// runUntilDone runs rounds until every node is done; it fails after limit.
func (n *pnet) runUntilDone(limit int) {
	n.t.Helper()
	for r := 0; r < limit; r++ {
		done := true
		for _, id := range n.order {
			if s := n.nodes[id]; s != nil && !s.Done() {
				done = false
			}
		}
		if done {
			return
		}
		n.round()
	}
	for _, id := range n.order {
		if s := n.nodes[id]; s != nil {
			n.t.Logf("%s: clock %d live %v vc %v", id, s.Clock(), s.Live(), s.VectorClock())
		}
	}
	n.t.Fatalf("STALL: not every node done after %d rounds", limit)
}

// admitThrough has donor admit id and starts id, training on shard, from
// the donor's snapshot with its admission.
func (n *pnet) admitThrough(donor, id string, shard int) (*Node, Admission) {
	n.t.Helper()
	snap, adm, err := n.nodes[donor].Admit(id, n.joinSig(id, donor))
	if err != nil {
		n.t.Fatal(err)
	}
	cfg := n.config(id, shard, nil, &snap)
	cfg.Admission = &adm
	s := n.add(id, cfg)
	n.flush()
	return s, adm
}

// joinSig is joiner's request to be admitted by donor.
func (n *pnet) joinSig(joiner, donor string) []byte {
	sig, _ := memberAuth{macAuth: n.auth, self: joiner}.SignMessage(JoinSignedBytes(joiner, nameOf(donor)))
	return sig
}

// sign returns a's encoding signed by signer.
func (n *pnet) sign(a Announcement, signer string) []byte {
	a.Signer = signer
	a.Sig, _ = memberAuth{macAuth: n.auth, self: signer}.SignMessage(AnnouncementSignedBytes(a))
	return EncodeAnnouncement(a)
}

func (n *pnet) checkSameViews() {
	n.t.Helper()
	var ref []float64
	var refID string
	for _, id := range n.order {
		s := n.nodes[id]
		if s == nil {
			continue
		}
		if ref == nil {
			ref, refID = slices.Clone(s.View()), id
			continue
		}
		if d := maxAbsDiff(ref, s.View()); d != 0 {
			n.t.Errorf("views of %s and %s differ by %g", refID, id, d)
		}
	}
}

// Defect: a forged admit for a live member's peer with a made-up
// incarnation retired the real member and froze every clock. Admits and
// hellos that no member signed change nothing, and the mesh trains on.
func TestForgedMembershipChangesNothing(t *testing.T) {
	ids := []string{"a/1", "b/1", "c/1"}
	n := newPnet(t, ids, 20)
	for range 3 {
		n.round()
	}
	a := n.nodes["a/1"]
	forged := [][]byte{
		// An admit of a new incarnation of b, signed by a non-member.
		n.sign(Announcement{Kind: KindAdmit, Member: "b/99", Entry: 1}, "x/1"),
		// The same admit claiming to come from c, signed by x.
		func() []byte {
			b := Announcement{Kind: KindAdmit, Member: "b/99", Entry: 1, Signer: "c/1"}
			b.Sig, _ = memberAuth{macAuth: n.auth, self: "x/1"}.SignMessage(AnnouncementSignedBytes(b))
			return EncodeAnnouncement(b)
		}(),
		// A hello of a non-member, without and with a self-signed admission.
		n.sign(Announcement{Kind: KindHello, Member: "x/1", Seq: 1}, "x/1"),
		func() []byte {
			cert := Announcement{Kind: KindAdmit, Member: "x/1", Signer: "x/2"}
			cert.Sig, _ = memberAuth{macAuth: n.auth, self: "x/2"}.SignMessage(AnnouncementSignedBytes(cert))
			return n.sign(Announcement{Kind: KindHello, Member: "x/1", Seq: 1, CertSigner: "x/2", CertSig: cert.Sig}, "x/1")
		}(),
		// A leave notice for b, signed by x.
		func() []byte {
			l := Announcement{Kind: KindLeave, Member: "b/1", Clock: 1, Signer: "b/1"}
			l.Sig, _ = memberAuth{macAuth: n.auth, self: "x/1"}.SignMessage(AnnouncementSignedBytes(l))
			return EncodeAnnouncement(l)
		}(),
		// Garbage.
		{0x9f, 0x03, 0xff},
	}
	for _, f := range forged {
		a.Receive("x/1", f)
	}
	st := a.Stats().Rejected
	if st[RejectForgedAnnouncement] != 4 || st[RejectNotAdmitted] != 1 || st[RejectBadAnnouncement] != 1 {
		t.Errorf("rejections %v: want 4 forged, 1 not admitted, 1 bad", st)
	}
	if got := a.Members(); !slices.Equal(got, ids) {
		t.Fatalf("members %v after forgeries, want %v", got, ids)
	}
	if got := a.Live(); !slices.Equal(got, ids) {
		t.Fatalf("live %v after forgeries, want %v", got, ids)
	}
	n.runUntilDone(200)
	n.checkSameViews()
}

// A member may admit a new incarnation of a peer; the old one is declared
// dead at once everywhere, and its late hellos are refused as stale.
func TestNewIncarnationSupersedesOld(t *testing.T) {
	ids := []string{"a/1", "b/1", "c/1"}
	n := newPnet(t, ids, 30)
	for range 3 {
		n.round()
	}
	oldHello := n.sign(Announcement{Kind: KindHello, Member: "b/1", Seq: 1000, Clock: 3}, "b/1")
	// b restarts as b/2 through a.
	n.nodes["b/1"] = nil
	snap, adm, err := n.nodes["a/1"].Admit("b/2", n.joinSig("b/2", "a/1"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := n.config("b/2", 1, nil, &snap)
	cfg.Admission = &adm
	n.add("b/2", cfg)
	n.flush()
	for _, id := range []string{"a/1", "c/1"} {
		s := n.nodes[id]
		if s.live.up("b/1") || s.Suspected("b/1") || !s.live.up("b/2") {
			t.Fatalf("%s: b/1 live %v suspected %v, b/2 live %v; want b/1 dead, b/2 live", id, s.live.up("b/1"), s.Suspected("b/1"), s.live.up("b/2"))
		}
		s.Receive("x", oldHello)
		if s.Stats().Rejected[RejectStaleIncarnation] != 1 || s.live.up("b/1") {
			t.Fatalf("%s: an old incarnation's hello was not refused as stale: %v", id, s.Stats().Rejected)
		}
	}
	// An admit of b/1 again (a lower incarnation) is refused by the donor.
	if _, _, err := n.nodes["c/1"].Admit("b/1", n.joinSig("b/1", "c/1")); err == nil {
		t.Fatal("a lower incarnation was admitted")
	}
	n.runUntilDone(300)
	n.checkSameViews()
}

// Defect 2: a join whose reply was lost, retried through a second donor,
// stalled the mesh (two entries for one member). A retry is a new
// incarnation: one entry each, the first superseded everywhere.
func TestRetriedJoinThroughSecondDonor(t *testing.T) {
	for _, dropAdmit := range []bool{false, true} {
		ids := []string{"a/1", "d/1"}
		n := newPnet(t, ids, 40)
		for range 3 {
			n.round()
		}
		// a admits j/1; the reply is lost (j never starts), and the admit
		// broadcast may be lost at d.
		if dropAdmit {
			n.drop = func(from, to string, data []byte) bool { return from == "a/1" && IsAnnouncement(data) }
		}
		if _, _, err := n.nodes["a/1"].Admit("j/1", n.joinSig("j/1", "a/1")); err != nil {
			t.Fatal(err)
		}
		n.flush()
		n.drop = nil
		for range 3 {
			n.round()
		}
		snap, adm, err := n.nodes["d/1"].Admit("j/2", n.joinSig("j/2", "d/1"))
		if err != nil {
			t.Fatal(err)
		}
		cfg := n.config("j/2", 2, nil, &snap)
		cfg.Admission = &adm
		n.add("j/2", cfg)
		n.flush()
		n.runUntilDone(400)
		for _, id := range []string{"a/1", "d/1"} {
			s := n.nodes[id]
			if s.live.up("j/1") {
				t.Errorf("dropAdmit=%v: %s still waits for j/1", dropAdmit, id)
			}
			if s.entryOf["j/2"] != adm.Entry {
				t.Errorf("dropAdmit=%v: %s has j/2 at entry %d, the admission says %d", dropAdmit, id, s.entryOf["j/2"], adm.Entry)
			}
		}
		n.checkSameViews()
	}
}

// A member that missed the admit learns the joiner, at the same entry,
// from the admission its hellos carry.
func TestMissedAdmitLearnedFromHello(t *testing.T) {
	ids := []string{"a/1", "b/1", "c/1"}
	n := newPnet(t, ids, 30)
	for range 2 {
		n.round()
	}
	n.drop = func(from, to string, data []byte) bool { return to == "c/1" && IsAnnouncement(data) }
	snap, adm, err := n.nodes["a/1"].Admit("j/1", n.joinSig("j/1", "a/1"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := n.config("j/1", 3, nil, &snap)
	cfg.Admission = &adm
	n.add("j/1", cfg)
	n.flush()
	if n.nodes["c/1"].isMember("j/1") {
		t.Fatal("c learned j/1 although every announcement to it was lost")
	}
	n.drop = nil
	n.runUntilDone(300)
	if got := n.nodes["c/1"].entryOf["j/1"]; got != adm.Entry {
		t.Fatalf("c has j/1 at entry %d, want %d", got, adm.Entry)
	}
	n.checkSameViews()
}

// A member that falls silent is suspected after SuspectTicks (the gate
// stops waiting, its share stays) and declared dead after DeadTicks.
func TestSilentMemberSuspectedThenDead(t *testing.T) {
	ids := []string{"a/1", "b/1", "c/1"}
	n := newPnet(t, ids, 1000)
	for range 3 {
		n.round()
	}
	n.nodes["c/1"] = nil // c crashes
	a := n.nodes["a/1"]
	if !a.SuspectsNone() {
		t.Fatal("a suspects some member of a mesh that is whole")
	}
	start := a.Ticks()
	var suspectedAt, deadAt uint64
	for r := 0; r < 100 && deadAt == 0; r++ {
		n.round()
		if a.Suspected("c/1") && a.SuspectsNone() {
			t.Fatal("a suspects c but reports that it suspects no member")
		}
		if suspectedAt == 0 && a.Suspected("c/1") {
			suspectedAt = a.Ticks() - start
			if a.Shares() != 3 {
				t.Errorf("a suspected c but divides the step by %d, want 3", a.Shares())
			}
		}
		if !a.Suspected("c/1") && !a.live.up("c/1") {
			deadAt = a.Ticks() - start
		}
	}
	// c was last heard during the round before the crash, at most one
	// tick before start.
	if suspectedAt < 9 || suspectedAt > 11 {
		t.Errorf("c suspected %d ticks after it went silent, want 10 (SuspectTicks)", suspectedAt)
	}
	// The death timeout is DeadTicks stretched by a's own rounds, which
	// grew while its gate waited for c; c's last update may reach a through
	// b one tick after start.
	if deadAt < 29 || deadAt > a.deadAfter()+1 {
		t.Errorf("c declared dead %d ticks after it went silent, want between DeadTicks (30) and %d", deadAt, a.deadAfter())
	}
	if a.Shares() != 2 || a.Clock() < 10 {
		t.Errorf("after c's death: shares %d (want 2), clock %d (want training on)", a.Shares(), a.Clock())
	}
	var kinds []EventKind
	for _, e := range n.events {
		if e.Member == "c/1" {
			kinds = append(kinds, e.Kind)
		}
	}
	if !slices.Equal(kinds, []EventKind{EventSuspected, EventSuspected, EventDead, EventDead}) {
		t.Errorf("events about c: %v, want suspected and dead at a and b", kinds)
	}
}

// Defect 9: one lost leave notice left the mesh waiting until the death
// timeout. The notice goes to every live member and is resent until each
// acknowledges it.
func TestLeaveResentUntilAcknowledged(t *testing.T) {
	ids := []string{"a/1", "b/1", "c/1"}
	n := newPnet(t, ids, 1000)
	for range 3 {
		n.round()
	}
	c := n.nodes["c/1"]
	lost := 0
	n.drop = func(from, to string, data []byte) bool {
		if from == "c/1" && to == "b/1" && IsAnnouncement(data) && lost < 3 {
			lost++
			return true
		}
		return false
	}
	c.StartLeave()
	n.flush()
	acked, waiting := c.LeaveStatus()
	if !slices.Equal(acked, []string{"a/1"}) || !slices.Equal(waiting, []string{"b/1"}) {
		t.Fatalf("after the first send: acked %v waiting %v", acked, waiting)
	}
	if c.LeaveAcknowledged() {
		t.Error("LeaveAcknowledged while b/1 has not acknowledged")
	}
	for range 10 {
		c.Tick()
		n.flush()
	}
	acked, waiting = c.LeaveStatus()
	if len(waiting) != 0 || len(acked) != 2 {
		t.Fatalf("after resends: acked %v waiting %v", acked, waiting)
	}
	if !c.LeaveAcknowledged() {
		t.Error("not LeaveAcknowledged once every member acknowledged")
	}
	for _, id := range []string{"a/1", "b/1"} {
		if last, ok := n.nodes[id].left["c/1"]; !ok || last != c.Clock() {
			t.Errorf("%s: c left %v at %d, want at %d", id, ok, last, c.Clock())
		}
	}
	if c.CanTrain() {
		t.Error("a leaving node may still train")
	}
}

// A leave is acknowledged only by a member that holds the leaver's updates
// up to its last clock: the acknowledgement lets the leaver go, and with it
// the one sure source of those updates. One that lacks them asks the leaver
// and acknowledges a later copy of the notice.
func TestLeaveAcknowledgedOnceTheLeaversLastUpdatesAreHeld(t *testing.T) {
	ids := []string{"a/1", "b/1", "c/1"}
	n := newPnet(t, ids, 1000)
	for range 3 {
		n.round()
	}
	b, c := n.nodes["b/1"], n.nodes["c/1"]
	// c's last update reaches a but not b, neither directly nor relayed.
	n.drop = func(from, to string, data []byte) bool {
		return to == "b/1" && !IsAnnouncement(data) && !IsSyncMessage(data)
	}
	c.Tick()
	if err := c.Train(); err != nil {
		t.Fatal(err)
	}
	n.flush()
	if got := b.vc.Get("c/1"); got != c.Clock()-1 {
		t.Fatalf("b holds c's updates up to %d, want %d (all but the last)", got, c.Clock()-1)
	}
	c.StartLeave()
	n.flush()
	acked, waiting := c.LeaveStatus()
	if !slices.Equal(acked, []string{"a/1"}) || !slices.Equal(waiting, []string{"b/1"}) {
		t.Fatalf("b lacks c's last update: acked %v waiting %v, want a only", acked, waiting)
	}
	// Only c, which trains no more, can send it now.
	n.drop = func(from, to string, data []byte) bool {
		return from != "c/1" && to == "b/1" && !IsAnnouncement(data) && !IsSyncMessage(data)
	}
	asked := b.SyncStats().RequestsSent
	for i := 0; !c.LeaveAcknowledged(); i++ {
		if i == 10 {
			t.Fatalf("b never acknowledged; it holds c's updates up to %d of %d", b.vc.Get("c/1"), c.Clock())
		}
		c.Tick()
		b.Tick()
		n.flush()
	}
	if got := b.vc.Get("c/1"); got != c.Clock() {
		t.Errorf("b acknowledged holding c's updates up to %d, want %d", got, c.Clock())
	}
	if b.SyncStats().RequestsSent == asked {
		t.Error("b did not ask c for its last update")
	}
}

// A leaver resends its notice until each member acknowledges it, and a
// member that cannot get the leaver's last updates holds its
// acknowledgement back: the copies are no sign of life, so that member
// still suspects the leaver and declares it dead once silent otherwise,
// and stops waiting for it, though the leaver resends for all that time.
func TestLeaverWhoseLastUpdatesAreGoneIsDeclaredDead(t *testing.T) {
	ids := []string{"a/1", "b/1"}
	n := newPnet(t, ids, 1000)
	for range 2 {
		n.round()
	}
	a, b := n.nodes["a/1"], n.nodes["b/1"]
	n.drop = func(from, to string, data []byte) bool {
		return from == "b/1" && to == "a/1" && !IsAnnouncement(data)
	}
	b.Tick()
	if err := b.Train(); err != nil {
		t.Fatal(err)
	}
	b.StartLeave()
	n.flush()
	if !a.Leaving("b/1") {
		t.Fatal("a does not wait for b's last update")
	}
	limit := int(a.deadAfter()) + 10
	for i := 0; a.Leaving("b/1"); i++ {
		if i == limit {
			t.Fatalf("a still waits for b after %d ticks of b's resent notices", limit)
		}
		n.round()
	}
	if b.LeaveAcknowledged() {
		t.Error("a acknowledged a leave whose last update it lacks")
	}
	if a.live.up("b/1") || a.Suspected("b/1") {
		t.Error("b is still waited for")
	}
}

// A member whose leave notice arrives before its last updates is waited
// for; if they never come, it is declared dead after the suspicion
// timeout, like a member that vanished, and the wait ends.
func TestLeaverWaitedForThenDeclaredDead(t *testing.T) {
	ids := []string{"a/1", "b/1"}
	n := newPnet(t, ids, 1000)
	for range 2 {
		n.round()
	}
	a, b := n.nodes["a/1"], n.nodes["b/1"]
	n.nodes["b/1"] = nil
	// b's notice says it left after an update a never gets.
	a.Receive("b/1", n.sign(Announcement{Kind: KindLeave, Member: "b/1", Clock: b.Clock() + 1}, "b/1"))
	if !a.Leaving("b/1") {
		t.Fatal("a stopped waiting for b's last update at once")
	}
	for i := 1; i <= 10; i++ {
		n.round()
		if a.Leaving("b/1") != (i < 10) {
			t.Fatalf("tick %d after the notice: leaving %v, want %v", i, a.Leaving("b/1"), i < 10)
		}
	}
	if a.live.up("b/1") || a.Suspected("b/1") {
		t.Fatal("b is still waited for")
	}
}

func FuzzDecodeAnnouncement(f *testing.F) {
	f.Add(EncodeAnnouncement(Announcement{Kind: KindHello, Member: "a/1", Clock: 3, Seq: 2, Round: 1500, Addrs: []string{"/ip4/127.0.0.1/tcp/1"}, Site: "s/1", Signer: "a/1", Sig: []byte{1, 2}, CertSigner: "b/1", CertSig: []byte{3}}))
	f.Add(EncodeAnnouncement(Announcement{Kind: KindAdmit, Member: "j/9", Entry: 4, Signer: "b/1", Sig: []byte{1}}))
	f.Add(EncodeAnnouncement(Announcement{Kind: KindLeave, Member: "a/1", Clock: 7, Signer: "a/1"}))
	f.Add(EncodeAnnouncement(Announcement{Kind: KindLeaveAck, Member: "a/1", Clock: 7, Signer: "c"}))
	f.Fuzz(func(t *testing.T, data []byte) {
		a, err := DecodeAnnouncement(data)
		if err != nil {
			return
		}
		again, err := DecodeAnnouncement(EncodeAnnouncement(a))
		if err != nil {
			t.Fatalf("re-encoding of a decoded announcement does not decode: %v", err)
		}
		if again.Kind != a.Kind || again.Member != a.Member || again.Seq != a.Seq || again.Site != a.Site || !slices.Equal(again.Addrs, a.Addrs) {
			t.Fatalf("round trip changed %+v into %+v", a, again)
		}
	})
}

// A member cannot make up an incarnation of another member's peer: an admit
// needs the joiner's own signed request, bound to the admitting member. A
// member that admits joiners it made up (it can make keys for any number)
// has at most MaxSilentAdmits of them unheard-of at a time.
func TestAdmitNeedsJoinRequestAndIsCapped(t *testing.T) {
	ids := []string{"a/1", "b/1", "c/1"}
	n := newPnet(t, ids, 30)
	n.round()
	c := n.nodes["c/1"]
	admit := func(member string, joinSig []byte) []byte {
		return n.sign(Announcement{Kind: KindAdmit, Member: member, Entry: 1, JoinSig: joinSig}, "a/1")
	}
	// a admits b/9 without b's request, with a request b made for another
	// donor, and with one b made for a but for another incarnation.
	for _, sig := range [][]byte{nil, n.joinSig("b/9", "c/1"), n.joinSig("b/8", "a/1")} {
		c.Receive("a/1", admit("b/9", sig))
	}
	if got := c.Stats().Rejected[RejectForgedAnnouncement]; got != 3 || c.isMember("b/9") || !c.live.up("b/1") {
		t.Fatalf("forged admits: %d rejected, b/9 member %v, b/1 live %v", got, c.isMember("b/9"), c.live.up("b/1"))
	}
	// Made-up joiners with their own keys: the first MaxSilentAdmits count.
	for i := range MaxSilentAdmits + 2 {
		j := fmt.Sprintf("sybil%d/1", i)
		c.Receive("a/1", admit(j, n.joinSig(j, "a/1")))
	}
	if got := c.Stats().Rejected[RejectAdmitLimit]; got != 2 || len(c.Members()) != 3+MaxSilentAdmits {
		t.Fatalf("%d admits over the limit refused, %d members; want 2 and %d", got, len(c.Members()), 3+MaxSilentAdmits)
	}
	// They never speak: suspected, then dead, and the mesh trains on.
	n.runUntilDone(400)
}

// A member that keeps saying hello, claiming ever higher clocks, but sends
// no update would hold every gate for good: it is suspected once it has
// held the gate for the death timeout, and live again when its updates
// come.
func TestMemberThatOnlySaysHelloIsSuspected(t *testing.T) {
	ids := []string{"a/1", "b/1", "c/1"}
	n := newPnet(t, ids, 40)
	n.round()
	n.nodes["c/1"] = nil // c's driver now only says hello
	seq := uint64(100)
	hello := func() {
		seq++
		h := n.sign(Announcement{Kind: KindHello, Member: "c/1", Clock: seq, Seq: seq}, "c/1")
		for _, id := range []string{"a/1", "b/1"} {
			n.nodes[id].Receive("c/1", h)
		}
	}
	var suspected bool
	for r := 0; r < 200 && !(n.nodes["a/1"].Done() && n.nodes["b/1"].Done()); r++ {
		hello()
		n.round()
		suspected = suspected || n.nodes["a/1"].Suspected("c/1")
	}
	a := n.nodes["a/1"]
	if !a.Done() || !n.nodes["b/1"].Done() || !suspected {
		t.Fatalf("a done %v at %d, b done %v, c suspected %v", a.Done(), a.Clock(), n.nodes["b/1"].Done(), suspected)
	}
	var withholding int
	for _, e := range n.events {
		if e.Kind == EventSuspected && e.Member == "c/1" && e.Withholding {
			withholding++
		}
	}
	if withholding != 2 {
		t.Errorf("%d suspicions of withholding, want one at a and one at b", withholding)
	}
}

// A member that learns of a joiner sends it its own updates above the
// joiner's entry: those it made before it knew of the joiner went to the
// others only, and the joiner's gate needs them.
func TestMemberSendsJoinerItsUpdatesAboveEntry(t *testing.T) {
	ids := []string{"a/1", "c/1"}
	n := newPnet(t, ids, 30)
	for range 3 {
		n.round()
	}
	c := n.nodes["c/1"]
	c.Ready()
	entry := c.Clock() - 2
	admit := n.sign(Announcement{Kind: KindAdmit, Member: "j/1", Entry: entry, JoinSig: n.joinSig("j/1", "a/1")}, "a/1")
	c.Receive("a/1", admit)
	var sent []uint64
	for _, m := range c.Ready().Messages {
		if m.To != "j/1" {
			continue
		}
		ups, err := DecodeEnvelope(m.Data)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range ups {
			if u.Origin != "c/1" {
				t.Errorf("c sent the joiner %s's update %d", u.Origin, u.Clock)
			}
			sent = append(sent, u.Clock)
		}
	}
	if want := []uint64{entry + 1, entry + 2}; !slices.Equal(sent, want) {
		t.Fatalf("c sent the joiner its updates %v, want %v", sent, want)
	}
}

// A member whose driver is gone while its peer still sends, but only what
// the core refuses (a replayed hello) or what proves nothing (sync
// requests), is silent: it is suspected, then declared dead, and the
// others finish. Crediting every arrival as a sign of life would hold
// their gates for good.
func TestRefusedTrafficIsNoSignOfLife(t *testing.T) {
	ids := []string{"a/1", "b/1", "c/1"}
	n := newPnet(t, ids, 40)
	n.round()
	n.nodes["c/1"] = nil
	old := n.sign(Announcement{Kind: KindHello, Member: "c/1", Clock: 1, Seq: 1}, "c/1")
	req := EncodeSync(SyncMessage{Upto: 1, Have: []SyncEntry{{Origin: "a/1", Clock: 0}}})
	for _, id := range []string{"a/1", "b/1"} {
		n.nodes[id].Receive("c/1", old)
	}
	for r := 0; r < 400 && !(n.nodes["a/1"].Done() && n.nodes["b/1"].Done()); r++ {
		for _, id := range []string{"a/1", "b/1"} {
			n.nodes[id].Receive("c/1", old)
			n.nodes[id].Receive("c/1", req)
		}
		n.round()
	}
	a, b := n.nodes["a/1"], n.nodes["b/1"]
	if !a.Done() || !b.Done() || a.live.up("c/1") || b.live.up("c/1") {
		t.Fatalf("a done %v at %d, b done %v at %d, c live at a %v, at b %v", a.Done(), a.Clock(), b.Done(), b.Clock(), a.live.up("c/1"), b.live.up("c/1"))
	}
	if got := a.Stats().Rejected[RejectStaleHello]; got == 0 {
		t.Fatal("the replayed hello was not refused")
	}
}

// A member that is heard from (it passes on others' updates and says
// hello, claiming it is behind) but never sends its own holds the gate
// only for the death timeout: it is suspected as withholding, whatever
// clock it claims, and the others finish.
func TestMemberThatOnlyRelaysIsSuspected(t *testing.T) {
	ids := []string{"a/1", "b/1", "c/1"}
	n := newPnet(t, ids, 40)
	n.round()
	n.nodes["c/1"] = nil
	var seq uint64 = 100
	var suspected bool
	for r := 0; r < 400 && !(n.nodes["a/1"].Done() && n.nodes["b/1"].Done()); r++ {
		seq++
		h := n.sign(Announcement{Kind: KindHello, Member: "c/1", Clock: 1, Seq: seq}, "c/1")
		for _, id := range []string{"a/1", "b/1"} {
			n.nodes[id].Receive("c/1", h)
		}
		n.round()
		suspected = suspected || n.nodes["a/1"].Suspected("c/1")
	}
	if a, b := n.nodes["a/1"], n.nodes["b/1"]; !a.Done() || !b.Done() || !suspected {
		t.Fatalf("a done %v at %d, b done %v at %d, c suspected %v", a.Done(), a.Clock(), b.Done(), b.Clock(), suspected)
	}
}

// helloCounter counts the hellos each member broadcasts in a pnet, as one
// member (the second, for the first's own) receives them.
func helloCounter(n *pnet) map[string]int {
	said := map[string]int{}
	prev := n.drop
	n.drop = func(from, to string, data []byte) bool {
		observer := n.order[0]
		if from == observer {
			observer = n.order[1]
		}
		if to == observer && isHello(data) {
			said[from]++
		}
		return prev != nil && prev(from, to, data)
	}
	return said
}

func isHello(data []byte) bool {
	a, err := DecodeAnnouncement(data)
	return err == nil && a.Kind == KindHello
}

// A mesh that trains says hellos only every RefreshTicks: each member's
// updates, relayed along an overlay where most pairs are not neighbours,
// keep it live at every other, and no member is suspected. Without the
// relayed updates counting, every member would suspect its non-neighbours.
func TestTrainingMembersSkipHellos(t *testing.T) {
	ids := []string{"a/1", "b/1", "c/1", "d/1", "e/1", "f/1", "g/1", "h/1"}
	n := newSitePnet(t, ids, 1000, func(live []string, _ map[string]string) Router { return halton.Build(live) })
	said := helloCounter(n)
	const rounds = 60
	for range rounds {
		n.round()
	}
	// One hello before the first update (the first heartbeat), then one
	// every RefreshTicks (SuspectTicks, 10): 7 at most in 60 ticks; a
	// hello every heartbeat would be 30.
	for _, id := range ids {
		if got := said[id]; got < 5 || got > 7 {
			t.Errorf("%s said %d hellos in %d ticks, want 5-7 (one every RefreshTicks)", id, got, rounds)
		}
	}
	for _, e := range n.events {
		t.Errorf("event %v about %s", e.Kind, e.Member)
	}
	a := n.nodes["a/1"]
	if a.Clock() < rounds-2 || len(a.Live()) != len(ids) {
		t.Errorf("a at clock %d, %d live", a.Clock(), len(a.Live()))
	}
}

// A member that stops making updates (done, or held at its gate) says
// hellos every heartbeat again, and so does one that sees a member down.
func TestHellosResumeWhenSilentOrDegraded(t *testing.T) {
	ids := []string{"a/1", "b/1", "c/1"}
	n := newPnet(t, ids, 10)
	said := helloCounter(n)
	for range 30 {
		n.round()
	}
	// 10 iterations, then 20 ticks done: silent for half the suspicion
	// timeout (5 ticks), then a hello every heartbeat (2 ticks), 8 of them.
	if got := said["b/1"]; got < 8 {
		t.Errorf("b said %d hellos in its 20 ticks done, want at least 8", got)
	}

	n = newPnet(t, ids, 1000)
	said = helloCounter(n)
	for range 5 {
		n.round()
	}
	n.nodes["c/1"].DeclareDead("a/1") // c sees a down (a says no hello to bring it back)
	clear(said)
	for range 8 {
		n.round()
	}
	if got, other := said["c/1"], said["b/1"]; got < 3 || other > 1 {
		t.Errorf("in 8 ticks, c (degraded) said %d hellos, want one every other tick; b said %d, want at most 1", got, other)
	}
}

// An update of a suspected member that reaches a node through another
// (a resend from a log, a relay) does not bring it back: the updates of a
// member that left or died keep coming from others after it is gone. Its
// hello does.
func TestRelayedUpdateDoesNotBringASuspectBack(t *testing.T) {
	ids := []string{"a/1", "b/1", "c/1"}
	n := newPnet(t, ids, 1000)
	var held [][]byte // what c sends a, which b passes on
	n.drop = func(from, to string, data []byte) bool {
		if from == "c/1" && to == "a/1" {
			held = append(held, data)
			return true
		}
		return false
	}
	for range 3 {
		n.round()
	}
	a := n.nodes["a/1"]
	a.Suspect("c/1")
	before := a.VectorClock().Get("c/1")
	for range 2 {
		n.round()
		for _, data := range held {
			a.Receive("b/1", data)
		}
		held = held[:0]
	}
	if a.VectorClock().Get("c/1") <= before {
		t.Fatalf("a has c up to %d, had %d: no update came through b", a.VectorClock().Get("c/1"), before)
	}
	if !a.Suspected("c/1") {
		t.Fatal("a relayed update brought c back")
	}
	n.drop = nil
	n.nodes["c/1"].proto.announce = true // c says hello at its next heartbeat
	for range 3 {
		n.round()
	}
	if a.Suspected("c/1") || !a.live.up("c/1") {
		t.Fatal("c's hello did not bring it back")
	}
}

// A member cut off while a joiner is admitted and dies never hears of the
// joiner from the joiner itself: when it comes back (its fresh hello after
// being declared dead), the members that hold the joiner's admit send it
// again, so it takes the joiner's updates that every other member holds.
func TestComebackLearnsTheJoinersItMissed(t *testing.T) {
	ids := []string{"a/1", "b/1", "c/1"}
	n := newPnet(t, ids, 1000)
	for range 3 {
		n.round()
	}
	cut := true
	n.drop = func(from, to string, _ []byte) bool { return cut && (from == "c/1" || to == "c/1") }
	n.admitThrough("a/1", "d/1", 3)
	for range 10 {
		n.round()
	}
	held := n.nodes["a/1"].VectorClock().Get("d/1")
	if held <= n.nodes["a/1"].entryOf["d/1"] {
		t.Fatalf("a holds d/1 up to %d, its entry: d made no update", held)
	}
	n.nodes["d/1"] = nil // d dies while c is away
	for range 80 {
		n.round()
	}
	if a := n.nodes["a/1"]; a.live.up("c/1") || a.live.up("d/1") {
		t.Fatalf("a counts c live %v, d live %v: want both dead", a.live.up("c/1"), a.live.up("d/1"))
	}
	cut = false
	for range 150 {
		n.round()
	}
	c := n.nodes["c/1"]
	if !c.isMember("d/1") {
		t.Fatal("c never learned of d/1")
	}
	if got := c.VectorClock().Get("d/1"); got != held {
		t.Fatalf("c holds d/1 up to %d, the others %d", got, held)
	}
}

// A member that admits a joiner before an earlier admit reaches it (lost,
// or cut off by a split) gave the joiner a snapshot without that member:
// when the admit does arrive, it forwards it to the joiner.
func TestLateAdmitForwardedToTheJoinersAdmittedSince(t *testing.T) {
	ids := []string{"a/1", "b/1", "c/1"}
	n := newPnet(t, ids, 1000)
	for range 2 {
		n.round()
	}
	n.drop = func(from, to string, _ []byte) bool { return to == "b/1" || (from == "d/1" && to == "e/1") }
	n.admitThrough("a/1", "d/1", 3)
	if n.nodes["b/1"].isMember("d/1") {
		t.Fatal("b learned d/1 although everything to it was lost")
	}
	n.drop = func(from, to string, _ []byte) bool { return from == "d/1" && to == "e/1" }
	e, _ := n.admitThrough("b/1", "e/1", 0)
	if e.isMember("d/1") {
		t.Fatal("e's snapshot came from b, which did not know d/1")
	}
	n.nodes["b/1"].Receive("a/1", n.nodes["a/1"].extraOf("d/1").admit)
	n.flush()
	if !e.isMember("d/1") {
		t.Fatal("b did not forward d/1's admit to e, which it admitted without it")
	}
}
