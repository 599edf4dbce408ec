package node

import (
	"errors"
	"testing"

	"github.com/sketchmesh/sketchmesh/codec"
	"github.com/sketchmesh/sketchmesh/dataset"
	"github.com/sketchmesh/sketchmesh/model"
	"github.com/sketchmesh/sketchmesh/sfb"
)

// Every kind of bad input is dropped, counted under its reason, not applied
// and not relayed.
func TestRejections(t *testing.T) {
	cl := newCluster(t, 3, 1, 10, "raw", 1)
	a := cl.nodes[cl.ids[0]]
	b := cl.ids[1]
	frame := func(keys []uint64, vals []float32) []byte {
		f, err := codec.Raw{}.Encode(nil, codec.Sparse{Keys: keys, Values: vals})
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	good := frame([]uint64{1, 2}, []float32{0.5, -0.5})
	cases := []struct {
		name   string
		data   []byte
		reason RejectReason
	}{
		{"garbage", []byte("not an envelope"), RejectBadEnvelope},
		{"not a member", EncodeEnvelope([]Update{{Origin: "intruder", Clock: 1, Frame: good}}), RejectNotMember},
		{"clock zero", EncodeEnvelope([]Update{{Origin: b, Clock: 0, Frame: good}}), RejectBadClock},
		{"clock far ahead", EncodeEnvelope([]Update{{Origin: b, Clock: 3, Frame: good}}), RejectClockAhead},
		{"bad frame", EncodeEnvelope([]Update{{Origin: b, Clock: 1, Frame: []byte("SK\x01\x7f")}}), RejectBadFrame},
		{"key outside the model", EncodeEnvelope([]Update{{Origin: b, Clock: 1, Frame: frame([]uint64{1 << 40}, []float32{1})}}), RejectBadShape},
		{"dense of wrong length", EncodeEnvelope([]Update{{Origin: b, Clock: 1, Frame: frame(nil, []float32{1, 2, 3})}}), RejectBadShape},
	}
	for _, c := range cases {
		before := a.Stats()
		a.Receive(b, c.data)
		after := a.Stats()
		if got := after.Rejected[c.reason] - before.Rejected[c.reason]; got != 1 {
			t.Errorf("%s: %s count went up by %d, want 1 (rejected %v)", c.name, c.reason, got, after.Rejected)
		}
		if after.UpdatesApplied != before.UpdatesApplied {
			t.Errorf("%s: applied", c.name)
		}
		if len(a.Ready().Messages) != 0 {
			t.Errorf("%s: relayed", c.name)
		}
	}
	// A good update is applied once; its replay is a duplicate.
	env := EncodeEnvelope([]Update{{Origin: b, Clock: 1, Frame: good}})
	a.Receive(b, env)
	a.Receive(b, env)
	st := a.Stats()
	if st.UpdatesApplied != 1 || st.Rejected[RejectDuplicate] != 1 {
		t.Fatalf("applied %d, duplicates %d; want 1 and 1", st.UpdatesApplied, st.Rejected[RejectDuplicate])
	}
}

// Factor frames for another class count, or with a non-finite norm or one
// above the bound, are dropped and counted, never applied.
func TestFactorFrameRejections(t *testing.T) {
	mdl, err := model.New(model.Config{Kind: model.Softmax, MaxFeature: 4, Classes: []float64{0, 1, 2}})
	if err != nil {
		t.Fatal(err)
	}
	ids := []string{"a", "b"}
	opt, err := model.NewOptimizer(model.SGD, 1, mdl.NumParams())
	if err != nil {
		t.Fatal(err)
	}
	shard := []dataset.Row{{Label: 1, Keys: []uint64{1}, Values: []float32{1}}}
	n, err := New(Config{ID: "a", Members: ids, Model: mdl, Optimizer: opt, Codec: codec.Raw{}, Staleness: 1,
		Iterations: 5, BatchSize: 1, Shard: shard, Factors: FactorsAuto, MaxUpdateNorm: 100})
	if err != nil {
		t.Fatal(err)
	}
	frame := func(k int, b float32) []byte {
		bs := make([]float32, k)
		bs[0] = b
		f, err := sfb.Encode(codec.Raw{}, sfb.Factors{K: k, Stride: 5, B: [][]float32{bs},
			C: []codec.Sparse{{Keys: []uint64{0, 2}, Values: []float32{1, 1}}}})
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	cases := []struct {
		name   string
		frame  []byte
		reason RejectReason
	}{
		{"four classes for a three-class model", frame(4, 1), RejectBadFactors},
		{"norm above the bound", frame(3, 1000), RejectNorm},
	}
	for _, c := range cases {
		n.Receive("b", EncodeEnvelope([]Update{{Origin: "b", Clock: 1, Frame: c.frame}}))
		if got := n.Stats().Rejected[c.reason]; got != 1 {
			t.Errorf("%s: %s counted %d times, want 1 (rejected %v)", c.name, c.reason, got, n.Stats().Rejected)
		}
	}
	n.Receive("b", EncodeEnvelope([]Update{{Origin: "b", Clock: 1, Frame: frame(3, 2)}}))
	if st := n.Stats(); st.UpdatesApplied != 1 {
		t.Fatalf("a good factor frame was not applied: applied %d, rejected %v", st.UpdatesApplied, st.Rejected)
	}
	if got := n.View()[2]; got != 0 {
		// Clock 1 is ahead of a node at clock 0, so it waits as pending.
		t.Fatalf("view read an update from a clock ahead of the node: %v", got)
	}
	for _, bad := range []Config{
		{Optimizer: mustOpt(t, model.Adam, mdl)},
		{ErrorFeedback: true},
	} {
		cfg := Config{ID: "a", Members: ids, Model: mdl, Optimizer: opt, Codec: codec.Raw{}, Iterations: 1, BatchSize: 1, Shard: shard, Factors: FactorsAlways}
		if bad.Optimizer != nil {
			cfg.Optimizer = bad.Optimizer
		}
		cfg.ErrorFeedback = bad.ErrorFeedback
		if _, err := New(cfg); !errors.Is(err, ErrFactorConfig) {
			t.Errorf("factors with %+v: err %v, want ErrFactorConfig", bad, err)
		}
	}
}

func mustOpt(t *testing.T, k model.OptimizerKind, m *model.Model) model.Optimizer {
	t.Helper()
	o, err := model.NewOptimizer(k, 0.1, m.NumParams())
	if err != nil {
		t.Fatal(err)
	}
	return o
}
