package mesh

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/sketchmesh/sketchmesh/dataset"
	"github.com/sketchmesh/sketchmesh/node"
	"github.com/sketchmesh/sketchmesh/wire"
	"github.com/sketchmesh/sketchmesh/wire/wiretest"
)

func testJoinPlan() JoinPlan {
	return JoinPlan{Clock: 21, Members: []PeerRecord{
		{Member: MemberID(fixedPeer(1), 0), Addrs: []string{"/ip4/127.0.0.1/tcp/4001"}},
		{Member: fixedPeer(2).String(), Addrs: []string{}},
	}}
}

func testRowsWitness() node.RowsWitness {
	return node.RowsWitness{Clock: 7, Sum: [32]byte{1, 2, 3, 31: 9}, Held: [32]byte{4, 31: 5}, Projections: []float64{1, -2, 3.5, 0, 1e-300, -7, 8, 9}}
}

func TestJoinPlanAndRowsRoundTrip(t *testing.T) {
	p := testJoinPlan()
	got, err := decodeJoinPlan(encodeJoinPlan(p))
	if err != nil || !reflect.DeepEqual(got, p) {
		t.Fatalf("plan read as %+v, %v; want %+v", got, err, p)
	}
	if _, err := decodeJoinPlan(encodeJoinReply(nil, "busy")); !errors.Is(err, ErrRefused) || errors.Is(err, wire.ErrMalformed) {
		t.Fatalf("a refusal in place of a plan: %v", err)
	}
	q := RowsRequest{Mesh: "mesh-a", Clock: 1 << 40, Seed: 1<<64 - 1}
	gq, err := decodeRowsRequest(encodeRowsRequest(q))
	if err != nil || gq != q || requestKind(encodeRowsRequest(q)) != "rows" || requestKind(encodeJoinRequest(testJoinRequest())) != "join" {
		t.Fatalf("rows request read as %+v, %v", gq, err)
	}
	w := testRowsWitness()
	got2, err := decodeRowsReply(encodeRowsReply(w))
	if err != nil || !reflect.DeepEqual(got2, w) {
		t.Fatalf("rows reply read as %+v, %v; want %+v", got2, err, w)
	}
	if _, err := decodeRowsReply(encodeJoinReply(nil, "rows past clock 7")); !errors.Is(err, ErrRefused) {
		t.Fatalf("a refused rows request: %v", err)
	}
}

func TestJoinPlanAndRowsWrongFields(t *testing.T) {
	plan := []wiretest.Part{
		partOf("join plan", func(w *wire.Writer) { w.Array(4) }),
		partOf("version", func(w *wire.Writer) { w.Uint(joinVersion) }),
		partOf("kind", func(w *wire.Writer) { w.String("plan") }),
		partOf("plan clock", func(w *wire.Writer) { w.Uint(21) }),
		partOf("members", func(w *wire.Writer) { writeMembers(w, testJoinPlan().Members) }),
	}
	if !bytes.Equal(wiretest.Join(plan), encodeJoinPlan(testJoinPlan())) {
		t.Fatal("the plan's parts do not add up to its encoding")
	}
	ms := append(wiretest.WrongParts(plan), []wiretest.Mutant{
		{Name: "five fields", Want: "join plan has 5 fields, want 3 or 4", Data: wiretest.Replaced(plan, 0, []byte{0x95})},
		{Name: "version 2", Want: "version 2, want 3", Data: set(plan, "version", func(w *wire.Writer) { w.Uint(2) })},
		{Name: "kind welcome", Want: `kind "welcome", want "plan"`, Data: set(plan, "kind", func(w *wire.Writer) { w.String("welcome") })},
		{Name: "member not a peer id", Want: `member id "node-01"`, Data: set(plan, "members", func(w *wire.Writer) {
			writeMembers(w, []PeerRecord{{Member: "node-01"}})
		})},
		{Name: "trailing byte", Want: "1 trailing bytes", Data: append(encodeJoinPlan(testJoinPlan()), 0)},
	}...)
	wiretest.CheckRefused(t, ms, wire.ErrMalformed, func(data []byte) error { _, err := decodeJoinPlan(data); return err })

	rw := testRowsWitness()
	rows := []wiretest.Part{
		partOf("rows reply", func(w *wire.Writer) { w.Array(6) }),
		partOf("version", func(w *wire.Writer) { w.Uint(joinVersion) }),
		partOf("kind", func(w *wire.Writer) { w.String("rows") }),
		partOf("rows clock", func(w *wire.Writer) { w.Uint(rw.Clock) }),
		partOf("rows digest", func(w *wire.Writer) { w.Bin(rw.Sum[:]) }),
		partOf("held digest", func(w *wire.Writer) { w.Bin(rw.Held[:]) }),
		partOf("projections", func(w *wire.Writer) { w.Floats(rw.Projections) }),
	}
	if !bytes.Equal(wiretest.Join(rows), encodeRowsReply(rw)) {
		t.Fatal("the rows reply's parts do not add up to its encoding")
	}
	ms = append(wiretest.WrongParts(rows), []wiretest.Mutant{
		{Name: "four fields", Want: "rows reply has 4 fields, want 3 or 6", Data: wiretest.Replaced(rows, 0, []byte{0x94})},
		{Name: "short digest", Want: "rows digest of 31 bytes, want 32", Data: set(rows, "rows digest", func(w *wire.Writer) { w.Bin(make([]byte, 31)) })},
		{Name: "long digest", Want: "rows digest claims 33 bytes", Data: set(rows, "rows digest", func(w *wire.Writer) { w.Bin(make([]byte, 33)) })},
		{Name: "short held digest", Want: "held digest of 0 bytes, want 32", Data: set(rows, "held digest", func(w *wire.Writer) { w.Bin(nil) })},
		{Name: "seven projections", Want: "7 projections, want 8", Data: set(rows, "projections", func(w *wire.Writer) { w.Floats(make([]float64, 7)) })},
		{Name: "nine projections", Want: "projections claims 72 bytes, 72 remain (limit 64)", Data: set(rows, "projections", func(w *wire.Writer) { w.Floats(make([]float64, 9)) })},
		{Name: "kind plan", Want: `kind "plan", want "rows"`, Data: set(rows, "kind", func(w *wire.Writer) { w.String("plan") })},
	}...)
	wiretest.CheckRefused(t, ms, wire.ErrMalformed, func(data []byte) error { _, err := decodeRowsReply(data); return err })

	req := []wiretest.Part{
		partOf("rows request", func(w *wire.Writer) { w.Array(5) }),
		partOf("version", func(w *wire.Writer) { w.Uint(joinVersion) }),
		partOf("kind", func(w *wire.Writer) { w.String("rows") }),
		partOf("mesh", func(w *wire.Writer) { w.String("m") }),
		partOf("rows clock", func(w *wire.Writer) { w.Uint(5) }),
		partOf("seed", func(w *wire.Writer) { w.Uint(6) }),
	}
	ms = append(wiretest.WrongParts(req), []wiretest.Mutant{
		{Name: "long mesh", Want: "mesh claims 257 bytes", Data: set(req, "mesh", func(w *wire.Writer) { w.String(strings.Repeat("m", 257)) })},
		{Name: "kind join", Want: `kind "join", want "rows"`, Data: set(req, "kind", func(w *wire.Writer) { w.String("join") })},
	}...)
	wiretest.CheckRefused(t, ms, wire.ErrMalformed, func(data []byte) error { _, err := decodeRowsRequest(data); return err })
}

// A welcome whose snapshot names a member that is not a peer is malformed:
// the joiner could never declare it dead.
func TestJoinReplySnapshotMemberNotAPeer(t *testing.T) {
	p := testJoinReply()
	p.Snapshot.Members = append(p.Snapshot.Members, node.MemberEntry{ID: "node-07", Live: true, High: 9})
	if _, err := decodeJoinReply(encodeJoinReply(p, "")); !errors.Is(err, wire.ErrMalformed) || !strings.Contains(err.Error(), `snapshot member: member id "node-07"`) {
		t.Fatalf("err = %v, want a malformed snapshot member", err)
	}
}

func FuzzDecodeJoinPlan(f *testing.F) {
	f.Add(encodeJoinPlan(testJoinPlan()))
	f.Add(encodeJoinPlan(JoinPlan{}))
	f.Add(encodeJoinReply(nil, "busy"))
	for _, m := range wiretest.HostileHeaders(encodeJoinPlan(testJoinPlan())) {
		f.Add(m.Data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := wiretest.DecodeOnce(t, len(data), func() (JoinPlan, error) { return decodeJoinPlan(data) })
		if errors.Is(err, ErrRefused) {
			return
		}
		if err != nil {
			if !errors.Is(err, wire.ErrMalformed) {
				t.Fatalf("error %v does not wrap wire.ErrMalformed", err)
			}
			return
		}
		for _, m := range p.Members {
			if err := checkMember(m.Member); err != nil {
				t.Fatalf("member %q accepted: %v", m.Member, err)
			}
		}
		again, err := decodeJoinPlan(encodeJoinPlan(p))
		if err != nil || !reflect.DeepEqual(again, p) {
			t.Fatalf("plan changed in a round trip: %+v, then %+v (%v)", p, again, err)
		}
	})
}

func FuzzDecodeRows(f *testing.F) {
	f.Add(encodeRowsRequest(RowsRequest{Mesh: "m", Clock: 3, Seed: 4}))
	f.Add(encodeRowsReply(testRowsWitness()))
	f.Add(encodeJoinReply(nil, "rows past clock 3"))
	for _, m := range wiretest.HostileHeaders(encodeRowsReply(testRowsWitness())) {
		f.Add(m.Data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		q, err := wiretest.DecodeOnce(t, len(data), func() (RowsRequest, error) { return decodeRowsRequest(data) })
		if err == nil {
			if again, err := decodeRowsRequest(encodeRowsRequest(q)); err != nil || again != q {
				t.Fatalf("rows request changed in a round trip: %+v, then %+v (%v)", q, again, err)
			}
		} else if !errors.Is(err, wire.ErrMalformed) {
			t.Fatalf("error %v does not wrap wire.ErrMalformed", err)
		}
		w, err := decodeRowsReply(data)
		switch {
		case err == nil:
			if len(w.Projections) != node.RowsProjectionCount {
				t.Fatalf("%d projections accepted", len(w.Projections))
			}
			if again, err := decodeRowsReply(encodeRowsReply(w)); err != nil || !reflect.DeepEqual(again, w) {
				t.Fatalf("rows reply changed in a round trip (%v)", err)
			}
		case !errors.Is(err, wire.ErrMalformed) && !errors.Is(err, ErrRefused):
			t.Fatalf("error %v wraps neither wire.ErrMalformed nor ErrRefused", err)
		}
	})
}

// tamperedJoins makes the join protocol on a's host answer through
// change, which sees each message the daemon writes and returns what to
// write instead; with cut set, it writes half of that and closes the host:
// a donor that dies mid-transfer.
func tamperedJoins(a *Daemon, change func([]byte) []byte, cut bool) {
	a.cfg.Host.h.SetStreamHandler(JoinProtocol, func(s network.Stream) {
		a.joins.serveStream(&tamperStream{Stream: s, change: change, cut: cut, host: a.cfg.Host})
	})
}

type tamperStream struct {
	network.Stream
	change func([]byte) []byte
	cut    bool
	host   *Host
	buf    []byte
}

// Write collects whole messages (writeMessage writes the length prefix and
// the body apart) and passes each through change.
func (s *tamperStream) Write(p []byte) (int, error) {
	s.buf = append(s.buf, p...)
	for len(s.buf) >= lengthPrefix {
		n := int(binary.BigEndian.Uint32(s.buf))
		if len(s.buf) < lengthPrefix+n {
			break
		}
		msg := s.change(s.buf[lengthPrefix : lengthPrefix+n])
		s.buf = s.buf[lengthPrefix+n:]
		if msg == nil {
			continue
		}
		var out bytes.Buffer
		_ = writeMessage(&out, msg)
		if s.cut && requestKind(msg) == "welcome" {
			_, _ = s.Stream.Write(out.Bytes()[:out.Len()/2])
			go s.host.Close()
			return 0, io.ErrClosedPipe
		}
		if _, err := s.Stream.Write(out.Bytes()); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// liarChange alters the rows of every welcome: one parameter moved.
func liarChange(msg []byte) []byte {
	p, err := decodeJoinReply(msg)
	if err != nil || p.Snapshot.Clock == 0 {
		return msg
	}
	for i, v := range p.Snapshot.View {
		if v != 0 {
			p.Snapshot.View[i] = v + 0.25
			break
		}
	}
	return encodeJoinReply(p, "")
}

type testMember struct {
	h      *Host
	a      *Daemon
	n      *node.Node
	result Result
	err    error
}

// startMember starts a daemon for a founder (reply nil) or a joiner, its
// iterations paced so that joins land while it trains.
func startMember(t *testing.T, ctx context.Context, h *Host, set node.Settings, shard []dataset.Row, reply *JoinReply) *testMember {
	t.Helper()
	mdl, opt, cdc, err := set.Build()
	if err != nil {
		t.Fatal(err)
	}
	id := MemberID(h.h.ID(), 1)
	cfg := node.Config{ID: id, Members: []string{id}, Model: mdl, Optimizer: opt, Codec: cdc,
		Staleness: set.Staleness, Iterations: set.Iterations, BatchSize: 10, Seed: 1, Shard: shard}
	var peers []PeerRecord
	if reply != nil {
		cfg.ID = reply.Admission.Member
		cfg.Members, cfg.Start, peers = nil, reply.Snapshot, reply.Members
		cfg.Admission = &reply.Admission
	}
	auth, err := NewKeyAuthenticator("test", cfg.ID, h.h.Peerstore().PrivKey(h.h.ID()))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Auth = auth
	n, err := node.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	reply.ReplayPending(n)
	a, err := NewDaemon(ctx, DaemonConfig{Mesh: "test", Host: h, Node: n, Settings: set, Peers: peers,
		MinMembers: 3, Heartbeat: 100 * time.Millisecond, DeadAfter: 1500 * time.Millisecond, MinIteration: 15 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return &testMember{h: h, a: a, n: n}
}

// signerOf signs join requests and notices with h's key.
func signerOf(t *testing.T, h *Host) func([]byte) ([]byte, error) {
	t.Helper()
	auth, err := NewKeyAuthenticator("test", h.ID(), h.h.Peerstore().PrivKey(h.h.ID()))
	if err != nil {
		t.Fatal(err)
	}
	return auth.SignMessage
}

func joinAddr(t *testing.T, h *Host) ma.Multiaddr {
	t.Helper()
	a, err := ma.NewMultiaddr(h.Addrs()[0].String())
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// A joiner whose first donor lies about its rows, or dies while it sends
// them, joins through the second with rows a third member confirmed; every
// member that stays ends with the joiner at one entry, every earlier
// attempt's incarnation out with no update, and none applied twice. After
// a donor died with an update in flight, the members' rows may hold
// different updates at one clock for a while: the joiner may refuse a
// snapshot then, and joins in its second round.
func TestJoinerPassesOverLyingAndDyingDonors(t *testing.T) {
	train, _, err := dataset.Builtin("rcv1")
	if err != nil {
		t.Fatal(err)
	}
	set := daemonSettings(train)
	set.Iterations = 300
	for _, tc := range []struct {
		name   string
		change func([]byte) []byte
		cut    bool
	}{
		{name: "lies", change: liarChange},
		{name: "dies", change: func(m []byte) []byte { return m }, cut: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			hosts := []*Host{newTestHost(t), newTestHost(t), newTestHost(t)}
			members := []*testMember{startMember(t, ctx, hosts[0], set, train.Shard(0, 4).Rows, nil)}
			seed := joinAddr(t, hosts[0])
			var wg sync.WaitGroup
			run := func(m *testMember) {
				wg.Add(1)
				go func() {
					defer wg.Done()
					m.result, m.err = m.a.Run(ctx)
				}()
			}
			run(members[0])
			for i, h := range hosts[1:] {
				reply, err := Join(ctx, h, seed, JoinRequest{Mesh: "test", Member: MemberID(h.h.ID(), 1), Settings: set}, signerOf(t, h))
				if err != nil {
					t.Fatal(err)
				}
				if reply.Snapshot.Clock != 0 || reply.Witness != "" {
					t.Fatalf("a join before training: rows at %d, confirmed by %q; want 0 and nobody", reply.Snapshot.Clock, reply.Witness)
				}
				m := startMember(t, ctx, h, set, train.Shard(i+1, 4).Rows, reply)
				members = append(members, m)
				run(m)
			}
			// The first member the joiner asks is the bad donor.
			bad := members[1]
			tamperedJoins(bad.a, tc.change, tc.cut)
			// The core belongs to its daemon: the host's counters tell
			// that the mesh trains.
			for hosts[0].Traffic().MessagesSent < 30 {
				select {
				case <-ctx.Done():
					t.Fatal("the mesh did not start training")
				case <-time.After(10 * time.Millisecond):
				}
			}
			jh := newTestHost(t)
			reply, refused, err := JoinAny(ctx, jh, []ma.Multiaddr{joinAddr(t, bad.h), joinAddr(t, members[2].h)},
				JoinRequest{Mesh: "test", Member: MemberID(jh.h.ID(), 1), Settings: set}, signerOf(t, jh), 20*time.Second, slog.New(slog.NewTextHandler(io.Discard, nil)))
			if err != nil {
				t.Fatal(err)
			}
			if tc.cut {
				if refused[node.RejectSnapshotUnverified] != 0 || len(refused) > 1 {
					t.Errorf("refused %v; a dead donor's rows are never read, and a live one's confirmed or not", refused)
				}
			} else if refused[node.RejectSnapshotMismatch] != 1 || len(refused) != 1 {
				t.Errorf("refused %v, want the liar's snapshot for its rows", refused)
			}
			second := reply.Admission.Member
			if _, inc, _ := MemberPeer(second); inc < 2 || reply.Snapshot.Clock == 0 || reply.Admission.Signer == bad.n.ID() {
				t.Fatalf("admitted %s at rows %d by %s, want a later incarnation above 0 by another donor", second, reply.Snapshot.Clock, reply.Admission.Signer)
			}
			if reply.Witness == "" {
				t.Fatal("the second donor's rows were not confirmed by anyone")
			}
			joiner := startMember(t, ctx, jh, set, train.Shard(3, 4).Rows, reply)
			run(joiner)
			wg.Wait()
			stay := []*testMember{members[0], members[2], joiner}
			if tc.cut {
				if bad.err != nil {
					t.Logf("the donor that died: %v", bad.err)
				}
			} else {
				stay = append(stay, bad)
			}
			for _, m := range stay {
				if m.err != nil {
					t.Fatalf("%s: %v", m.n.ID(), m.err)
				}
				if m.result.Clock != set.Iterations || m.result.AppliedTwice != 0 {
					t.Errorf("%s: clock %d, applied twice %d", m.n.ID(), m.result.Clock, m.result.AppliedTwice)
				}
				for _, e := range m.n.Rows().Members {
					p, _ := PeerOf(e.ID)
					switch {
					case e.ID == second:
						if e.Entry != reply.Snapshot.Clock {
							t.Errorf("%s holds the joiner at entry %d, it was admitted at %d", m.n.ID(), e.Entry, reply.Snapshot.Clock)
						}
					case p == jh.h.ID():
						if e.High > e.Entry || e.Live {
							t.Errorf("%s holds the first attempt's incarnation live or with updates: %+v", m.n.ID(), e)
						}
						// The joiner told the members that the incarnation
						// whose rows it refused leaves at its entry.
						if !tc.cut && m != bad && (!e.Left || e.Last != e.Entry) {
							t.Errorf("%s holds the refused incarnation as %+v, want it left at its entry", m.n.ID(), e)
						}
					}
				}
			}
		})
	}
}
