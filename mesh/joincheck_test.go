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

func TestJoinPlanAndRowsRoundTrip(t *testing.T) {
	p := testJoinPlan()
	got, err := decodeJoinPlan(encodeJoinPlan(p))
	if err != nil || !reflect.DeepEqual(got, p) {
		t.Fatalf("plan read as %+v, %v; want %+v", got, err, p)
	}
	if _, err := decodeJoinPlan(encodeJoinReply(nil, "busy")); !errors.Is(err, ErrRefused) || errors.Is(err, wire.ErrMalformed) {
		t.Fatalf("a refusal in place of a plan: %v", err)
	}
	q := RowsRequest{Mesh: "mesh-a", Clock: 1 << 40}
	gq, err := decodeRowsRequest(encodeRowsRequest(q))
	if err != nil || gq != q || requestKind(encodeRowsRequest(q)) != "rows" || requestKind(encodeJoinRequest(testJoinRequest())) != "join" {
		t.Fatalf("rows request read as %+v, %v", gq, err)
	}
	sum := [32]byte{1, 2, 3, 31: 9}
	c, gs, err := decodeRowsReply(encodeRowsReply(7, sum))
	if err != nil || c != 7 || gs != sum {
		t.Fatalf("rows reply read as %d %x, %v", c, gs, err)
	}
	if _, _, err := decodeRowsReply(encodeJoinReply(nil, "rows past clock 7")); !errors.Is(err, ErrRefused) {
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

	rows := []wiretest.Part{
		partOf("rows reply", func(w *wire.Writer) { w.Array(4) }),
		partOf("version", func(w *wire.Writer) { w.Uint(joinVersion) }),
		partOf("kind", func(w *wire.Writer) { w.String("rows") }),
		partOf("rows clock", func(w *wire.Writer) { w.Uint(5) }),
		partOf("rows digest", func(w *wire.Writer) { w.Bin(make([]byte, 32)) }),
	}
	ms = append(wiretest.WrongParts(rows), []wiretest.Mutant{
		{Name: "short digest", Want: "rows digest of 31 bytes, want 32", Data: set(rows, "rows digest", func(w *wire.Writer) { w.Bin(make([]byte, 31)) })},
		{Name: "long digest", Want: "rows digest claims 33 bytes", Data: set(rows, "rows digest", func(w *wire.Writer) { w.Bin(make([]byte, 33)) })},
		{Name: "kind plan", Want: `kind "plan", want "rows"`, Data: set(rows, "kind", func(w *wire.Writer) { w.String("plan") })},
	}...)
	wiretest.CheckRefused(t, ms, wire.ErrMalformed, func(data []byte) error { _, _, err := decodeRowsReply(data); return err })

	req := []wiretest.Part{
		partOf("rows request", func(w *wire.Writer) { w.Array(4) }),
		partOf("version", func(w *wire.Writer) { w.Uint(joinVersion) }),
		partOf("kind", func(w *wire.Writer) { w.String("rows") }),
		partOf("mesh", func(w *wire.Writer) { w.String("m") }),
		partOf("rows clock", func(w *wire.Writer) { w.Uint(5) }),
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
	f.Add(encodeRowsRequest(RowsRequest{Mesh: "m", Clock: 3}))
	f.Add(encodeRowsReply(3, [32]byte{4}))
	f.Add(encodeJoinReply(nil, "rows past clock 3"))
	for _, m := range wiretest.HostileHeaders(encodeRowsReply(3, [32]byte{4})) {
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
		c, sum, err := decodeRowsReply(data)
		switch {
		case err == nil:
			if c2, s2, err := decodeRowsReply(encodeRowsReply(c, sum)); err != nil || c2 != c || s2 != sum {
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
	n, err := node.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if reply != nil && len(reply.Snapshot.Pending) > 0 {
		n.Receive(peers[0].Member, node.EncodeEnvelope(reply.Snapshot.Pending))
	}
	a, err := NewDaemon(ctx, DaemonConfig{Mesh: "test", Host: h, Node: n, Settings: set, Peers: peers,
		MinMembers: 3, Heartbeat: 100 * time.Millisecond, DeadAfter: 1500 * time.Millisecond, MinIteration: 15 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return &testMember{h: h, a: a, n: n}
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
// member that stays ends with the joiner at one entry, the first attempt's
// incarnation superseded, the same updates held and none applied twice.
func TestJoinerPassesOverLyingAndDyingDonors(t *testing.T) {
	train, _, err := dataset.Builtin("rcv1")
	if err != nil {
		t.Fatal(err)
	}
	set := daemonSettings(train)
	set.Iterations = 70
	for _, tc := range []struct {
		name    string
		change  func([]byte) []byte
		cut     bool
		refused map[string]uint64
	}{
		{name: "lies", change: liarChange, refused: map[string]uint64{node.RejectSnapshotMismatch: 1}},
		{name: "dies", change: func(m []byte) []byte { return m }, cut: true, refused: map[string]uint64{}},
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
				reply, err := Join(ctx, h, seed, JoinRequest{Mesh: "test", Member: MemberID(h.h.ID(), 1), Settings: set}, nil)
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
			for members[0].n.Clock() < 10 {
				select {
				case <-ctx.Done():
					t.Fatal("the mesh did not start training")
				case <-time.After(10 * time.Millisecond):
				}
			}
			jh := newTestHost(t)
			reply, refused, err := JoinAny(ctx, jh, []ma.Multiaddr{joinAddr(t, bad.h), joinAddr(t, members[2].h)},
				JoinRequest{Mesh: "test", Member: MemberID(jh.h.ID(), 1), Settings: set}, nil, 20*time.Second, slog.New(slog.NewTextHandler(io.Discard, nil)))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(refused, tc.refused) {
				t.Errorf("refused %v, want %v", refused, tc.refused)
			}
			second := MemberID(jh.h.ID(), 2)
			if reply.Admission.Member != second || reply.Snapshot.Clock == 0 {
				t.Fatalf("admitted %s at rows %d, want %s above 0", reply.Admission.Member, reply.Snapshot.Clock, second)
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
			var held []uint64
			for _, m := range stay {
				if m.err != nil {
					t.Fatalf("%s: %v", m.n.ID(), m.err)
				}
				if m.result.Clock != set.Iterations || m.result.AppliedTwice != 0 {
					t.Errorf("%s: clock %d, applied twice %d", m.n.ID(), m.result.Clock, m.result.AppliedTwice)
				}
				held = append(held, m.result.Held)
				for _, e := range m.n.Rows().Members {
					switch e.ID {
					case second:
						if e.Entry != reply.Snapshot.Clock {
							t.Errorf("%s holds the joiner at entry %d, it was admitted at %d", m.n.ID(), e.Entry, reply.Snapshot.Clock)
						}
					case MemberID(jh.h.ID(), 1):
						if e.High > e.Entry {
							t.Errorf("%s holds updates of the first attempt's incarnation: %+v", m.n.ID(), e)
						}
					}
				}
			}
			for _, h := range held[1:] {
				if h != held[0] {
					t.Errorf("members hold %v updates; want the same everywhere", held)
				}
			}
		})
	}
}
