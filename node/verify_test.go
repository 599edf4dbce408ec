package node

import (
	"errors"
	"math"
	"slices"
	"testing"
)

// heldRows runs a cluster whose nodes all hold their rows at clock at, and
// returns each node's rows taken there; training goes on past the hold.
func heldRows(t *testing.T, seed uint64, at uint64) (*cluster, map[string]Snapshot) {
	t.Helper()
	cl := newCluster(t, 3, 2, 20, "raw", seed)
	for _, id := range cl.ids {
		if !cl.nodes[id].HoldRows(at) {
			t.Fatalf("%s refused a hold at %d from clock 0", id, at)
		}
	}
	rows := map[string]Snapshot{}
	for cl.step(nil) {
		for _, id := range cl.ids {
			n := cl.nodes[id]
			if n.CommittedClock() > at {
				t.Fatalf("%s committed row %d past its hold at %d", id, n.CommittedClock(), at)
			}
			if _, ok := rows[id]; !ok && n.CommittedClock() == at {
				rows[id] = n.Rows()
			}
		}
	}
	for _, id := range cl.ids {
		n := cl.nodes[id]
		if _, ok := rows[id]; !ok {
			t.Fatalf("%s never reached rows %d (clock %d)", id, at, n.Clock())
		}
		// Training went on to the staleness bound above the rows, no
		// further: the gate reads the vector clock, and the hold blocks
		// nothing else.
		if n.Clock() <= at {
			t.Fatalf("%s stopped training at clock %d with its rows held at %d", id, n.Clock(), at)
		}
	}
	return cl, rows
}

// Members that commit the same updates hold rows with the same digest, so
// a second member's digest confirms honest rows; a hold stops the rows at
// its clock and nowhere else, and the mesh ends as usual once released.
func TestRowsDigestAgreesAcrossMembersAtAHeldClock(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		cl, rows := heldRows(t, seed, 7)
		a, b, c := rows[cl.ids[0]], rows[cl.ids[1]], rows[cl.ids[2]]
		if a.Clock != 7 || RowsDigest(&a) != RowsDigest(&b) || RowsDigest(&a) != RowsDigest(&c) {
			t.Fatalf("seed %d: rows at 7 hash to %x, %x, %x", seed, RowsDigest(&a), RowsDigest(&b), RowsDigest(&c))
		}
		w := []RowsWitness{witnessOf(cl.ids[1], &b, 9), witnessOf(cl.ids[2], &c, 9)}
		if err := VerifySnapshot(&a, 9, w); err != nil {
			t.Fatalf("seed %d: honest rows refused: %v", seed, err)
		}
		for _, id := range cl.ids {
			cl.nodes[id].ReleaseRows(7)
			if cl.nodes[id].HoldRows(3) {
				t.Fatalf("%s held rows at 3, below its rows' clock %d", id, cl.nodes[id].CommittedClock())
			}
		}
		cl.runToEnd(nil)
		for _, id := range cl.ids {
			if got := cl.nodes[id].CommittedClock(); got != 20 {
				t.Fatalf("seed %d: %s ends with rows at %d, want 20", seed, id, got)
			}
		}
	}
}

// Whatever a lying donor changes in the rows, or in which updates it says
// they hold, the digest differs from an honest member's.
func TestVerifySnapshotCatchesAlteredRows(t *testing.T) {
	cl, rows := heldRows(t, 4, 6)
	honest := rows[cl.ids[1]]
	w := []RowsWitness{witnessOf(cl.ids[1], &honest, 5)}
	someone := func(s *Snapshot) *MemberEntry {
		for i := range s.Members {
			if s.Members[i].ID == cl.ids[2] {
				return &s.Members[i]
			}
		}
		t.Fatal("no member to alter")
		return nil
	}
	lies := map[string]func(s *Snapshot){
		"a parameter moved by a millionth of the view's L1 norm": func(s *Snapshot) {
			var norm float64
			for _, v := range s.View {
				norm += math.Abs(v)
			}
			s.View[len(s.View)/2] += 1e-6 * norm
		},
		"a parameter's sign":        func(s *Snapshot) { s.View[0] = -s.View[0] - 1 },
		"an update left out":        func(s *Snapshot) { someone(s).High-- },
		"an update said to be held": func(s *Snapshot) { m := someone(s); m.High--; m.Ahead = append(m.Ahead, s.Clock+1); s.Clock++ },
		"a later entry":             func(s *Snapshot) { someone(s).Entry++ },
		"a made-up contributor": func(s *Snapshot) {
			s.Members = append(s.Members, MemberEntry{ID: "node-99", Live: true, High: 6})
		},
		"a shorter view": func(s *Snapshot) { s.View = s.View[:len(s.View)-1] },
	}
	for name, lie := range lies {
		s := honest
		s.View = slices.Clone(honest.View)
		s.Members = slices.Clone(honest.Members)
		for i := range s.Members {
			s.Members[i].Ahead = slices.Clone(s.Members[i].Ahead)
		}
		lie(&s)
		if err := VerifySnapshot(&s, 5, w); !errors.Is(err, ErrSnapshotMismatch) && !errors.Is(err, ErrSnapshot) {
			t.Errorf("%s: err = %v, want a mismatch", name, err)
		}
	}
	// What is each member's opinion of the moment is not covered: a
	// member's liveness may differ between two honest members.
	s := honest
	s.Members = slices.Clone(honest.Members)
	someone(&s).Live = !someone(&s).Live
	if err := VerifySnapshot(&s, 5, w); err != nil {
		t.Fatalf("rows with another liveness opinion refused: %v", err)
	}
	if err := VerifySnapshot(&honest, 5, []RowsWitness{{Member: "w", Clock: 7, Sum: RowsDigest(&honest)}}); !errors.Is(err, ErrSnapshotMismatch) {
		t.Fatalf("a witness at another clock: err = %v, want a mismatch", err)
	}
	if err := VerifySnapshot(&honest, 5, w[:0]); !errors.Is(err, ErrUnverified) {
		t.Fatalf("no witness: err = %v, want ErrUnverified", err)
	}
	bad := honest
	bad.Members = append(slices.Clone(honest.Members), MemberEntry{ID: "bad id", Live: true})
	if err := VerifySnapshot(&bad, 5, w); !errors.Is(err, ErrSnapshot) {
		t.Fatalf("a member id with a space: err = %v, want ErrSnapshot", err)
	}
}

// witnessOf is what member sends of its rows s to a joiner that chose seed.
func witnessOf(member string, s *Snapshot, seed uint64) RowsWitness {
	return RowsWitness{Member: member, Clock: s.Clock, Sum: RowsDigest(s), Held: HeldDigest(s), Projections: RowsProjections(s.View, seed)}
}

// Rows that hold the same updates but were added in another order differ
// in their last bits: they are accepted. A change beyond rounding is not,
// however small against the view, since the donor cannot know the seed.
func TestVerifySnapshotToleratesRoundingOnly(t *testing.T) {
	cl, rows := heldRows(t, 2, 6)
	honest := rows[cl.ids[1]]
	const seed = 77
	w := []RowsWitness{witnessOf(cl.ids[1], &honest, seed)}
	var norm float64
	for _, v := range honest.View {
		norm += math.Abs(v)
	}
	alter := func(f func(i int, v float64) float64) Snapshot {
		s := honest
		s.View = slices.Clone(honest.View)
		for i, v := range s.View {
			s.View[i] = f(i, v)
		}
		return s
	}
	rounded := alter(func(_ int, v float64) float64 {
		if v == 0 {
			return v
		}
		return math.Nextafter(v, 0)
	})
	if RowsDigest(&rounded) == RowsDigest(&honest) {
		t.Fatal("rows one ulp apart hash alike")
	}
	if err := VerifySnapshot(&rounded, seed, w); err != nil {
		t.Fatalf("rows one ulp apart refused: %v", err)
	}
	big := 0
	for i, v := range honest.View {
		if math.Abs(v) > math.Abs(honest.View[big]) {
			big = i
		}
	}
	for _, delta := range []float64{1e-6 * norm, 1e-8 * norm, 100 * projectionTolerance * norm} {
		moved := alter(func(i int, v float64) float64 {
			if i == big {
				return v + delta
			}
			return v
		})
		if err := VerifySnapshot(&moved, seed, w); !errors.Is(err, ErrSnapshotMismatch) {
			t.Errorf("one parameter moved by %g (view L1 %g): err = %v, want a mismatch", delta, norm, err)
		}
	}
	// A change of a 1e-5th of the view's L1 norm spread over every
	// parameter, with signs the donor would have to guess.
	step := 1e-5 * norm / float64(len(honest.View))
	spread := alter(func(i int, v float64) float64 { return v + step*float64(1-2*(i%2)) })
	if err := VerifySnapshot(&spread, seed, w); !errors.Is(err, ErrSnapshotMismatch) {
		t.Errorf("every parameter moved by ±%g: err = %v, want a mismatch", step, err)
	}
	// Rows with the same bits but other updates claimed are refused,
	// whatever the projections say.
	claimed := honest
	claimed.Members = slices.Clone(honest.Members)
	claimed.Members[0].High--
	if err := VerifySnapshot(&claimed, seed, w); !errors.Is(err, ErrSnapshotMismatch) {
		t.Errorf("other updates claimed: err = %v, want a mismatch", err)
	}
	if got, again := RowsProjections(honest.View, seed), RowsProjections(honest.View, seed); !slices.Equal(got, again) || len(got) != RowsProjectionCount {
		t.Fatalf("projections %v then %v", got, again)
	}
}

// Rows at clock 0 are checked without a second member: they hold nothing.
func TestVerifySnapshotAtClockZero(t *testing.T) {
	empty := Snapshot{View: make([]float64, 5), Members: []MemberEntry{{ID: "a", Live: true}, {ID: "b", Live: true}}}
	if err := VerifySnapshot(&empty, 0, nil); err != nil {
		t.Fatalf("empty rows at 0 refused: %v", err)
	}
	nonzero := empty
	nonzero.View = []float64{0, 0, 1e-300, 0, 0}
	if err := VerifySnapshot(&nonzero, 0, nil); !errors.Is(err, ErrSnapshotMismatch) {
		t.Fatalf("a parameter at clock 0: err = %v, want a mismatch", err)
	}
	negZero := empty
	negZero.View = []float64{0, math.Copysign(0, -1), 0, 0, 0}
	if err := VerifySnapshot(&negZero, 0, nil); !errors.Is(err, ErrSnapshotMismatch) {
		t.Fatalf("-0 at clock 0: err = %v, want a mismatch (the bits differ)", err)
	}
	holding := empty
	holding.Members = []MemberEntry{{ID: "a", Live: true, Ahead: nil, High: 0}, {ID: "b", Live: true, Entry: 0, High: 0, Ahead: []uint64{}}}
	if err := VerifySnapshot(&holding, 0, nil); err != nil {
		t.Fatalf("empty gaps refused: %v", err)
	}
}

// A hold is bounded, and one below the rows is refused.
func TestHoldRowsBounds(t *testing.T) {
	cl := newCluster(t, 2, 1, 5, "raw", 1)
	n := cl.nodes[cl.ids[0]]
	for i := range maxRowHolds {
		if !n.HoldRows(uint64(10 + i)) {
			t.Fatalf("hold %d refused", i)
		}
	}
	if n.HoldRows(30) {
		t.Fatalf("hold %d accepted", maxRowHolds+1)
	}
	n.ReleaseRows(99) // not held: nothing happens
	n.ReleaseRows(10)
	if !n.HoldRows(30) {
		t.Fatal("a hold released is not free again")
	}
	for i := 1; i < maxRowHolds; i++ {
		n.ReleaseRows(uint64(10 + i))
	}
	n.ReleaseRows(30)
	cl.runToEnd(nil)
}
