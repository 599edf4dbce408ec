package node

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/sketchmesh/sketchmesh/codec"
	"github.com/sketchmesh/sketchmesh/dataset"
	"github.com/sketchmesh/sketchmesh/model"
)

// cluster runs node cores against an in-memory network that delivers
// messages in an order chosen by a seeded random source.
type cluster struct {
	t       *testing.T
	nodes   map[string]*Node
	ids     []string
	inFlite []flight
	rng     *rand.Rand
	// speed[id] is the chance that a ready node trains when picked, which
	// makes some nodes stragglers.
	speed map[string]float64
}

type flight struct {
	from, to string
	data     []byte
}

func testData(t testing.TB) *dataset.Dataset {
	t.Helper()
	train, _, err := dataset.Builtin("rcv1")
	if err != nil {
		t.Fatal(err)
	}
	return train
}

func newCluster(t *testing.T, p, staleness int, iterations uint64, cdc string, seed uint64) *cluster {
	t.Helper()
	return newClusterWith(t, p, staleness, iterations, cdc, seed, nil)
}

// newClusterWith is newCluster with tweak applied to each node's Config.
func newClusterWith(t *testing.T, p, staleness int, iterations uint64, cdc string, seed uint64, tweak func(*Config)) *cluster {
	t.Helper()
	train := testData(t)
	mdl, err := model.New(model.Config{Kind: model.LogisticRegression, MaxFeature: train.MaxFeature, L2: 1e-4})
	if err != nil {
		t.Fatal(err)
	}
	c, err := codec.ParseSpec(cdc)
	if err != nil {
		t.Fatal(err)
	}
	cl := &cluster{t: t, nodes: map[string]*Node{}, rng: rand.New(rand.NewPCG(seed, 1)), speed: map[string]float64{}}
	for i := 0; i < p; i++ {
		cl.ids = append(cl.ids, fmt.Sprintf("node-%02d", i))
	}
	for i, id := range cl.ids {
		opt, err := model.NewOptimizer(model.Adam, 0.02, mdl.NumParams())
		if err != nil {
			t.Fatal(err)
		}
		nc := Config{
			ID: id, Members: cl.ids, Model: mdl, Optimizer: opt, Codec: c,
			Staleness: staleness, Iterations: iterations, BatchSize: 10, Seed: 3,
			Shard: train.Shard(i, p).Rows,
		}
		if tweak != nil {
			tweak(&nc)
		}
		n, err := New(nc)
		if err != nil {
			t.Fatal(err)
		}
		cl.nodes[id] = n
		cl.speed[id] = 1
	}
	return cl
}

func (cl *cluster) collect(id string) {
	for _, m := range cl.nodes[id].Ready().Messages {
		cl.inFlite = append(cl.inFlite, flight{from: id, to: m.To, data: m.Data})
	}
}

// step performs one random action: deliver a random in-flight message, or
// let a random node train. It reports false when nothing can happen.
func (cl *cluster) step(onTrain func(id string)) bool {
	var trainable []string
	for _, id := range cl.ids {
		if cl.nodes[id].CanTrain() {
			trainable = append(trainable, id)
		}
	}
	if len(trainable) == 0 && len(cl.inFlite) == 0 {
		return false
	}
	if len(cl.inFlite) > 0 && (len(trainable) == 0 || cl.rng.IntN(2) == 0) {
		i := cl.rng.IntN(len(cl.inFlite))
		f := cl.inFlite[i]
		cl.inFlite = slices.Delete(cl.inFlite, i, i+1)
		cl.nodes[f.to].Receive(f.from, f.data)
		cl.collect(f.to)
		return true
	}
	id := trainable[cl.rng.IntN(len(trainable))]
	if cl.rng.Float64() >= cl.speed[id] {
		return true
	}
	if onTrain != nil {
		onTrain(id)
	}
	if err := cl.nodes[id].Train(); err != nil {
		cl.t.Fatal(err)
	}
	cl.collect(id)
	return true
}

func (cl *cluster) runToEnd(onTrain func(id string)) {
	for cl.step(onTrain) {
	}
	for _, id := range cl.ids {
		if !cl.nodes[id].Done() {
			cl.t.Fatalf("%s stuck at clock %d, vector clock %v", id, cl.nodes[id].Clock(), cl.nodes[id].VectorClock().Snapshot())
		}
	}
}

// Under staleness 0 every node holds the same set of updates at every gate,
// so views must be bit-identical whenever two nodes are at the same clock,
// whatever the delivery order.
func TestBulkSynchronousViewsBitIdentical(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		cl := newCluster(t, 4, 0, 20, "raw", seed)
		views := map[uint64][]float64{}
		cl.runToEnd(func(id string) {
			n := cl.nodes[id]
			v := slices.Clone(n.View())
			if first, ok := views[n.Clock()]; ok {
				if !sameFloats(first, v) {
					t.Fatalf("seed %d: %s at clock %d reads a view that differs from another node's", seed, id, n.Clock())
				}
			} else {
				views[n.Clock()] = v
			}
		})
		final := cl.nodes[cl.ids[0]].View()
		for _, id := range cl.ids[1:] {
			if !sameFloats(final, cl.nodes[id].View()) {
				t.Fatalf("seed %d: final view of %s differs from %s", seed, id, cl.ids[0])
			}
		}
		if len(views) != 20 {
			t.Fatalf("seed %d: saw reads at %d clocks, want 20", seed, len(views))
		}
	}
}

// SSP invariants under random delivery order and stragglers: every read is at
// most s stale, live clocks never spread by more than s+1, every update is
// applied exactly once, and all nodes end with the same view.
func TestStaleSynchronousInvariants(t *testing.T) {
	for _, s := range []int{0, 1, 3} {
		for seed := uint64(1); seed <= 8; seed++ {
			cl := newCluster(t, 5, s, 25, "raw", seed)
			cl.speed[cl.ids[seed%5]] = 0.2
			cl.runToEnd(func(id string) {
				n := cl.nodes[id]
				t0 := n.Clock()
				if stale := t0 - min(t0, n.VectorClock().Min(n.Live())); stale > uint64(s) {
					t.Fatalf("s=%d seed %d: %s reads with staleness %d", s, seed, id, stale)
				}
				lo, hi := t0, t0
				for _, m := range cl.nodes {
					lo, hi = min(lo, m.Clock()), max(hi, m.Clock())
				}
				// The node is about to move to t0+1.
				if spread := max(hi, t0+1) - lo; spread > uint64(s)+1 {
					t.Fatalf("s=%d seed %d: clock spread %d", s, seed, spread)
				}
			})
			for _, id := range cl.ids {
				st := cl.nodes[id].Stats()
				if st.UpdatesApplied != 5*25 {
					t.Fatalf("s=%d seed %d: %s applied %d updates, want %d", s, seed, id, st.UpdatesApplied, 5*25)
				}
				if st.Rejected[RejectDuplicate] != 0 || len(st.Rejected) != 0 {
					t.Fatalf("s=%d seed %d: %s rejected %v", s, seed, id, st.Rejected)
				}
				if st.StalenessMax > uint64(s) {
					t.Fatalf("s=%d: %s observed staleness %d", s, id, st.StalenessMax)
				}
			}
			final := cl.nodes[cl.ids[0]].View()
			for _, id := range cl.ids[1:] {
				if !sameFloats(final, cl.nodes[id].View()) {
					t.Fatalf("s=%d seed %d: final views differ", s, seed)
				}
			}
		}
	}
}

func TestGateBlocksUntilPeersCatchUp(t *testing.T) {
	cl := newCluster(t, 2, 1, 10, "raw", 1)
	a, b := cl.nodes[cl.ids[0]], cl.nodes[cl.ids[1]]
	for i := 0; i < 2; i++ {
		if err := a.Train(); err != nil {
			t.Fatalf("iteration %d with s=1: %v", i+1, err)
		}
	}
	if a.CanTrain() {
		t.Fatal("a started iteration 3 with no update from b (s=1 allows clock 2 at most)")
	}
	if err := a.Train(); err != ErrGateClosed {
		t.Fatalf("Train with a closed gate: %v, want ErrGateClosed", err)
	}
	if err := b.Train(); err != nil {
		t.Fatal(err)
	}
	for _, m := range b.Ready().Messages {
		a.Receive(b.ID(), m.Data)
	}
	if !a.CanTrain() {
		t.Fatal("gate still closed after b's update of clock 1 arrived")
	}
}

func TestPeerDownUnblocksGate(t *testing.T) {
	cl := newCluster(t, 3, 0, 5, "raw", 1)
	a := cl.nodes[cl.ids[0]]
	if err := a.Train(); err != nil {
		t.Fatal(err)
	}
	b := cl.nodes[cl.ids[1]]
	if err := b.Train(); err != nil {
		t.Fatal(err)
	}
	for _, m := range b.Ready().Messages {
		if m.To == a.ID() {
			a.Receive(b.ID(), m.Data)
		}
	}
	if a.CanTrain() {
		t.Fatal("gate open without the third member's update")
	}
	a.PeerDown(cl.ids[2])
	if !a.CanTrain() {
		t.Fatal("gate still closed after the missing member went down")
	}
}

// MinLiveEntry is the least entry over Live, by any path the entries and
// the live set change: updates applied, a member down and back.
func TestMinLiveEntryFollowsLiveAndClock(t *testing.T) {
	cl := newCluster(t, 4, 1, 6, "raw", 2)
	check := func(when string) {
		t.Helper()
		for _, id := range cl.ids {
			n := cl.nodes[id]
			want := uint64(math.MaxUint64)
			for _, m := range n.Live() {
				want = min(want, n.VectorClock().Get(m))
			}
			if got := n.MinLiveEntry(); got != want {
				t.Fatalf("%s: %s MinLiveEntry %d, want %d (live %v, clock %v)", when, id, got, want, n.Live(), n.VectorClock().Snapshot())
			}
		}
	}
	check("start")
	a := cl.nodes[cl.ids[0]]
	steps := 0
	for cl.step(nil) {
		if steps++; steps%7 == 0 {
			check(fmt.Sprintf("step %d", steps))
		}
		if steps == 40 {
			a.PeerDown(cl.ids[3])
			check("member down")
		}
	}
	if steps < 40 {
		t.Fatalf("the cluster stopped after %d steps", steps)
	}
	a.PeerDown(cl.ids[1])
	a.PeerDown(cl.ids[2])
	check("all down but itself")
}
