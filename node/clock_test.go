package node

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// naiveClock is the oracle: it keeps every clock it saw and computes the
// contiguous prefix from scratch.
type naiveClock map[string]map[uint64]bool

func (n naiveClock) add(q string, c uint64) bool {
	if c == 0 || n[q][c] {
		return false
	}
	if n[q] == nil {
		n[q] = map[uint64]bool{}
	}
	n[q][c] = true
	return true
}

func (n naiveClock) get(q string) uint64 {
	var c uint64
	for n[q][c+1] {
		c++
	}
	return c
}

func TestVectorClockMatchesOracle(t *testing.T) {
	origins := []string{"a", "b", "c", "d"}
	for seed := uint64(0); seed < 2000; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		v, o := NewVectorClock(), naiveClock{}
		for step := 0; step < 60; step++ {
			q := origins[rng.IntN(len(origins))]
			c := uint64(rng.IntN(12)) // 0 is never an update; duplicates are common
			if got, want := v.Add(q, c), o.add(q, c); got != want {
				t.Fatalf("seed %d step %d: Add(%s,%d) = %v, oracle %v", seed, step, q, c, got, want)
			}
			for _, p := range origins {
				if got, want := v.Get(p), o.get(p); got != want {
					t.Fatalf("seed %d step %d: Get(%s) = %d, oracle %d", seed, step, p, got, want)
				}
			}
		}
	}
}

func TestVectorClockContiguous(t *testing.T) {
	v := NewVectorClock()
	for _, c := range []uint64{3, 2, 5} {
		if !v.Add("a", c) {
			t.Fatalf("Add(a,%d) reported a duplicate", c)
		}
	}
	if got := v.Get("a"); got != 0 {
		t.Fatalf("entry advanced over a gap: %d", got)
	}
	v.Add("a", 1)
	if got := v.Get("a"); got != 3 {
		t.Fatalf("after filling clock 1: entry %d, want 3", got)
	}
	if v.Add("a", 2) || v.Add("a", 5) {
		t.Fatal("duplicate accepted")
	}
	v.Add("a", 4)
	if got := v.Get("a"); got != 5 {
		t.Fatalf("entry %d, want 5", got)
	}
}

func TestGateOpen(t *testing.T) {
	v := NewVectorClock()
	live := []string{"a", "b"}
	v.Set("a", 5)
	v.Set("b", 3)
	cases := []struct {
		clock uint64
		s     int
		want  bool
	}{
		{clock: 3, s: 0, want: true},  // needs min ≥ 3
		{clock: 4, s: 0, want: false}, // needs min ≥ 4
		{clock: 4, s: 1, want: true},
		{clock: 6, s: 2, want: false}, // needs min ≥ 4
		{clock: 6, s: 3, want: true},
		{clock: 0, s: 0, want: true},
	}
	for _, c := range cases {
		if got := GateOpen(v, live, c.clock, c.s); got != c.want {
			t.Errorf("GateOpen(min=3, t=%d, s=%d) = %v, want %v", c.clock, c.s, got, c.want)
		}
	}
}

// The slot reads agree with the string ones, an origin never added has no
// slot and reads as empty, and Snapshot and Origins list what was written:
// an entry set to 0 is in the snapshot, an origin held only above a gap is
// in neither.
func TestVectorClockSlots(t *testing.T) {
	v := NewVectorClock()
	v.Add("a", 1)
	v.Add("a", 2)
	v.Add("b", 3) // above a gap
	v.Set("c", 0)
	if v.slot("z") != -1 || v.getAt(-1) != 0 || v.hasAt(-1, 1) || !v.hasAt(-1, 0) || v.Has("z", 1) || v.Withdraw("z", 1) {
		t.Fatal("an origin never added reads as non-empty")
	}
	a, b := v.slot("a"), v.slot("b")
	if v.getAt(a) != 2 || !v.hasAt(a, 2) || v.hasAt(a, 3) || v.getAt(b) != 0 || !v.hasAt(b, 3) || v.hasAt(b, 2) {
		t.Fatalf("slot reads: a %d, b %d", v.getAt(a), v.getAt(b))
	}
	if len(v.aheadOf("b")) != 1 || v.aheadOf("a") != nil || v.aheadOf("z") != nil {
		t.Fatalf("ahead: a %v, b %v", v.aheadOf("a"), v.aheadOf("b"))
	}
	snap := v.Snapshot()
	if len(snap) != 2 || snap["a"] != 2 || snap["c"] != 0 {
		t.Fatalf("snapshot %v, want a:2 and c:0", snap)
	}
	if got := v.Origins(); len(got) != 1 || got[0] != "a" {
		t.Fatalf("origins %v, want [a]", got)
	}
	if !v.addAt(b, 1) || !v.addAt(b, 2) || v.Get("b") != 3 || v.aheadOf("b") != nil {
		t.Fatalf("closing b's gap by slot: entry %d, ahead %v", v.Get("b"), v.aheadOf("b"))
	}
	if v.intern("a") != a || v.intern("d") != 3 || v.Get("d") != 0 || len(v.Snapshot()) != 3 {
		t.Fatalf("intern: a %d, d %d, snapshot %v", v.intern("a"), v.intern("d"), v.Snapshot())
	}
}

// A slot table lists its slots in the order of their names, whether they
// were interned in that order (appended) or not (inserted).
func TestSlotTableByName(t *testing.T) {
	tab := NewSlotTable(0)
	for _, q := range []string{"a", "c", "e", "b", "d", "a0", "z", "0"} {
		tab.intern(q)
	}
	tab.intern("c") // interned already: no second place
	var got []string
	for _, s := range tab.byName {
		got = append(got, tab.names[s])
	}
	if want := []string{"0", "a", "a0", "b", "c", "d", "e", "z"}; !slices.Equal(got, want) {
		t.Fatalf("slots by name: %v, want %v", got, want)
	}
}

// Clocks held above a gap are kept only for the origins that have some:
// withdrawn, closed over or passed by Set, an origin's set goes.
func TestVectorClockAheadSparse(t *testing.T) {
	v := NewVectorClock()
	v.Add("a", 3)
	v.Add("b", 2)
	v.Add("b", 5)
	v.Add("c", 1)
	if len(v.ahead) != 2 || !v.Has("b", 5) || v.Has("b", 4) || v.Has("c", 2) {
		t.Fatalf("ahead %v", v.ahead)
	}
	if !v.Withdraw("a", 3) || v.Has("a", 3) || len(v.ahead) != 1 {
		t.Fatalf("after a's withdrawal: %v", v.ahead)
	}
	v.Set("b", 4)
	if v.Get("b") != 4 || !v.Has("b", 5) || len(v.aheadOf("b")) != 1 {
		t.Fatalf("b after Set 4: entry %d, ahead %v", v.Get("b"), v.aheadOf("b"))
	}
	v.Set("b", 5)
	if len(v.ahead) != 0 || !v.Add("b", 6) || v.Get("b") != 6 {
		t.Fatalf("after Set 5: ahead %v, entry %d", v.ahead, v.Get("b"))
	}
	v.Add("c", 3)
	if v.Add("c", 2); v.Get("c") != 3 || len(v.ahead) != 0 {
		t.Fatalf("c's gap closed: entry %d, ahead %v", v.Get("c"), v.ahead)
	}
}

// A slot table finds a name by its bytes' address only for the very string
// it found last: an equal string elsewhere, a shorter one at the same
// address and a name it does not hold are looked up by content.
func TestSlotTableLookupRemembersOnlyTheSameString(t *testing.T) {
	table := NewSlotTable(3)
	long, short := table.intern("peer-b/1"), table.intern("peer-b")
	name := strings.Clone("peer-b/1")
	for _, c := range []struct {
		name string
		slot int
		ok   bool
	}{
		{name, long, true},
		{name, long, true}, // remembered
		{name[:len("peer-b")], short, true},
		{strings.Clone("peer-b/1"), long, true},
		{"peer-c/1", 0, false},
		{name, long, true},
	} {
		if slot, ok := table.lookup(c.name); slot != c.slot || ok != c.ok {
			t.Errorf("lookup(%q) = %d, %v; want %d, %v", c.name, slot, ok, c.slot, c.ok)
		}
	}
}
