package node

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/sketchmesh/sketchmesh/codec"
	"github.com/sketchmesh/sketchmesh/model"
)

func newNodes(t *testing.T, p, staleness int, iterations uint64, sc SyncConfig) ([]*Node, []string) {
	t.Helper()
	return newNodesWith(t, p, sc, func(c *Config) { c.Staleness, c.Iterations = staleness, iterations })
}

// newNodesWith builds p nodes training logistic regression with SGD on
// rcv1 shards; adjust changes each node's config before it is built.
func newNodesWith(t *testing.T, p int, sc SyncConfig, adjust func(*Config)) ([]*Node, []string) {
	t.Helper()
	train := testData(t)
	mdl, err := model.New(model.Config{Kind: model.LogisticRegression, MaxFeature: train.MaxFeature, L2: 1e-4})
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, p)
	for i := range ids {
		ids[i] = fmt.Sprintf("node-%02d", i)
	}
	out := make([]*Node, p)
	for i, id := range ids {
		opt, err := model.NewOptimizer(model.SGD, 1, mdl.NumParams())
		if err != nil {
			t.Fatal(err)
		}
		cfg := Config{
			ID: id, Members: ids, Model: mdl, Optimizer: opt, Codec: codec.Raw{},
			BatchSize: 5, Seed: 1, Shard: train.Shard(i, p).Rows,
		}
		adjust(&cfg)
		cfg.Sync = sc
		if out[i], err = New(cfg); err != nil {
			t.Fatal(err)
		}
	}
	return out, ids
}

// deliver hands every message in msgs to its addressee, except those drop
// refuses, and returns what the receivers queued in turn.
func deliver(nodes []*Node, from string, msgs []Message, drop func(to string) bool) []flight {
	byID := map[string]*Node{}
	for _, n := range nodes {
		byID[n.ID()] = n
	}
	var next []flight
	for _, m := range msgs {
		if drop != nil && drop(m.To) {
			continue
		}
		to := byID[m.To]
		to.Receive(from, m.Data)
		for _, r := range to.Ready().Messages {
			next = append(next, flight{from: m.To, to: r.To, data: r.Data})
		}
	}
	return next
}

// settle delivers messages until none is left.
func settle(nodes []*Node, queue []flight) {
	for len(queue) > 0 {
		f := queue[0]
		queue = append(queue[1:], deliver(nodes, f.from, []Message{{To: f.to, Data: f.data}}, nil)...)
	}
}

func TestSyncMessageRoundTrip(t *testing.T) {
	in := SyncMessage{Upto: 1 << 40, Have: []SyncEntry{{"a", 0}, {"bb", 7}, {strings.Repeat("c", maxOriginBytes), 1 << 50}},
		Digest: ViewDigest{Clock: 96, Sum: 0xfedcba9876543210}}
	data := EncodeSync(in)
	if !IsSyncMessage(data) {
		t.Fatalf("encoded request % x not recognised", data[:4])
	}
	if IsSyncMessage(EncodeEnvelope([]Update{{Origin: "a", Clock: 1, Frame: []byte{1}}})) || IsSyncMessage(EncodeEnvelope(nil)) {
		t.Fatal("an envelope is taken for a sync request")
	}
	out, err := DecodeSync(data)
	if err != nil {
		t.Fatal(err)
	}
	if out.Upto != in.Upto || !slices.Equal(out.Have, in.Have) || out.Digest != in.Digest {
		t.Fatalf("round trip: got %+v", out)
	}
	empty, err := DecodeSync(EncodeSync(SyncMessage{}))
	if err != nil || empty.Upto != 0 || len(empty.Have) != 0 || empty.Digest != (ViewDigest{}) {
		t.Fatalf("empty request: %+v, %v", empty, err)
	}
	// The envelope decoder refuses a sync request (version 2), so a core
	// that does not route them counts them as bad envelopes.
	if _, err := DecodeEnvelope(data); err == nil {
		t.Fatal("envelope decoder accepted a sync request")
	}
}

func TestSyncHostileHeaders(t *testing.T) {
	prefix := []byte{0x96, 0x02, 0xa4, 's', 'y', 'n', 'c', 0x05}
	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "sync request"},
		{"array32 huge", []byte{0xdd, 0xff, 0xff, 0xff, 0xff}, "claims 4294967295 elements"},
		{"wrong field count", []byte{0x93, 0x02, 0xa4, 's', 'y', 'n', 'c'}, "3 fields"},
		{"format without digest", []byte{0x94, 0x02, 0xa4, 's', 'y', 'n', 'c', 0x00, 0x90}, "4 fields, want 6"},
		{"envelope version", []byte{0x96, 0x01, 0xa4, 's', 'y', 'n', 'c', 0x00, 0x90, 0x00, 0x00}, "kind 1"},
		{"wrong tag", []byte{0x96, 0x02, 0xa4, 's', 'y', 'n', 'k', 0x00, 0x90, 0x00, 0x00}, "tag"},
		{"long tag", []byte{0x96, 0x02, 0xa5, 's', 'y', 'n', 'c', 's', 0x00, 0x90, 0x00, 0x00}, "tag claims 5 bytes"},
		{"upto not a number", []byte{0x96, 0x02, 0xa4, 's', 'y', 'n', 'c', 0xa1, 'x', 0x90, 0x00, 0x00}, "upto"},
		{"entry list array32 huge", append(slices.Clone(prefix), 0xdd, 0xff, 0xff, 0xff, 0xff), "claims"},
		{"more entries than bytes", append(append(slices.Clone(prefix), 0x9f), make([]byte, 16)...), "cannot fit"},
		{"entry of three fields", append(slices.Clone(prefix), 0x91, 0x93, 0xa1, 'a', 0x01, 0x01, 0x00, 0x00), "3 fields"},
		{"str32 huge origin", append(slices.Clone(prefix), 0x91, 0x92, 0xdb, 0xff, 0xff, 0xff, 0xff, 0x01), "origin claims 4294967295 bytes"},
		{"empty origin", append(slices.Clone(prefix), 0x91, 0x92, 0xa0, 0x01, 0x00, 0x00, 0x00), "empty origin"},
		{"digest missing", append(slices.Clone(prefix), 0x90), "digest clock"},
		{"digest clock not a number", append(slices.Clone(prefix), 0x90, 0xa1, 'x', 0x00), "digest clock"},
		{"digest half there", append(slices.Clone(prefix), 0x90, 0x07), "digest"},
		{"digest not a number", append(slices.Clone(prefix), 0x90, 0x07, 0xa1, 0x78), "digest"},
		{"trailing bytes", append(EncodeSync(SyncMessage{}), 0), "trailing"},
		{"too large", append(slices.Clone(prefix), make([]byte, MaxSyncBytes)...), "limit"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := DecodeSync(c.data)
			if err == nil {
				t.Fatal("accepted")
			}
			if !errors.Is(err, ErrBadSync) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q, want ErrBadSync mentioning %q", err, c.want)
			}
		})
	}
}

func FuzzDecodeSync(f *testing.F) {
	f.Add(EncodeSync(SyncMessage{Upto: 3, Have: []SyncEntry{{"node-01", 2}, {"node-02", 0}}, Digest: ViewDigest{Clock: 2, Sum: 1 << 63}}))
	f.Add([]byte{0x96, 0x02, 0xa4, 's', 'y', 'n', 'c', 0x00, 0xdd, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0x96, 0x02, 0xa4, 's', 'y', 'n', 'c', 0x00, 0x91, 0x92, 0xdb, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		m, err := DecodeSync(data)
		runtime.ReadMemStats(&after)
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > uint64(16*len(data)+64<<10) {
			t.Fatalf("decoding %d bytes allocated %d", len(data), alloc)
		}
		if err != nil {
			return
		}
		for _, e := range m.Have {
			if e.Origin == "" {
				t.Fatal("empty origin accepted")
			}
		}
		again, err := DecodeSync(EncodeSync(m))
		if err != nil {
			t.Fatalf("re-encoded request does not decode: %v", err)
		}
		if again.Upto != m.Upto || !slices.Equal(again.Have, m.Have) || again.Digest != m.Digest {
			t.Fatalf("re-encoding changed the request: %+v, then %+v", m, again)
		}
		if !IsSyncMessage(EncodeSync(m)) {
			t.Fatal("canonical encoding not recognised")
		}
	})
}

// A lost update closes the receiver's gate; one sync request to the
// laggard brings it back, and a second resend is a duplicate, not a second
// application.
func TestSyncRecoversLostUpdate(t *testing.T) {
	nodes, ids := newNodes(t, 3, 0, 5, SyncConfig{})
	a, b, c := nodes[0], nodes[1], nodes[2]
	for _, n := range nodes {
		if err := n.Train(); err != nil {
			t.Fatal(err)
		}
	}
	// a's update to b is lost; everything else arrives.
	q := deliver(nodes, ids[0], a.Ready().Messages, func(to string) bool { return to == ids[1] })
	q = append(q, deliver(nodes, ids[1], b.Ready().Messages, nil)...)
	q = append(q, deliver(nodes, ids[2], c.Ready().Messages, nil)...)
	settle(nodes, q)
	if b.CanTrain() || !a.CanTrain() || !c.CanTrain() {
		t.Fatalf("gates: a %v, b %v, c %v; want only b closed", a.CanTrain(), b.CanTrain(), c.CanTrain())
	}
	reqs := b.SyncRequest()
	var toA []Message
	for _, m := range reqs {
		if !IsSyncMessage(m.Data) {
			t.Fatal("SyncRequest built something that is not a sync request")
		}
		if m.To == ids[0] {
			toA = append(toA, m)
		}
	}
	if len(toA) == 0 {
		t.Fatalf("no request to the laggard %s among %d", ids[0], len(reqs))
	}
	settle(nodes, deliver(nodes, ids[1], reqs, nil))
	if !b.CanTrain() {
		t.Fatalf("b's gate still closed after sync; vector clock %v", b.VectorClock().Snapshot())
	}
	before := b.Stats()
	settle(nodes, deliver(nodes, ids[1], toA, nil))
	after := b.Stats()
	if after.UpdatesApplied != before.UpdatesApplied || after.Rejected[RejectDuplicate] <= before.Rejected[RejectDuplicate] {
		t.Fatalf("a second resend: applied %d→%d, duplicates %d→%d", before.UpdatesApplied, after.UpdatesApplied,
			before.Rejected[RejectDuplicate], after.Rejected[RejectDuplicate])
	}
	if st := a.SyncStats(); st.RequestsServed == 0 || st.UpdatesResent == 0 {
		t.Fatalf("a's sync stats %+v", st)
	}
}

// The last update of a member that died reached one peer only; anti-entropy
// carries it to the other even though nobody waits for the dead member.
func TestSyncSpreadsDeadOriginsUpdates(t *testing.T) {
	nodes, ids := newNodes(t, 3, 0, 1, SyncConfig{})
	a, b, c := nodes[0], nodes[1], nodes[2]
	if got := b.AntiEntropy(); got != nil {
		t.Fatalf("anti-entropy at clock 0 asks for something: %d requests", len(got))
	}
	if err := c.Train(); err != nil {
		t.Fatal(err)
	}
	settle(nodes, deliver(nodes, ids[2], c.Ready().Messages, func(to string) bool { return to == ids[1] }))
	a.PeerDown(ids[2])
	b.PeerDown(ids[2])
	for _, n := range nodes[:2] {
		if err := n.Train(); err != nil {
			t.Fatal(err)
		}
	}
	settle(nodes, deliver(nodes, ids[0], a.Ready().Messages, nil))
	settle(nodes, deliver(nodes, ids[1], b.Ready().Messages, nil))
	if !a.Done() || !b.Done() || !a.VectorClock().Has(ids[2], 1) || b.VectorClock().Has(ids[2], 1) {
		t.Fatal("setup: want a and b done, and c's update at a only")
	}
	if got := b.SyncRequest(); got != nil {
		t.Fatalf("b waits for nobody, yet asks %d laggards", len(got))
	}
	reqs := b.AntiEntropy()
	if len(reqs) != 1 || reqs[0].To != ids[0] {
		t.Fatalf("anti-entropy requests %+v, want one to %s", reqs, ids[0])
	}
	settle(nodes, deliver(nodes, ids[1], reqs, nil))
	if !b.VectorClock().Has(ids[2], 1) {
		t.Fatal("anti-entropy did not bring the dead member's update to b")
	}
	if reqs := b.AntiEntropy(); reqs != nil {
		t.Fatalf("b lacks nothing, yet sends %d anti-entropy requests", len(reqs))
	}
}

// An answer never holds updates the requester would reject as too far
// ahead, and respects the byte budget.
func TestSyncAnswerBounds(t *testing.T) {
	nodes, ids := newNodes(t, 2, 1, 10, SyncConfig{})
	a := nodes[0]
	// a runs ahead alone (b's updates are not needed with b down).
	a.PeerDown(ids[1])
	for range 6 {
		if err := a.Train(); err != nil {
			t.Fatal(err)
		}
	}
	a.Ready()
	a.Receive(ids[1], EncodeSync(SyncMessage{Upto: 3, Have: []SyncEntry{{ids[0], 0}}}))
	msgs := a.Ready().Messages
	if len(msgs) != 1 {
		t.Fatalf("%d answers, want 1", len(msgs))
	}
	ups, err := DecodeEnvelope(msgs[0].Data)
	if err != nil {
		t.Fatal(err)
	}
	if len(ups) != 3 || ups[0].Clock != 1 || ups[2].Clock != 3 {
		t.Fatalf("answer holds clocks %v, want 1..3", clocksOf(ups))
	}

	small, _ := newNodes(t, 2, 1, 10, SyncConfig{MaxReplyBytes: 1})
	small[0].PeerDown(ids[1])
	for range 3 {
		if err := small[0].Train(); err != nil {
			t.Fatal(err)
		}
	}
	small[0].Ready()
	small[0].Receive(ids[1], EncodeSync(SyncMessage{Upto: 7, Have: []SyncEntry{{ids[0], 0}}}))
	ups, err = DecodeEnvelope(small[0].Ready().Messages[0].Data)
	if err != nil || len(ups) != 1 {
		t.Fatalf("a 1-byte budget answers %d updates (%v), want exactly 1", len(ups), err)
	}
}

func clocksOf(ups []Update) []uint64 {
	var out []uint64
	for _, u := range ups {
		out = append(out, u.Clock)
	}
	return out
}

// Others' frames are kept for Window clocks once committed; the node's own
// for History clocks.
func TestSyncRetentionWindow(t *testing.T) {
	nodes, ids := newNodes(t, 2, 0, 40, SyncConfig{Window: 2, History: 8})
	a, b := nodes[0], nodes[1]
	for range 20 {
		for _, n := range nodes {
			if err := n.Train(); err != nil {
				t.Fatal(err)
			}
		}
		settle(nodes, deliver(nodes, ids[0], a.Ready().Messages, nil))
		settle(nodes, deliver(nodes, ids[1], b.Ready().Messages, nil))
	}
	own, other := a.logLen(0), a.logLen(1)
	if own != 8 || other != 2 {
		t.Fatalf("a keeps %d own and %d of b's frames, want 8 and 2", own, other)
	}
	st := a.SyncStats()
	if st.Retained != 10 || st.RetainedBytes <= 0 {
		t.Fatalf("stats %+v", st)
	}
	// Once b is down, what a holds of it is kept up to History.
	a.PeerDown(ids[1])
	a.retain(ids[1], a.keep(Update{Origin: ids[1], Clock: 30, Frame: []byte("x")}))
	if a.logLen(1) != 3 {
		t.Fatalf("after PeerDown a keeps %d of b's frames, want 3", a.logLen(1))
	}
}

// While a node counts any member down, it keeps live origins' frames past
// the window: the member that is down may need them after a heal, when
// their origin may be gone.
func TestSyncRetentionWhileDegraded(t *testing.T) {
	nodes, ids := newNodes(t, 3, 0, 40, SyncConfig{Window: 2, History: 6})
	a, b := nodes[0], nodes[1]
	a.PeerDown(ids[2])
	b.PeerDown(ids[2])
	for range 10 {
		for _, n := range nodes[:2] {
			if err := n.Train(); err != nil {
				t.Fatal(err)
			}
		}
		settle(nodes, deliver(nodes, ids[0], a.Ready().Messages, nil))
		settle(nodes, deliver(nodes, ids[1], b.Ready().Messages, nil))
	}
	if got := a.logLen(1); got != 6 {
		t.Fatalf("a counts c down and keeps %d of b's frames, want History = 6", got)
	}
	a.PeerUp(ids[2])
	a.retain(ids[1], a.keep(Update{Origin: ids[1], Clock: 11, Frame: []byte("x")})) // the next frame of b evicts past the window again
	if got := a.logLen(1); got > 2+1 {
		t.Fatalf("with everyone live again a keeps %d of b's frames", got)
	}
}

func TestPeerUpClosesGateAgain(t *testing.T) {
	nodes, ids := newNodes(t, 2, 0, 5, SyncConfig{})
	a := nodes[0]
	a.PeerDown(ids[1])
	if err := a.Train(); err != nil {
		t.Fatal(err)
	}
	if !a.CanTrain() {
		t.Fatal("gate closed with the only peer down")
	}
	a.PeerUp(ids[1])
	a.PeerUp("stranger")
	a.PeerUp(ids[0])
	if a.CanTrain() {
		t.Fatal("gate open after PeerUp of a member that has sent nothing")
	}
	if got := a.Live(); !slices.Equal(got, ids) {
		t.Fatalf("live %v, want %v", got, ids)
	}
}

func TestSyncRejectsBadRequests(t *testing.T) {
	nodes, ids := newNodes(t, 2, 0, 5, SyncConfig{})
	a := nodes[0]
	a.Receive(ids[1], []byte{0x96, 0x02, 0xff})
	a.Receive("intruder", EncodeSync(SyncMessage{Upto: 1, Have: []SyncEntry{{ids[0], 0}}}))
	st := a.Stats()
	if st.Rejected[RejectBadSync] != 1 || st.Rejected[RejectNotMember] != 1 {
		t.Fatalf("rejected %v", st.Rejected)
	}
	if len(a.Ready().Messages) != 0 {
		t.Fatal("answered a bad request")
	}
}

func TestNewRejectsSmallSyncWindow(t *testing.T) {
	nodes, _ := newNodes(t, 1, 3, 1, SyncConfig{})
	cfg := nodes[0].Config()
	cfg.Sync = SyncConfig{Window: 4}
	_, err := New(cfg)
	if err == nil || !strings.Contains(err.Error(), "staleness+2") {
		t.Fatalf("error %v", err)
	}
}

func TestSyncCorpusIsCanonical(t *testing.T) {
	// The hand-written prefix IsSyncMessage relies on is what EncodeSync
	// writes.
	if got := EncodeSync(SyncMessage{}); !bytes.HasPrefix(got, []byte{0x96, 0x02, 0xa4, 's', 'y', 'n', 'c'}) {
		t.Fatalf("encoding starts % x", got)
	}
}

// A link with no path at all: every message between a and b is lost, both
// ways. The updates of each still reach the other through c, which is asked
// for them along with the laggard itself, and all three run to the end.
func TestSyncRoutesAroundADeadLink(t *testing.T) {
	nodes, ids := newNodes(t, 3, 1, 8, SyncConfig{})
	cut := func(from, to string) bool {
		return (from == ids[0] && to == ids[1]) || (from == ids[1] && to == ids[0])
	}
	var queue []flight
	send := func(from string, msgs []Message) {
		for _, m := range msgs {
			queue = append(queue, flight{from: from, to: m.To, data: m.Data})
		}
	}
	for round := 0; round < 200; round++ {
		progress := false
		for _, n := range nodes {
			for n.CanTrain() {
				if err := n.Train(); err != nil {
					t.Fatal(err)
				}
				send(n.ID(), n.Ready().Messages)
				progress = true
			}
		}
		for len(queue) > 0 {
			f := queue[0]
			queue = queue[1:]
			if cut(f.from, f.to) {
				continue
			}
			for _, n := range nodes {
				if n.ID() == f.to {
					n.Receive(f.from, f.data)
					send(n.ID(), n.Ready().Messages)
				}
			}
			progress = true
		}
		done := true
		for _, n := range nodes {
			done = done && n.Done()
		}
		if done {
			for _, n := range nodes[1:] {
				if d := maxAbsDiff(n.View(), nodes[0].View()); d > 1e-12 {
					t.Fatalf("%s's view differs by %g", n.ID(), d)
				}
			}
			return
		}
		if !progress {
			for _, n := range nodes {
				send(n.ID(), n.SyncRequest())
			}
		}
	}
	t.Fatalf("stuck: a at %d, b at %d, c at %d", nodes[0].Clock(), nodes[1].Clock(), nodes[2].Clock())
}

// wireBytes is the size of the updates of the envelopes msgs carry.
func wireBytes(t *testing.T, msgs []Message) (total int, ups []Update) {
	t.Helper()
	for _, m := range msgs {
		got, err := DecodeEnvelope(m.Data)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range got {
			total += updateWireBytes(u)
		}
		ups = append(ups, got...)
	}
	return total, ups
}

// Issue 14, defect 6 (b): a 21-byte request asking for everything used to
// be answered with every retained frame, and each further request before
// one Ready added as much again to one envelope. The answers queued for a
// requester between two Ready calls now hold at most MaxReplyBytes of
// updates, filled as far as the next update allows; further requests of
// the round are dropped and counted, and the next round has a new budget.
func TestSyncAnswerBudgetPerRound(t *testing.T) {
	const budget = 64 << 10
	a, ids, req := askedForAll(t, budget)
	if len(req) != 22+len(ids[0]) {
		t.Fatalf("the request takes %d bytes, want %d", len(req), 22+len(ids[0]))
	}
	for round := range 2 {
		for range 6 {
			a.Receive(ids[1], req)
		}
		total, ups := wireBytes(t, a.Ready().Messages)
		own := a.logOf(a.memberSlot(ids[0]))
		if len(ups) == 0 || len(ups) >= len(own) {
			t.Fatalf("round %d: answered %d of %d retained updates", round, len(ups), len(own))
		}
		next := Update{Origin: ids[0], Clock: own[len(ups)].clock, Frame: own[len(ups)].frame}
		if total > budget || total+updateWireBytes(next) <= budget {
			t.Fatalf("round %d: answered %d bytes of updates; want at most %d, and the next update (%d bytes) past it",
				round, total, budget, updateWireBytes(next))
		}
		if got := clocksOf(ups); got[0] != 1 || got[len(got)-1] != uint64(len(got)) {
			t.Fatalf("round %d: answered clocks %d..%d, want 1..%d", round, got[0], got[len(got)-1], len(got))
		}
		if got := a.Stats().Rejected[RejectSyncBudget]; got != uint64(5*(round+1)) {
			t.Fatalf("round %d: %d requests dropped for the budget, want %d", round, got, 5*(round+1))
		}
		a.Tick() // the budget is per tick
	}
}

// askedForAll returns a node a that has kept 200 of its own updates with
// an answer budget of budget bytes, the ids of a and its peer, and a
// request of the peer's for all of a's updates.
func askedForAll(t *testing.T, budget int) (*Node, []string, []byte) {
	t.Helper()
	nodes, ids := newNodes(t, 2, 1, 300, SyncConfig{MaxReplyBytes: budget})
	a := nodes[0]
	pn := newPartitionNet(t, nodes)
	for range 200 {
		pn.round()
	}
	a.Ready()
	return a, ids, EncodeSync(SyncMessage{Upto: ^uint64(0), Have: []SyncEntry{{Origin: ids[0], Clock: 0}}})
}

// With a reply rate, the budget is a burst paid back at the rate: once a
// requester has been answered its MaxReplyBytes, the answers of the next
// ticks, however often it asks, hold no more than the rate has paid back
// (on a slow link what it pulled is still on its way). Without a rate the
// whole budget renews every tick; with a slow one, the burst shrinks to
// what the link carries in a suspicion timeout.
func TestSyncAnswersPaidBackAtTheReplyRate(t *testing.T) {
	const budget, rate, ticks = 64 << 10, 4 << 10, 8
	a, ids, req := askedForAll(t, budget)
	a.SetReplyRate(rate)
	a.Receive(ids[1], req)
	if total, _ := wireBytes(t, a.Ready().Messages); total == 0 || total > budget {
		t.Fatalf("first answer: %d bytes, want some, at most %d", total, budget)
	}
	paced := 0
	for range ticks {
		a.Tick()
		for range 3 {
			a.Receive(ids[1], req)
		}
		total, _ := wireBytes(t, a.Ready().Messages)
		paced += total
	}
	if paced == 0 || paced > ticks*rate {
		t.Fatalf("answered %d bytes in %d ticks at %d a tick, want some and at most %d", paced, ticks, rate, ticks*rate)
	}
	a.SetReplyRate(0)
	a.Tick()
	a.Receive(ids[1], req)
	if total, _ := wireBytes(t, a.Ready().Messages); total <= ticks*rate {
		t.Fatalf("answered %d bytes in the tick after the rate was lifted, want more than %d", total, ticks*rate)
	}
	// On a slow link the burst is what it carries in a suspicion timeout.
	const slow = 100 // bytes a tick: 5,000 in the 50 ticks of a suspicion timeout
	a.Tick()
	a.SetReplyRate(slow)
	a.Receive(ids[1], req)
	total, ups := wireBytes(t, a.Ready().Messages)
	if burst := slow * a.sc.SuspectTicks; total == 0 || total > burst && len(ups) > 1 {
		t.Fatalf("answered %d bytes in %d updates at %d bytes a tick, want some and at most %d (or one update)", total, len(ups), slow, burst)
	}
}

// Issue 14, defect 6 (a): the clock a request asks up to is clamped to what
// the answering node can hold of the origin and to History clocks above
// the requester's entry, whatever the request says.
func TestSyncLimitClamped(t *testing.T) {
	nodes, ids := newNodes(t, 2, 2, 100, SyncConfig{History: 16})
	a := nodes[0]
	pn := newPartitionNet(t, nodes)
	for range 40 {
		pn.round()
	}
	if a.Clock() != 40 {
		t.Fatalf("a at clock %d, want 40", a.Clock())
	}
	for _, c := range []struct {
		e          SyncEntry
		upto, want uint64
	}{
		{SyncEntry{ids[0], 30}, ^uint64(0), 40},     // a's own: up to its clock
		{SyncEntry{ids[1], 30}, ^uint64(0), 40 + 3}, // b's: up to what a accepts, clock + s + 1
		{SyncEntry{ids[1], 0}, ^uint64(0), 16},      // History clocks above the entry
		{SyncEntry{ids[0], 0}, 5, 5},                // a smaller ask stands
		{SyncEntry{ids[1], ^uint64(0) - 3}, ^uint64(0), 43},
	} {
		if got := a.syncLimit(c.e, c.upto); got != c.want {
			t.Errorf("entry %v up to %d: limit %d, want %d", c.e, c.upto, got, c.want)
		}
	}
}

// Issue 14, defect 6 (c): Ready never hands the driver an envelope over
// MaxEnvelopeBytes, which every receiver would drop: 66 MiB of answers to
// one peer go in two envelopes, in order.
func TestReadySplitsAtEnvelopeLimit(t *testing.T) {
	nodes, ids := newNodes(t, 3, 4, 10, SyncConfig{MaxReplyBytes: 128 << 20})
	a := nodes[0]
	a.PeerDown(ids[1]) // while b is down, a keeps all of b's frames it has
	const frame = 22 << 20
	for c := uint64(1); c <= 3; c++ {
		a.retain(ids[1], a.keep(Update{Origin: ids[1], Clock: c, Frame: bytes.Repeat([]byte{byte(c)}, frame)}))
	}
	a.Receive(ids[2], EncodeSync(SyncMessage{Upto: 3, Have: []SyncEntry{{Origin: ids[1], Clock: 0}}}))
	msgs := a.Ready().Messages
	var clocks []uint64
	for _, m := range msgs {
		if m.To != ids[2] || len(m.Data) > MaxEnvelopeBytes {
			t.Fatalf("a message of %d bytes to %s, want at most %d to %s", len(m.Data), m.To, MaxEnvelopeBytes, ids[2])
		}
		ups, err := DecodeEnvelope(m.Data)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range ups {
			if len(u.Frame) != frame || u.Frame[0] != byte(u.Clock) {
				t.Fatalf("update %d arrived with a frame of %d bytes", u.Clock, len(u.Frame))
			}
		}
		clocks = append(clocks, clocksOf(ups)...)
	}
	if len(msgs) != 2 || !slices.Equal(clocks, []uint64{1, 2, 3}) {
		t.Fatalf("%d envelopes holding clocks %v, want 2 holding 1..3", len(msgs), clocks)
	}
}
