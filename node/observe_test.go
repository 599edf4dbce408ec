package node

import "testing"

// A member's hellos set the clock it announced; its leave notice makes it
// Left, on every member, whether or not its last updates arrived.
func TestLeftAndAnnouncedClock(t *testing.T) {
	ids := []string{"a", "b", "c"}
	n := newPnet(t, ids, 20)
	a := n.nodes["a"]
	if a.Left("b") || a.AnnouncedClock("b") != 0 {
		t.Fatalf("before anything: left %v, announced %d", a.Left("b"), a.AnnouncedClock("b"))
	}
	for r := 0; r < 12; r++ {
		n.round()
	}
	b := n.nodes["b"]
	if got, want := a.AnnouncedClock("b"), b.Clock(); got == 0 || got > want {
		t.Fatalf("a holds b's announced clock %d; b is at %d", got, want)
	}
	b.StartLeave()
	n.flush()
	if !a.Left("b") || a.Left("c") || a.AnnouncedClock("nobody") != 0 {
		t.Fatalf("after b's leave: left(b) %v, left(c) %v", a.Left("b"), a.Left("c"))
	}
}
