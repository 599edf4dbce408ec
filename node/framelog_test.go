package node

import (
	"bytes"
	"fmt"
	"testing"
	"unsafe"
)

// Cores on one slot table keep their logs of a member's frames as runs of
// the table's timeline: a core given another frame for a clock than the
// others keep takes a list of its own, and the others still read the
// timeline's frame; a log out of clock order is a list until it is a run
// again; a frame no log holds any more leaves the timeline.
func TestSharedLogsCopiedOnDisagreement(t *testing.T) {
	table := NewSlotTable(4)
	cl := newClusterWith(t, 3, 1, 5, "raw", 1, func(c *Config) { c.Slots = table })
	a, b, c := cl.nodes["node-00"], cl.nodes["node-01"], cl.nodes["node-02"]
	const m = "node-02"
	q := a.memberSlot(m)
	frame := func(clock uint64, s string) *keptUpdate {
		return &keptUpdate{clock: clock, frame: []byte(fmt.Sprintf("%s%d", s, clock))}
	}
	k := []*keptUpdate{nil, frame(1, "f"), frame(2, "f"), frame(3, "f"), frame(4, "f")}
	frames := func(n *Node) string {
		var out []string
		for _, r := range n.logOf(q) {
			out = append(out, string(r.frame))
		}
		return fmt.Sprint(out)
	}
	retain := func(n *Node, e *keptUpdate) { n.retainAt(q, m, retained{e}) }

	retain(a, k[1])
	retain(a, k[2])
	retain(a, k[3])
	// b's first frame is an equal copy, not the same entry: it is shared.
	retain(b, frame(1, "f"))
	retain(b, k[2])
	tl := table.timeline(q)
	if a.logs[q].own() || b.logs[q].own() || tl.entries[0].refs != 2 || tl.entries[2].refs != 1 {
		t.Fatalf("runs: a %+v, b %+v, timeline %+v", a.logs[q], b.logs[q], tl.entries)
	}
	if b.logOf(q)[0].keptUpdate != k[1] {
		t.Fatal("an equal frame is kept twice")
	}

	retain(b, frame(3, "x"))
	if !b.logs[q].own() || frames(b) != "[f1 f2 x3]" {
		t.Fatalf("b, given another frame for clock 3: %+v %s", b.logs[q], frames(b))
	}
	if a.logs[q].own() || frames(a) != "[f1 f2 f3]" {
		t.Fatalf("b's frame reached a: %s", frames(a))
	}
	retain(b, k[4])
	if frames(b) != "[f1 f2 x3 f4]" || !b.logs[q].own() {
		t.Fatalf("b after clock 4: %s", frames(b))
	}
	if tl.entries[0].refs != 1 {
		t.Fatalf("b's list still holds the timeline: %+v", tl.entries)
	}

	// Out of clock order, and across a gap: a list, then a run again.
	retain(c, k[2])
	retain(c, k[1])
	if c.logs[q] != (frameLog{lo: 1, n: 2}) {
		t.Fatalf("c after clocks 2 and 1: %+v", c.logs[q])
	}
	retain(c, k[4])
	if !c.logs[q].own() || frames(c) != "[f1 f2 f4]" {
		t.Fatalf("c across a gap: %+v %s", c.logs[q], frames(c))
	}
	retain(c, k[3])
	if c.logs[q] != (frameLog{lo: 1, n: 4}) || frames(c) != "[f1 f2 f3 f4]" {
		t.Fatalf("c with the gap closed: %+v %s", c.logs[q], frames(c))
	}
	retain(c, k[3])
	if c.logLen(q) != 4 {
		t.Fatalf("a frame held twice: %d", c.logLen(q))
	}
	for _, n := range []*Node{a, b, c} {
		size := 0
		for _, r := range n.logOf(q) {
			size += len(r.frame)
		}
		if st := n.SyncStats(); st.Retained != n.logLen(q) || st.RetainedBytes != size {
			t.Fatalf("%s counts %d frames of %d bytes, holds %d of %d", n.ID(), st.Retained, st.RetainedBytes, n.logLen(q), size)
		}
	}

	a.DropSharedLogs()
	c.DropSharedLogs()
	if len(tl.entries) != 0 {
		t.Fatalf("frames no log holds are kept: %+v", tl.entries)
	}
	if frames(b) != "[f1 f2 x3 f4]" {
		t.Fatalf("b's own list changed: %s", frames(b))
	}
}

// A timeline holds an entry while some log does, takes an equal frame as
// the entry it has, refuses another one, and trims what no log holds at
// both ends, below its first clock as above its last.
func TestTimeline(t *testing.T) {
	var l timeline
	e5 := &keptUpdate{clock: 5, frame: []byte("a")}
	if l.hold(e5) != e5 || l.base != 5 || len(l.entries) != 1 {
		t.Fatalf("first entry: base %d, %d entries", l.base, len(l.entries))
	}
	e2 := &keptUpdate{clock: 2, frame: []byte("b")}
	if l.hold(e2) != e2 || l.base != 2 || len(l.entries) != 4 || l.at(5) != e5 || l.at(3) != nil {
		t.Fatalf("below the first: base %d, %d entries", l.base, len(l.entries))
	}
	if l.hold(&keptUpdate{clock: 5, frame: []byte("a")}) != e5 || l.entries[3].refs != 2 {
		t.Fatal("an equal frame is not the entry held")
	}
	if l.hold(&keptUpdate{clock: 5, frame: []byte("c")}) != nil || l.entries[3].refs != 2 {
		t.Fatal("another frame for a clock held is taken")
	}
	if l.hold(&keptUpdate{clock: 5, frame: []byte("a"), sig: []byte("s")}) != nil {
		t.Fatal("another signature for a clock held is taken")
	}
	l.release(2)
	if l.base != 5 || len(l.entries) != 1 || !bytes.Equal(l.at(5).frame, []byte("a")) {
		t.Fatalf("after the first is released: base %d, %d entries", l.base, len(l.entries))
	}
	l.release(5)
	l.release(5)
	if l.entries != nil || l.at(5) != nil {
		t.Fatalf("entries no log holds: %+v", l.entries)
	}
}

// A run log is 8 bytes, and its first clock, kept as 32 bits, reads right
// against its timeline's base across a wrap of the low 32 bits.
func TestFrameLogClocksAcrossTheWrap(t *testing.T) {
	if size := unsafe.Sizeof(frameLog{}); size != 8 {
		t.Fatalf("frameLog is %d bytes, want 8", size)
	}
	const wrap = uint64(1) << 32
	for _, c := range []struct{ base, lo uint64 }{
		{0, 0}, {5, 7}, {wrap - 2, wrap - 1}, {wrap - 2, wrap + 3}, {3*wrap + 9, 3*wrap + 9}, {wrap - 1, wrap},
	} {
		l := frameLog{lo: uint32(c.lo), n: 3}
		tl := &timeline{base: c.base}
		if got := l.start(tl); got != c.lo {
			t.Fatalf("base %d, first clock %d: start reads %d", c.base, c.lo, got)
		}
		for d := uint64(0); d < 3; d++ {
			if !l.holds(c.lo + d) {
				t.Fatalf("run of 3 from %d does not hold %d", c.lo, c.lo+d)
			}
		}
		if l.holds(c.lo+3) || l.holds(c.lo-1) || !l.follows(c.lo+3) || l.follows(c.lo+2) {
			t.Fatalf("run of 3 from %d: holds(%d) %v, holds(%d) %v, follows(%d) %v", c.lo, c.lo+3, l.holds(c.lo+3), c.lo-1, l.holds(c.lo-1), c.lo+3, l.follows(c.lo+3))
		}
	}
	if own := (frameLog{n: ownLog}); !own.own() || (frameLog{n: 5}).own() {
		t.Fatal("the own mark is not the top bit of n")
	}
}
