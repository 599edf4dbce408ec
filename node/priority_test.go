package node

import (
	"errors"
	"slices"
	"testing"

	"github.com/sketchmesh/sketchmesh/codec"
)

// budgetNode is a lone node with the raw codec, error feedback and a budget
// of exactly the frame of two pairs.
func budgetNode(t *testing.T, priority PriorityMode) *Node {
	t.Helper()
	cfg := soloConfig(t, testData(t))
	two, err := cfg.Codec.Encode(nil, codec.Sparse{Keys: []uint64{1, 2}, Values: []float32{1, 1}})
	if err != nil {
		t.Fatal(err)
	}
	cfg.ErrorFeedback, cfg.BudgetBytes, cfg.Priority = true, len(two), priority
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// A budget sends the keys of highest priority that fit, in key order:
// the largest |δ| (absolute), the largest |δ|/|w| with a weight still 0
// first (relative), the lowest keys (off); an update that fits is sent
// whole.
func TestBudgetSendsHighestPriority(t *testing.T) {
	u := codec.Sparse{Keys: []uint64{1, 2, 3, 4}, Values: []float32{0.1, -5, 2, 0.01}}
	for _, tc := range []struct {
		priority PriorityMode
		want     []uint64
	}{
		{PriorityAbsolute, []uint64{2, 3}},
		{PriorityRelative, []uint64{1, 4}},
		{PriorityOff, []uint64{1, 2}},
	} {
		n := budgetNode(t, tc.priority)
		// Weights: key 1 is 0, key 4 is small, keys 2 and 3 are large.
		n.committed[2], n.committed[3], n.committed[4] = 100, 100, 0.001
		full, err := n.cfg.Codec.Encode(nil, u)
		if err != nil {
			t.Fatal(err)
		}
		sent, frame, err := n.fitBudget(u, full)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(sent.Keys, tc.want) || len(frame) > n.cfg.BudgetBytes {
			t.Errorf("%s: sent keys %v in %d bytes (budget %d), want %v", tc.priority, sent.Keys, len(frame), n.cfg.BudgetBytes, tc.want)
		}
		small := codec.Sparse{Keys: []uint64{7}, Values: []float32{3}}
		f, _ := n.cfg.Codec.Encode(nil, small)
		if got, _, _ := n.fitBudget(small, f); !slices.Equal(got.Keys, small.Keys) {
			t.Errorf("%s: an update within the budget was cut to %v", tc.priority, got.Keys)
		}
	}
}

// What a budget cuts waits in the residual: after one step from the zero
// view, view plus residual is the step's whole update, key for key, and
// the frame stayed within the budget.
func TestBudgetKeepsTheRestInTheResidual(t *testing.T) {
	cfg := soloConfig(t, testData(t))
	cfg.ErrorFeedback = true
	uncut, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := uncut.Train(); err != nil {
		t.Fatal(err)
	}
	whole := uncut.View()
	n := budgetNode(t, PriorityAbsolute)
	if err := n.Train(); err != nil {
		t.Fatal(err)
	}
	st := n.Stats()
	if st.BudgetCuts != 1 || st.FrameBytes > uint64(n.cfg.BudgetBytes) || st.PairsEncoded != 2 {
		t.Fatalf("cuts %d, frame %d bytes of budget %d, %d pairs sent", st.BudgetCuts, st.FrameBytes, n.cfg.BudgetBytes, st.PairsEncoded)
	}
	var moved int
	for k, v := range n.View() {
		if v != 0 {
			moved++
		}
		if v+n.residual.Get(uint64(k)) != whole[k] {
			t.Fatalf("key %d: view %v + residual %v, the whole update %v", k, v, n.residual.Get(uint64(k)), whole[k])
		}
	}
	if moved != 2 {
		t.Fatalf("%d keys moved, want the 2 that fit", moved)
	}
}

// Under a budget every member still applies exactly what was sent: four
// members with cut updates end with identical views, every update applied
// once and none refused.
func TestBudgetViewsIdentical(t *testing.T) {
	cl := configuredCluster(t, 4, 1, 12, "sketchml", func(c *Config) {
		c.ErrorFeedback, c.BudgetBytes, c.Priority, c.LocalSteps = true, 300, PriorityRelative, 2
	})
	cl.runToEnd(nil)
	for _, id := range cl.ids {
		n := cl.nodes[id]
		st := n.Stats()
		if st.BudgetCuts == 0 || st.UpdatesApplied != 4*6 || len(st.Rejected) != 0 {
			t.Fatalf("%s: %d cuts, %d applied, rejected %v", id, st.BudgetCuts, st.UpdatesApplied, st.Rejected)
		}
		if !sameFloats(n.View(), cl.nodes[cl.ids[0]].View()) {
			t.Fatalf("%s ends with another view than %s", id, cl.ids[0])
		}
	}
}

func TestBudgetSettingsRefused(t *testing.T) {
	train := testData(t)
	for name, bad := range map[string]func(*Config){
		"below one frame":  func(c *Config) { c.BudgetBytes, c.ErrorFeedback = 1, true },
		"no residual":      func(c *Config) { c.BudgetBytes = 1000 },
		"unknown priority": func(c *Config) { c.Priority = "largest" },
	} {
		cfg := soloConfig(t, train)
		bad(&cfg)
		if _, err := New(cfg); !errors.Is(err, ErrBudget) {
			t.Errorf("%s: New returns %v, want ErrBudget", name, err)
		}
	}
}
