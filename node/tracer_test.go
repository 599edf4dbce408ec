package node

import (
	"fmt"
	"maps"
	"slices"
	"testing"
)

// recordingTracer keeps what a core tells its Tracer.
type recordingTracer struct {
	applied  []string
	rejected map[RejectReason]uint64
}

func (r *recordingTracer) Apply(origin string, clock uint64) {
	r.applied = append(r.applied, fmt.Sprintf("%s@%d", origin, clock))
}

func (r *recordingTracer) Reject(reason RejectReason) { r.rejected[reason]++ }

// The tracer hears of every update the view takes, in order, and of every
// refusal under its reason: exactly what Stats counts.
func TestTracerSeesAppliesAndRejections(t *testing.T) {
	cl := newCluster(t, 3, 1, 10, "raw", 1)
	a, b := cl.ids[0], cl.ids[1]
	tr := &recordingTracer{rejected: map[RejectReason]uint64{}}
	cfg := cl.nodes[a].cfg
	cfg.Tracer = tr
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Train(); err != nil {
		t.Fatal(err)
	}
	if err := cl.nodes[b].Train(); err != nil {
		t.Fatal(err)
	}
	var fromB []byte
	for _, m := range cl.nodes[b].Ready().Messages {
		if m.To == a {
			fromB = m.Data
		}
	}
	if fromB == nil {
		t.Fatal("b sent a nothing")
	}
	n.Receive(b, fromB)
	n.Receive(b, fromB)
	n.Receive(b, []byte("not an envelope"))

	if want := []string{a + "@1", b + "@1"}; !slices.Equal(tr.applied, want) {
		t.Fatalf("applied %v, want %v", tr.applied, want)
	}
	st := n.Stats()
	if uint64(len(tr.applied)) != st.UpdatesApplied {
		t.Fatalf("tracer saw %d applies, stats count %d", len(tr.applied), st.UpdatesApplied)
	}
	want := map[RejectReason]uint64{RejectDuplicate: 1, RejectBadEnvelope: 1}
	if !maps.Equal(tr.rejected, want) || !maps.Equal(tr.rejected, st.Rejected) {
		t.Fatalf("tracer saw rejections %v, stats %v, want %v", tr.rejected, st.Rejected, want)
	}
}

// One RejectTally given to two cores counts what both refuse: the sum of
// their Stats.Rejected, reason by reason.
func TestRejectTallyAddsUpCores(t *testing.T) {
	var tally RejectTally
	if got := tally.Counts(); got == nil || len(got) != 0 {
		t.Fatalf("an empty tally counts %v", got)
	}
	cl := newCluster(t, 3, 1, 10, "raw", 1)
	a, b, c := cl.ids[0], cl.ids[1], cl.ids[2]
	var cores []*Node
	for _, id := range []string{a, c} {
		cfg := cl.nodes[id].cfg
		cfg.Tracer = &tally
		n, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		cores = append(cores, n)
	}
	if err := cl.nodes[b].Train(); err != nil {
		t.Fatal(err)
	}
	sent := map[string][]byte{}
	for _, m := range cl.nodes[b].Ready().Messages {
		sent[m.To] = m.Data
	}
	cores[0].Receive(b, sent[a])
	cores[0].Receive(b, sent[a])
	cores[1].Receive(b, []byte("not an envelope"))
	cores[1].Receive("intruder", sent[c])
	want := map[RejectReason]uint64{}
	for _, n := range cores {
		for r, k := range n.Stats().Rejected {
			want[r] += k
		}
	}
	if len(want) < 2 || !maps.Equal(tally.Counts(), want) {
		t.Fatalf("tally %v, the cores' stats %v", tally.Counts(), want)
	}
	// Tallies add up reason by reason (a simulator keeps one a worker).
	var sum RejectTally
	sum.Add(&tally)
	sum.Add(&tally)
	sum.Add(&RejectTally{})
	for r, k := range want {
		want[r] = 2 * k
	}
	if !maps.Equal(sum.Counts(), want) {
		t.Fatalf("two tallies added: %v, want %v", sum.Counts(), want)
	}
}
