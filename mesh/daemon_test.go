package mesh

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/sketchmesh/sketchmesh/dataset"
	"github.com/sketchmesh/sketchmesh/liveview"
	"github.com/sketchmesh/sketchmesh/node"
)

func daemonSettings(train *dataset.Dataset) node.Settings {
	return node.Settings{Model: "lr", MaxFeature: train.MaxFeature, Optimizer: "sgd", LearningRate: 0.5,
		Staleness: 1, Codec: "raw", Factors: node.FactorsOff, Iterations: 30}
}

// startDaemon starts a host and a daemon for member incarnation 1, as a
// founder (reply nil) or from a join reply.
func startDaemon(t *testing.T, ctx context.Context, set node.Settings, shard []dataset.Row, reply *JoinReply, h *Host) *Daemon {
	t.Helper()
	return startDaemonWith(t, ctx, set, shard, reply, h, 3, 0)
}

// startDaemonWith is startDaemon for a mesh of minMembers, with iterations
// padded to minIteration.
func startDaemonWith(t *testing.T, ctx context.Context, set node.Settings, shard []dataset.Row, reply *JoinReply, h *Host, minMembers int, minIteration time.Duration) *Daemon {
	t.Helper()
	return startDaemonTweaked(t, ctx, set, shard, reply, h, func(c *DaemonConfig) { c.MinMembers, c.MinIteration = minMembers, minIteration })
}

// startDaemonTweaked is startDaemon for a mesh of three with the daemon's
// configuration changed by tweak.
func startDaemonTweaked(t *testing.T, ctx context.Context, set node.Settings, shard []dataset.Row, reply *JoinReply, h *Host, tweak func(*DaemonConfig)) *Daemon {
	t.Helper()
	id := MemberID(h.h.ID(), 1)
	var peers []PeerRecord
	if reply != nil {
		peers = reply.Members
	}
	n, err := NewCore(set, node.Config{ID: id, BatchSize: 10, Seed: 1, Shard: shard}, Start{Reply: reply})
	if err != nil {
		t.Fatal(err)
	}
	cfg := DaemonConfig{Mesh: "test", Host: h, Node: n, Settings: set, Peers: peers,
		MinMembers: 3, Heartbeat: 100 * time.Millisecond, DeadAfter: 2 * time.Second}
	tweak(&cfg)
	a, err := NewDaemon(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// Three real libp2p nodes form one mesh through one member's address,
// train together and end holding the same updates, each applied once; a
// joiner with a conflicting explicit setting is refused with its name.
func TestDaemonsJoinTrainAndAgree(t *testing.T) {
	train, test, err := dataset.Builtin("rcv1")
	if err != nil {
		t.Fatal(err)
	}
	set := daemonSettings(train)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	hosts := []*Host{newTestHost(t), newTestHost(t), newTestHost(t)}
	founder := startDaemon(t, ctx, set, train.Shard(0, 3).Rows, nil, hosts[0])
	// The founder keeps a live view, evaluating every 10 iterations.
	board := NewLiveBoard()
	founder.cfg.LiveView, founder.cfg.Test, founder.cfg.EvalEvery = board, test.Rows, 10
	seed := hosts[0].Addrs()[0]

	daemons := []*Daemon{founder}
	results := make(chan Result, 3)
	errs := make(chan error, 3)
	run := func(a *Daemon) {
		r, err := a.Run(ctx)
		results <- r
		errs <- err
	}
	go run(founder)
	bad := set
	bad.Staleness = 4
	rogue := newTestHost(t)
	_, err = Join(ctx, rogue, seed, JoinRequest{Mesh: "test", Member: MemberID(rogue.h.ID(), 1), Settings: bad, Explicit: []string{node.SettingStaleness}}, nil)
	if !errors.Is(err, ErrRefused) {
		t.Fatalf("conflicting joiner: err = %v, want a refusal", err)
	}

	// Both joiners ask at once: the founder admits them one after the
	// other, and they end in one mesh.
	replies := make([]*JoinReply, len(hosts))
	joinErrs := make(chan error, len(hosts))
	for i, h := range hosts[1:] {
		go func() {
			var err error
			replies[i+1], err = Join(ctx, h, seed, JoinRequest{Mesh: "test", Member: MemberID(h.h.ID(), 1), Settings: set}, nil)
			joinErrs <- err
		}()
	}
	for range hosts[1:] {
		if err := <-joinErrs; err != nil {
			t.Fatal(err)
		}
	}
	for i, h := range hosts[1:] {
		a := startDaemon(t, ctx, replies[i+1].Settings, train.Shard(i+1, 3).Rows, replies[i+1], h)
		daemons = append(daemons, a)
		go run(a)
	}
	var held []uint64
	for _, r := range awaitDaemons(t, len(daemons), results, errs, set.Iterations) {
		held = append(held, r.Held)
		// Members that finish first leave with notice, so count members
		// ever admitted: one mesh of three, never two.
		if r.Members != 3 {
			t.Errorf("%s knew %d members, want 3", r.Member, r.Members)
		}
	}
	for _, h := range held[1:] {
		if h != held[0] {
			t.Errorf("nodes hold %v updates; want the same everywhere", held)
		}
	}
	checkLiveBoard(t, board.LiveState(), founder.self, set.Iterations)
}

// awaitDaemons waits for n daemons' runs, fails on an error, checks that
// each ended at the run's last clock with nothing applied twice, and
// returns their results.
func awaitDaemons(t *testing.T, n int, results <-chan Result, errs <-chan error, iterations uint64) []Result {
	t.Helper()
	var out []Result
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
		r := <-results
		if r.AppliedTwice != 0 || r.Clock != iterations {
			t.Errorf("%s: clock %d, applied twice %d", r.Member, r.Clock, r.AppliedTwice)
		}
		out = append(out, r)
	}
	return out
}

// checkLiveBoard checks the founder's live view at the end of a run of
// three members: itself observed at its last clock, the others announced,
// live or gone with notice, its links to them direct and carrying bytes,
// and its curve at every evaluation.
func checkLiveBoard(t *testing.T, st liveview.State, self string, iterations uint64) {
	t.Helper()
	if st.Mode != "run" || st.Self != self || st.Iterations != iterations || len(st.Members) != 3 {
		t.Fatalf("live view: mode %q, self %q, iterations %d, %d members", st.Mode, st.Self, st.Iterations, len(st.Members))
	}
	for _, m := range st.Members {
		if m.ID == self {
			if !m.Observed || m.Clock != iterations || m.State != liveview.StateLive || m.BytesSent == 0 || m.Incarnation != 1 {
				t.Errorf("self in the live view: %+v", m)
			}
			continue
		}
		// A member that left may have closed its connections.
		path := m.Path == liveview.PathDirect || (m.State == liveview.StateLeft && m.Path == "")
		// The clock is what the member announced: its last, in its leave
		// notice; in its hellos, at most that.
		clock := m.Clock <= iterations && (m.State != liveview.StateLeft || m.Clock == iterations)
		if m.Observed || (m.State != liveview.StateLive && m.State != liveview.StateLeft) || !clock || !path {
			t.Errorf("member %s in the live view: %+v", m.ID, m)
		}
	}
	own := 0
	for _, l := range st.Links {
		if l.From == self {
			own++
			if l.Path != liveview.PathDirect || l.BytesSent == 0 || l.BytesReceived == 0 {
				t.Errorf("link %s → %s: %+v", l.From, l.To, l)
			}
		}
	}
	if own == 0 {
		t.Error("no link of the founder's in the live view")
	}
	if r := st.VectorClock.Rows; len(r) != 1 || r[0].Holder != self || len(r[0].Clocks) != 3 {
		t.Fatalf("vector clock rows %+v", r)
	}
	if len(st.Curve) != int(iterations/10)+1 || st.Curve[len(st.Curve)-1].Iteration != iterations {
		t.Errorf("curve %+v, want a point every 10 iterations and one at the end", st.Curve)
	}
}

// The metrics a running node exposes carry the names operators rely on.
func TestMetricsNames(t *testing.T) {
	train, test, err := dataset.Builtin("a9a")
	if err != nil {
		t.Fatal(err)
	}
	set := daemonSettings(train)
	set.Iterations = 5
	h := newTestHost(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	a := startDaemon(t, ctx, set, train.Rows[:200], nil, h)
	a.cfg.MinMembers = 1
	a.cfg.Metrics = NewMetrics()
	a.cfg.Test = test.Rows[:100]
	if _, err := a.Run(ctx); err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	a.cfg.Metrics.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	for _, want := range []string{"sketchmesh_clock 5", "sketchmesh_staleness", "sketchmesh_blocked_seconds_total",
		`sketchmesh_bytes_total{direction="sent"}`, `sketchmesh_frames_total{kind="own"} 5`, "sketchmesh_compression_ratio",
		"sketchmesh_peers", `sketchmesh_members{state="live"} 1`, `sketchmesh_members_by_state{state="live"} 1`, `sketchmesh_members_by_state{state="suspected"} 0`, "sketchmesh_test_accuracy", "sketchmesh_test_loss",
		"sketchmesh_alone_seconds", `sketchmesh_sends_lost_total{cause="dropped"} 0`} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

// An exchange is due an evaluation or a checkpoint when its steps pass a
// multiple of the interval: with H local steps the clock stays put for H
// steps, and each step took one before.
func TestCrossedCountsSteps(t *testing.T) {
	for _, tc := range []struct {
		from, to, every uint64
		want            bool
	}{
		{0, 8, 10, false},
		{8, 16, 10, true}, // passes 10
		{16, 24, 10, true},
		{20, 28, 10, false},
		{9, 10, 10, true}, // one step an exchange: at each multiple
		{10, 11, 10, false},
		{0, 64, 5, true}, // several multiples at once: one
		{0, 100, 0, false},
	} {
		if got := crossed(tc.from, tc.to, tc.every); got != tc.want {
			t.Errorf("crossed(%d, %d, %d) = %v, want %v", tc.from, tc.to, tc.every, got, tc.want)
		}
	}
}

// ratedHost is a host whose links measure rate bytes a second
// (Host.LinkRate), as a slow WAN link would once it backs up.
type ratedHost struct {
	*Host
	rate float64
}

func (r ratedHost) LinkRate(peer.ID) float64 { return r.rate }

// With BudgetFromLinks a daemon cuts its frames to what its measured links
// carry in an exchange (node.AutoBudget), and one whose links never backed
// up takes no budget; receivers apply what was sent, so both end holding
// the same updates.
func TestBudgetFollowsTheMeasuredLinks(t *testing.T) {
	train, _, err := dataset.Builtin("rcv1")
	if err != nil {
		t.Fatal(err)
	}
	set := daemonSettings(train)
	set.Codec, set.ErrorFeedback, set.Iterations = "sketchml", true, 40
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	hosts := []*Host{newTestHost(t), newTestHost(t)}
	slow := func(c *DaemonConfig) {
		c.MinMembers, c.BudgetFromLinks = 2, true
		c.Transport = ratedHost{c.Host, 20_000} // 20 kB/s
	}
	founder := startDaemonTweaked(t, ctx, set, train.Shard(0, 2).Rows, nil, hosts[0], slow)
	results, errs := make(chan Result, 2), make(chan error, 2)
	run := func(a *Daemon) {
		r, err := a.Run(ctx)
		results <- r
		errs <- err
	}
	go run(founder)
	reply, err := Join(ctx, hosts[1], hosts[0].Addrs()[0], JoinRequest{Mesh: "test", Member: MemberID(hosts[1].h.ID(), 1), Settings: set}, nil)
	if err != nil {
		t.Fatal(err)
	}
	joiner := startDaemonTweaked(t, ctx, reply.Settings, train.Shard(1, 2).Rows, reply, hosts[1], func(c *DaemonConfig) {
		c.MinMembers, c.BudgetFromLinks = 2, true
	})
	go run(joiner)
	if got := awaitDaemons(t, 2, results, errs, set.Iterations); got[0].Held != got[1].Held {
		t.Errorf("the nodes hold %d and %d updates", got[0].Held, got[1].Held)
	}
	least := founder.n.LeastBudget()
	if b, cuts := founder.n.Budget(), founder.n.Stats().BudgetCuts; b < least || b > 20_000 || cuts == 0 {
		t.Errorf("founder on 20 kB/s links: budget %d bytes (want one frame, %d, to a second's worth), %d frames cut", b, least, cuts)
	}
	if b := joiner.n.Budget(); b != 0 {
		t.Errorf("joiner on loopback links that never backed up: budget %d, want none", b)
	}
}
