package node

import (
	"errors"
	"fmt"

	"github.com/sketchmesh/sketchmesh/wire"
)

// The snapshot: what a donor hands a joiner, and what a checkpoint keeps
// (Node.Rows), declared and encoded here.

// MemberEntry is one member as a snapshot carries it.
type MemberEntry struct {
	ID   string
	Live bool
	// Entry is the clock the member joined at: it has no updates at or
	// below it (0 for a member from the start).
	Entry uint64
	// High is the contiguous high-water mark of the member's updates in
	// the snapshot's rows, at least Entry; Ahead lists the clocks above
	// High (and at most the rows' clock) that the rows also hold.
	High  uint64
	Ahead []uint64
	// Left says the member announced its departure after its update Last:
	// a joiner waits for its updates up to Last and for none above.
	Left bool
	Last uint64
}

// Snapshot is what a node hands a joiner: its committed rows and exactly
// which updates they hold, plus the updates it holds above them as frames.
type Snapshot struct {
	// Clock is the rows' clock: every update of a live member with clock at
	// most Clock is in View.
	Clock   uint64
	View    []float64
	Members []MemberEntry
	// Pending are the frames of updates above Clock that the donor holds;
	// the joiner applies them through Receive.
	Pending []Update
	// Refused names the updates of Pending whose signature verified but
	// whose content the donor refused (see sign.go): the joiner marks them
	// heard and relays them, and applies nothing of them, whatever its own
	// screen would say.
	Refused []UpdateID
}

// ErrSnapshot is wrapped by errors about a snapshot that does not fit.
var ErrSnapshot = errors.New("snapshot does not fit")

// snapshotVersion is the snapshot format's version. Version 1 (four fields,
// without a version number) had no marks of refused updates.
const snapshotVersion = 2

// WriteTo appends the snapshot to w as one msgpack array:
//
//	[version uint, clock uint, view, members, pending bin, refused]
//	member:  [id str, live bool, entry uint, high uint, [ahead uint...], left bool, last uint]
//	pending: an envelope (EncodeEnvelope)
//	refused: [[origin str, clock uint]...], each naming a pending update
func (s *Snapshot) WriteTo(w *wire.Writer) {
	w.Array(6)
	w.Uint(snapshotVersion)
	w.Uint(s.Clock)
	w.Floats(s.View)
	w.Array(len(s.Members))
	for _, m := range s.Members {
		w.Array(7)
		w.String(m.ID)
		w.Bool(m.Live)
		w.Uint(m.Entry)
		w.Uint(m.High)
		w.Array(len(m.Ahead))
		for _, c := range m.Ahead {
			w.Uint(c)
		}
		w.Bool(m.Left)
		w.Uint(m.Last)
	}
	w.Bin(EncodeEnvelope(s.Pending))
	w.Array(len(s.Refused))
	for _, id := range s.Refused {
		w.Array(2)
		w.String(id.Origin)
		w.Uint(id.Clock)
	}
}

// ReadSnapshot reads a snapshot written by Snapshot.WriteTo. It checks the
// shape only; Config.Start checks that it fits the model.
func ReadSnapshot(r *wire.Reader) (*Snapshot, error) {
	if err := r.Fields("snapshot", 6); err != nil {
		return nil, err
	}
	ver, err := r.Uint("snapshot version")
	if err != nil {
		return nil, err
	}
	if ver != snapshotVersion {
		return nil, fmt.Errorf("%w: snapshot version %d, this build reads version %d", wire.ErrMalformed, ver, snapshotVersion)
	}
	s := &Snapshot{}
	if s.Clock, err = r.Uint("snapshot clock"); err != nil {
		return nil, err
	}
	if s.View, err = r.Floats("snapshot view", MaxParams); err != nil {
		return nil, err
	}
	n, err := r.Array("snapshot members", 7)
	if err != nil {
		return nil, err
	}
	if n > MaxMembers {
		return nil, fmt.Errorf("%w: snapshot names %d members, limit %d", wire.ErrMalformed, n, MaxMembers)
	}
	s.Members = make([]MemberEntry, n)
	for i := range s.Members {
		m := &s.Members[i]
		if err := r.Fields("snapshot member", 7); err != nil {
			return nil, err
		}
		if m.ID, err = r.String("member id", maxOriginBytes); err != nil {
			return nil, err
		}
		if m.Live, err = r.Bool("member live"); err != nil {
			return nil, err
		}
		if m.Entry, err = r.Uint("member entry clock"); err != nil {
			return nil, err
		}
		if m.High, err = r.Uint("member high-water mark"); err != nil {
			return nil, err
		}
		k, err := r.Array("member gaps", 1)
		if err != nil {
			return nil, err
		}
		m.Ahead = make([]uint64, k)
		for j := range m.Ahead {
			if m.Ahead[j], err = r.Uint("member gap"); err != nil {
				return nil, err
			}
		}
		if m.Left, err = r.Bool("member left"); err != nil {
			return nil, err
		}
		if m.Last, err = r.Uint("member last clock"); err != nil {
			return nil, err
		}
	}
	env, err := r.Bytes("snapshot pending", MaxEnvelopeBytes)
	if err != nil {
		return nil, err
	}
	if s.Pending, err = DecodeEnvelope(env); err != nil {
		return nil, fmt.Errorf("snapshot pending: %w", err)
	}
	if s.Refused, err = readRefused(r, s.Pending); err != nil {
		return nil, err
	}
	return s, nil
}

// CheckMembers checks what a snapshot says of its members against its rows'
// clock, by the rules a node started from it applies (Config.Start): every
// member has an id, listed once; Entry <= High; High at most the rows'
// clock, or equal to Entry for a member admitted above the rows (nothing of
// it is in them: a donor admits a joiner at its own rows' clock, which may
// be ahead of this node's); Ahead clocks in (High, Clock]. A checkpoint is
// held to the same rules, so that whatever a node snapshots it can save
// and start from again.
func (s *Snapshot) CheckMembers() error {
	seen := make(map[string]bool, len(s.Members))
	for _, m := range s.Members {
		switch {
		case m.ID == "":
			return fmt.Errorf("%w: a member has an empty id", ErrSnapshot)
		case seen[m.ID]:
			return fmt.Errorf("%w: member %q is listed twice", ErrSnapshot, m.ID)
		case m.Entry > m.High:
			return fmt.Errorf("%w: member %q holds up to %d, below its entry clock %d", ErrSnapshot, m.ID, m.High, m.Entry)
		case m.High > max(s.Clock, m.Entry):
			return fmt.Errorf("%w: member %q holds up to %d, above the rows' clock %d and its entry %d", ErrSnapshot, m.ID, m.High, s.Clock, m.Entry)
		}
		seen[m.ID] = true
		for _, c := range m.Ahead {
			if c <= m.High || c > s.Clock {
				return fmt.Errorf("%w: member %q lists clock %d outside (%d, %d]", ErrSnapshot, m.ID, c, m.High, s.Clock)
			}
		}
	}
	return nil
}

// readRefused reads a snapshot's marks of refused updates: at most one per
// pending update, each naming one of them.
func readRefused(r *wire.Reader, pending []Update) ([]UpdateID, error) {
	// An entry takes at least 3 bytes: array header, origin header, clock.
	n, err := r.Array("snapshot refused", 3)
	if err != nil {
		return nil, err
	}
	if n > len(pending) {
		return nil, fmt.Errorf("%w: snapshot marks %d updates refused, it carries %d", wire.ErrMalformed, n, len(pending))
	}
	carried := make(map[UpdateID]bool, len(pending))
	for _, u := range pending {
		carried[UpdateID{Origin: u.Origin, Clock: u.Clock}] = true
	}
	out := make([]UpdateID, n)
	for i := range out {
		if err := r.Fields("refused update", 2); err != nil {
			return nil, err
		}
		if out[i].Origin, err = r.String("refused origin", maxOriginBytes); err != nil {
			return nil, err
		}
		if out[i].Clock, err = r.Uint("refused clock"); err != nil {
			return nil, err
		}
		if !carried[out[i]] {
			return nil, fmt.Errorf("%w: snapshot marks %s's update %d refused and does not carry it", wire.ErrMalformed, out[i].Origin, out[i].Clock)
		}
	}
	return out, nil
}
