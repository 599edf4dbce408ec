package node

import (
	"slices"
	"testing"

	"github.com/sketchmesh/sketchmesh/model"
)

// partitionNet delivers messages between nodes in FIFO order, except
// across the links it has cut.
type partitionNet struct {
	t     *testing.T
	nodes map[string]*Node
	cut   map[[2]string]bool
	queue []flight
}

func newPartitionNet(t *testing.T, nodes []*Node) *partitionNet {
	pn := &partitionNet{t: t, nodes: map[string]*Node{}, cut: map[[2]string]bool{}}
	for _, n := range nodes {
		pn.nodes[n.ID()] = n
	}
	return pn
}

func (pn *partitionNet) send(from string, msgs []Message) {
	for _, m := range msgs {
		pn.queue = append(pn.queue, flight{from: from, to: m.To, data: m.Data})
	}
}

// split cuts (heal false) or restores (heal true) the links between a and
// b, and tells each side that the other is down or up again.
func (pn *partitionNet) split(a, b string, heal bool) {
	pn.cut[[2]string{a, b}], pn.cut[[2]string{b, a}] = !heal, !heal
	if heal {
		pn.nodes[a].PeerUp(b)
		pn.nodes[b].PeerUp(a)
	} else {
		pn.nodes[a].PeerDown(b)
		pn.nodes[b].PeerDown(a)
	}
}

// round lets every node train while its gate is open, delivers everything
// in flight, and, when nothing moved, has every node ask for what it lacks.
func (pn *partitionNet) round() {
	progress := false
	ids := make([]string, 0, len(pn.nodes))
	for id := range pn.nodes {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		n := pn.nodes[id]
		if n.CanTrain() {
			if err := n.Train(); err != nil {
				pn.t.Fatal(err)
			}
			pn.send(id, n.Ready().Messages)
			progress = true
		}
	}
	for len(pn.queue) > 0 {
		f := pn.queue[0]
		pn.queue = pn.queue[1:]
		to := pn.nodes[f.to]
		if pn.cut[[2]string{f.from, f.to}] || to == nil {
			continue
		}
		to.Receive(f.from, f.data)
		pn.send(f.to, to.Ready().Messages)
		progress = true
	}
	if !progress {
		for _, id := range ids {
			pn.send(id, pn.nodes[id].SyncRequest())
			pn.send(id, pn.nodes[id].AntiEntropy())
		}
	}
}

// ownClocks returns the clocks of the node's own frames it retains.
func ownClocks(s *Node) []uint64 {
	var out []uint64
	for _, r := range s.logOf(s.memberSlot(s.ID())) {
		out = append(out, r.clock)
	}
	return out
}

// Issue 14, defect 4: with sufficient factors (always or auto) Train runs
// the codec two or three times, and a node with no live next hop used to
// retain none of its own frames: after a partition nobody held them and
// the other side stalled for good. The node keeps every frame it makes,
// with its signature, and the other side catches up after the heal.
func TestOwnFramesRetainedWithFactorsWhenAlone(t *testing.T) {
	train := testData(t)
	mdl, err := model.New(model.Config{Kind: model.Softmax, MaxFeature: train.MaxFeature, Classes: []float64{-1, 1}})
	if err != nil {
		t.Fatal(err)
	}
	auth := macAuth{mesh: "m"}
	for _, mode := range []FactorMode{FactorsAlways, FactorsAuto} {
		t.Run(string(mode), func(t *testing.T) {
			nodes, ids := newNodesWith(t, 2, SyncConfig{}, func(c *Config) {
				c.Model, c.Factors, c.Auth = mdl, mode, auth
				c.Optimizer, _ = model.NewOptimizer(model.SGD, 0.5, mdl.NumParams())
				c.Staleness, c.Iterations = 1, 20
			})
			a, b := nodes[0], nodes[1]
			pn := newPartitionNet(t, nodes)
			for range 3 {
				pn.round()
			}
			pn.split(ids[0], ids[1], false)
			for range 5 {
				pn.round()
			}
			if a.Clock() != 8 {
				t.Fatalf("a trained alone to clock %d, want 8", a.Clock())
			}
			if got, want := ownClocks(a), []uint64{1, 2, 3, 4, 5, 6, 7, 8}; !slices.Equal(got, want) {
				t.Fatalf("a retains its own frames of clocks %v, want %v", got, want)
			}
			for _, r := range a.logOf(a.memberSlot(ids[0])) {
				if err := auth.Verify(ids[0], r.clock, r.frame, r.sig); err != nil {
					t.Fatalf("retained frame of clock %d: %v", r.clock, err)
				}
			}
			stalledAt := b.Clock()
			pn.split(ids[0], ids[1], true)
			for range 200 {
				pn.round()
			}
			if !a.Done() || !b.Done() {
				t.Fatalf("after the heal a is at %d, b at %d (b stopped at %d in the split, b's entry for a %d)",
					a.Clock(), b.Clock(), stalledAt, b.VectorClock().Get(ids[0]))
			}
		})
	}
}
