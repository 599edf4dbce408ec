package node

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"math"
	"math/rand/v2"
	"slices"
)

// Verified snapshots.
//
// A joiner starts from one donor's rows, so a donor that lies about them
// would set the joiner's view. The frames above the rows are signed by
// their origins and screened like live updates; the rows carry no
// signature, but they are a function of the set of updates they hold
// (node.go), so every member that committed row c holds the same rows at c.
// A joiner therefore checks the donor's rows against a second member's
// digest of its own rows at the same clock:
//
//   - the donor chooses the rows' clock T a little ahead of its own
//     committed clock while the mesh trains (its current one while it
//     waits), names T and the members it knows before it sends anything
//     else, and holds its commits at T (HoldRows) until it has the rows;
//   - the joiner asks a second member for RowsDigest of its rows at T; the
//     second member holds its commits at T too, or answers at once if it
//     is there, or refuses if it is past T;
//   - VerifySnapshot compares. Rows at clock 0 need no second member: they
//     hold nothing, so every parameter is 0.
//
// Two honest members can hold the same updates in rows whose bits differ:
// one that committed a row without a member it had declared down adds that
// member's late update afterwards, in another order (see digest.go), so
// their sums round differently. Exact digests would then refuse every
// donor of the other side, for good. So a second member also sends which
// updates its rows hold (HeldDigest) and RowsProjectionCount projections
// of its view on random ±1 vectors drawn from a seed the joiner chose
// (RowsProjections): the donor never sees the seed, so rows that differ
// by more than rounding differ in some projection by more than
// projectionTolerance times the view's L1 norm, whatever the donor
// changed. Rows whose digests differ are accepted when they hold the same
// updates and every projection agrees within that tolerance.
//
// The digest covers the rows' clock, every parameter's bits and, for each
// member whose updates the rows hold, its id, entry, high-water mark and
// the clocks above it: the exact set of updates, so a donor that leaves out
// or adds updates (which the joiner would then apply twice or never) is
// caught as surely as one that alters a parameter. Liveness and leave
// marks are each member's opinion of the moment and are not covered; nor
// are members whose updates the rows do not hold.

// ErrSnapshotMismatch is wrapped when a donor's rows differ from a second
// member's rows at the same clock, or do not fit what rows at that clock
// can hold.
var ErrSnapshotMismatch = errors.New("snapshot rows differ from a second member's")

// ErrUnverified is wrapped when a snapshot above clock 0 comes with no
// second member's digest to check it against.
var ErrUnverified = errors.New("snapshot rows not verified")

// RejectSnapshotMismatch and RejectSnapshotUnverified count the snapshots
// a joiner refused, by reason.
const (
	RejectSnapshotMismatch   RejectReason = "snapshot_mismatch"
	RejectSnapshotUnverified RejectReason = "snapshot_unverified"
)

// maxRowHolds bounds the clocks a node holds its commits at for joiners at
// once: each costs the updates above it kept uncommitted for a while.
const maxRowHolds = 8

// rowsDigestDomain starts every rows digest, so that it hashes nothing
// else's bytes by accident.
const rowsDigestDomain = "sketchmesh rows digest v1\x00"

// RowsWitness is a second member's account of its rows at a clock: their
// digest, which updates they hold, and the projections of its view with
// the joiner's seed.
type RowsWitness struct {
	Member      string
	Clock       uint64
	Sum         [sha256.Size]byte
	Held        [sha256.Size]byte
	Projections []float64
}

// RowsProjectionCount is how many projections a witness sends.
const RowsProjectionCount = 8

// projectionTolerance bounds, relative to the view's L1 norm, how far a
// projection of honest rows holding the same updates may differ between
// members: rounding in another order of additions is some 1e-16 per
// addition, far below it, and a change of any parameter by more than it
// times the norm moves every projection by as much.
const projectionTolerance = 1e-9

// RowsDigest returns the SHA-256 digest of a snapshot's rows (its clock,
// view and the updates its rows hold; see above). Pending frames and
// refusal marks are not part of it.
func RowsDigest(s *Snapshot) [sha256.Size]byte {
	h := sha256.New()
	var b [8]byte
	word := func(v uint64) {
		binary.LittleEndian.PutUint64(b[:], v)
		h.Write(b[:])
	}
	h.Write([]byte(rowsDigestDomain))
	word(s.Clock)
	word(uint64(len(s.View)))
	buf := make([]byte, 0, 8<<10)
	for _, v := range s.View {
		buf = binary.LittleEndian.AppendUint64(buf, math.Float64bits(v))
		if len(buf) == cap(buf) {
			h.Write(buf)
			buf = buf[:0]
		}
	}
	h.Write(buf)
	writeHeld(h, s)
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sum
}

// HeldDigest returns the SHA-256 digest of which updates a snapshot's rows
// hold: the clock and, for each member whose updates they hold, its id,
// entry, high-water mark and the clocks above it.
func HeldDigest(s *Snapshot) [sha256.Size]byte {
	h := sha256.New()
	h.Write([]byte(heldDigestDomain))
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], s.Clock)
	h.Write(b[:])
	writeHeld(h, s)
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sum
}

// heldDigestDomain starts every held digest.
const heldDigestDomain = "sketchmesh held digest v1\x00"

// writeHeld feeds h the members whose updates the rows hold, sorted by id.
func writeHeld(h hash.Hash, s *Snapshot) {
	var b [8]byte
	word := func(v uint64) {
		binary.LittleEndian.PutUint64(b[:], v)
		h.Write(b[:])
	}
	held := make([]MemberEntry, 0, len(s.Members))
	for _, m := range s.Members {
		if holdsUpdates(m) {
			held = append(held, m)
		}
	}
	slices.SortFunc(held, func(x, y MemberEntry) int { return cmp.Compare(x.ID, y.ID) })
	word(uint64(len(held)))
	for _, m := range held {
		word(uint64(len(m.ID)))
		h.Write([]byte(m.ID))
		word(m.Entry)
		word(m.High)
		ahead := slices.Clone(m.Ahead)
		slices.Sort(ahead)
		word(uint64(len(ahead)))
		for _, c := range ahead {
			word(c)
		}
	}
}

// RowsProjections returns RowsProjectionCount projections of view on ±1
// vectors drawn from seed: projection j is the sum over i of view[i] times
// the sign of bit j of the i-th output of a PCG seeded with (seed,
// len(view)).
func RowsProjections(view []float64, seed uint64) []float64 {
	rng := rand.New(rand.NewPCG(seed, uint64(len(view))))
	out := make([]float64, RowsProjectionCount)
	for _, v := range view {
		bits := rng.Uint64()
		for j := range out {
			if bits>>j&1 == 1 {
				out[j] += v
			} else {
				out[j] -= v
			}
		}
	}
	return out
}

// holdsUpdates reports whether the rows hold some update of member m.
func holdsUpdates(m MemberEntry) bool { return m.High > m.Entry || len(m.Ahead) > 0 }

// VerifySnapshot checks a donor's snapshot before a joiner starts from it:
// its members are well formed (CheckMemberID, CheckMembers), and its rows
// are those of every witness at the same clock. Rows at clock 0 are checked
// without a witness: they hold no update, so every parameter is 0. Above
// clock 0 with no witness it returns an error wrapping ErrUnverified (the
// caller decides whether a mesh of one member may be trusted); a witness
// whose digest differs, or who hashed another clock, gives one wrapping
// ErrSnapshotMismatch.
func VerifySnapshot(s *Snapshot, seed uint64, witnesses []RowsWitness) error {
	for _, m := range s.Members {
		if err := CheckMemberID(m.ID); err != nil {
			return fmt.Errorf("%w: %w", ErrSnapshot, err)
		}
	}
	if err := s.CheckMembers(); err != nil {
		return err
	}
	if s.Clock == 0 {
		for _, m := range s.Members {
			if holdsUpdates(m) {
				return fmt.Errorf("%w: rows at clock 0 hold updates of %s", ErrSnapshotMismatch, m.ID)
			}
		}
		for i, v := range s.View {
			if math.Float64bits(v) != 0 {
				return fmt.Errorf("%w: rows at clock 0 hold parameter %d = %g, not 0", ErrSnapshotMismatch, i, v)
			}
		}
		return nil
	}
	if len(witnesses) == 0 {
		return fmt.Errorf("%w: no second member's digest of the rows at clock %d", ErrUnverified, s.Clock)
	}
	sum, held := RowsDigest(s), HeldDigest(s)
	var proj []float64
	var norm float64
	for _, w := range witnesses {
		switch {
		case w.Clock != s.Clock:
			return fmt.Errorf("%w: member %s hashed its rows at clock %d, the snapshot's are at %d", ErrSnapshotMismatch, w.Member, w.Clock, s.Clock)
		case w.Sum == sum:
			continue
		case w.Held != held:
			return fmt.Errorf("%w: member %s's rows at clock %d hold other updates than the donor's", ErrSnapshotMismatch, w.Member, s.Clock)
		case len(w.Projections) != RowsProjectionCount:
			return fmt.Errorf("%w: member %s's rows at clock %d differ from the donor's in their bits, and it sent %d projections, not %d", ErrSnapshotMismatch, w.Member, s.Clock, len(w.Projections), RowsProjectionCount)
		}
		if proj == nil {
			proj = RowsProjections(s.View, seed)
			for _, v := range s.View {
				norm += math.Abs(v)
			}
		}
		for j, p := range proj {
			if d := math.Abs(p - w.Projections[j]); !(d <= projectionTolerance*norm) {
				return fmt.Errorf("%w: member %s's rows at clock %d differ from the donor's beyond rounding (projection %d: %g against %g)", ErrSnapshotMismatch, w.Member, s.Clock, j, w.Projections[j], p)
			}
		}
	}
	return nil
}

// CommittedClock returns the clock of the node's committed rows.
func (n *Node) CommittedClock() uint64 { return n.committedClock }

// HoldRows makes the node stop committing rows once its rows reach clock
// c, until ReleaseRows(c), so that the driver can take its rows at exactly
// c for a joiner (Admit) or a joiner's check (RowsDigest of Rows). It
// reports false, holding nothing, when the rows are past c or maxRowHolds
// clocks are held already. Training is not held: the gate looks at the
// vector clock, not at the rows.
func (n *Node) HoldRows(c uint64) bool {
	if c < n.committedClock || len(n.rowHolds) >= maxRowHolds {
		return false
	}
	n.rowHolds = append(n.rowHolds, c)
	return true
}

// ReleaseRows drops one hold at clock c, and commits what it held back.
func (n *Node) ReleaseRows(c uint64) {
	if i := slices.Index(n.rowHolds, c); i >= 0 {
		n.rowHolds = slices.Delete(n.rowHolds, i, i+1)
		n.commit()
	}
}

// heldAt reports whether commits stop at the current rows' clock.
func (n *Node) heldAt() bool {
	return len(n.rowHolds) > 0 && slices.Contains(n.rowHolds, n.committedClock)
}
