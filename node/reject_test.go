package node

import (
	"testing"

	"github.com/sketchmesh/sketchmesh/codec"
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
		reason string
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
