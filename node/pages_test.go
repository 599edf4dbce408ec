package node

import (
	"math"
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

// A paged vector reads +0 where nothing was written, allocates only the
// pages written to, and keeps what was written.
func TestPagedVecAllocatesWrittenPages(t *testing.T) {
	v := newPagedVec(1000)
	if len(v.pages) != 16 {
		t.Fatalf("%d pages for 1000 values, want 16", len(v.pages))
	}
	if x := v.get(999); math.Float64bits(x) != 0 {
		t.Fatalf("unwritten value %v, want +0", x)
	}
	*v.at(130) = -2.5
	*v.at(130) -= 0.5
	*v.at(999) = math.Copysign(0, -1)
	if v.get(130) != -3 || math.Float64bits(v.get(999)) != math.Float64bits(math.Copysign(0, -1)) || v.get(131) != 0 {
		t.Fatalf("values %v %v %v, want -3 -0 0", v.get(130), v.get(999), v.get(131))
	}
	var held []int
	for i, p := range v.pages {
		if p != nil {
			held = append(held, i)
		}
	}
	if !slices.Equal(held, []int{2, 15}) {
		t.Fatalf("pages held %v, want [2 15]", held)
	}
}
