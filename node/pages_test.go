package node

import (
	"slices"
	"testing"
)

// A page is marked once however often its keys come, and clearing empties
// the set for the next overlay.
func TestPageSetMarksEachPageOnce(t *testing.T) {
	s := newPageSet(1000)
	s.addKeys([]uint64{0, 63, 64, 999, 5, 130})
	s.addKeys([]uint64{64, 1, 999})
	if want := []uint32{0, 1, 15, 2}; !slices.Equal(s.list, want) {
		t.Fatalf("pages %v, want %v", s.list, want)
	}
	s.clear()
	if len(s.list) != 0 || slices.ContainsFunc(s.bits, func(w uint64) bool { return w != 0 }) {
		t.Fatalf("after clear: pages %v, bits %x", s.list, s.bits)
	}
	s.addKeys([]uint64{999})
	if !slices.Equal(s.list, []uint32{15}) {
		t.Fatalf("after clear and one key: pages %v", s.list)
	}
}
