package testnet

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/sketchmesh/sketchmesh/dataset"
	"github.com/sketchmesh/sketchmesh/netmodel"

	"github.com/sketchmesh/sketchmesh/liveview"
	"github.com/sketchmesh/sketchmesh/model"
)

// The live view of a testnet holds every node, read from its own core, and
// ends with exactly what the report says; it is read while the nodes train
// (the race detector checks that reading never touches a core).
func TestLiveViewOfATestnet(t *testing.T) {
	train, test := builtin(t, "rcv1")
	live := NewLiveView()
	if st := live.LiveState(); len(st.Members) != 0 || st.Done {
		t.Fatalf("before a run: %d members, done %v", len(st.Members), st.Done)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	polls := 0
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			if _, err := liveview.Encode(live.LiveState()); err != nil {
				t.Error(err)
				return
			}
			polls++
		}
	}()
	const nodes, iterations = 4, 30
	rep := run(t, Config{
		Nodes: nodes, Train: train, Test: test, Training: netmodel.Training{
			Model: model.LogisticRegression, Optimizer: model.Adam, LR: 0.02, L2: 1e-4,
			Batch: 0.1, Iterations: iterations, Seed: 1, Codec: "sketchml", Staleness: 1,
		},
		EvalEvery: 10, Live: live,
	})
	cancel()
	wg.Wait()
	if polls == 0 {
		t.Fatal("the view was never read during the run")
	}
	st := live.LiveState()
	if !st.Done || st.Mode != "testnet" || st.Iterations != iterations || st.Staleness != 1 {
		t.Fatalf("done %v, mode %q, iterations %d, staleness %d", st.Done, st.Mode, st.Iterations, st.Staleness)
	}
	if len(st.Members) != nodes {
		t.Fatalf("%d members, want %d", len(st.Members), nodes)
	}
	for i, m := range st.Members {
		n := rep.PerNode[i]
		// Members leave when their run is done; the last to go may leave
		// before the others hear of it.
		ended := m.State == liveview.StateLive || m.State == liveview.StateLeft
		if m.ID != n.ID || !ended || !m.Observed || m.Clock != iterations {
			t.Errorf("member %d: %+v", i, m)
		}
		if m.BytesSent != n.BytesSent || m.BytesSent == 0 || m.BlockedSeconds != n.BlockedSeconds {
			t.Errorf("member %d: sent %d blocked %v; the report says %d and %v", i, m.BytesSent, m.BlockedSeconds, n.BytesSent, n.BlockedSeconds)
		}
		if m.CompressionRatio <= 1 || m.StalenessMax > 1 || len(m.WaitingFor) != 0 {
			t.Errorf("member %d: ratio %v, staleness max %d, waiting for %v", i, m.CompressionRatio, m.StalenessMax, m.WaitingFor)
		}
	}
	// Every node holds every update at the end: each row of the matrix
	// reads the last clock everywhere.
	if len(st.VectorClock.Rows) != nodes || len(st.VectorClock.Origins) != nodes {
		t.Fatalf("vector clock %d×%d, want %d×%d", len(st.VectorClock.Rows), len(st.VectorClock.Origins), nodes, nodes)
	}
	for _, row := range st.VectorClock.Rows {
		for j, c := range row.Clocks {
			if c != iterations {
				t.Errorf("%s holds %s up to %d, want %d", row.Holder, st.VectorClock.Origins[j], c, iterations)
			}
		}
	}
	// Links: the overlay's, each direct, and their bytes account for what the
	// nodes sent.
	var sent uint64
	ids := make([]string, nodes)
	for i, n := range rep.PerNode {
		ids[i] = n.ID
	}
	want := 0
	for _, id := range ids {
		want += len(newRouter("halton", ids).Linked(id))
	}
	if len(st.Links) != want {
		t.Errorf("%d links, the overlay has %d", len(st.Links), want)
	}
	for _, l := range st.Links {
		if l.Path != liveview.PathDirect || l.BytesSent == 0 {
			t.Errorf("link %s → %s: path %q, %d bytes", l.From, l.To, l.Path, l.BytesSent)
		}
		sent += l.BytesSent
	}
	// Every update crossed an overlay link; of the membership messages,
	// the leave notices at the end also went to members off the overlay.
	if total := rep.BytesSentTotal + rep.MembershipBytesTotal; sent < rep.BytesSentTotal || sent > total {
		t.Errorf("links carried %d bytes, the nodes sent %d of updates and %d in all", sent, rep.BytesSentTotal, total)
	}
	if len(st.Curve) != len(rep.Curve) {
		t.Fatalf("curve of %d points, the report's has %d", len(st.Curve), len(rep.Curve))
	}
	for i, p := range st.Curve {
		r := rep.Curve[i]
		if p.Iteration != r.Iteration || p.TestLoss != r.TestLoss || p.BytesSent != r.BytesSent || p.TestAUC == nil || *p.TestAUC != *r.TestAUC {
			t.Errorf("curve point %d: %+v, the report's %+v", i, p, r)
		}
	}
}

// What one update of the live view costs the server at 64 nodes: the state
// assembled from every node's copy and the hosts' per-peer counters, and
// encoded (the server does both at most twice a second). The run itself is
// setup.
func BenchmarkLiveView64(b *testing.B) {
	train, test, err := dataset.Builtin("rcv1")
	if err != nil {
		b.Fatal(err)
	}
	live := NewLiveView()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, err := Run(ctx, Config{
		Nodes: 64, Train: train, Test: test, Training: netmodel.Training{
			Model: model.LogisticRegression, Optimizer: model.Adam, LR: 0.02, L2: 1e-4,
			Batch: 0.1, Iterations: 20, Seed: 1, Codec: "sketchml", Staleness: 2,
		}, Live: live,
	}); err != nil {
		b.Fatal(err)
	}
	// Read the hosts' counters as during the run.
	live.done = false
	var size int
	for b.Loop() {
		data, err := liveview.Encode(live.LiveState())
		if err != nil {
			b.Fatal(err)
		}
		size = len(data)
	}
	b.ReportMetric(float64(size), "bytes/state")
}

func TestStateOfMemberIsTheMostHeld(t *testing.T) {
	for _, tc := range []struct {
		votes map[string]int
		want  string
	}{
		{nil, liveview.StateLive},
		{map[string]int{liveview.StateLive: 62, liveview.StateDead: 1}, liveview.StateLive},
		{map[string]int{liveview.StateLive: 2, liveview.StateSuspected: 2}, liveview.StateSuspected},
		{map[string]int{liveview.StateSuspected: 3, liveview.StateDead: 5, liveview.StateLive: 1}, liveview.StateDead},
		{map[string]int{liveview.StateLeft: 1}, liveview.StateLeft},
	} {
		if got := stateOf(tc.votes, liveview.StateLive); got != tc.want {
			t.Errorf("stateOf(%v) = %s, want %s", tc.votes, got, tc.want)
		}
	}
}
