package node

import (
	"fmt"
	"slices"
)

// Membership changes.
//
// A mesh's membership changes while it trains: nodes join, leave and die.
// The core does not decide any of that (the driver learns it from the
// network and from timeouts); it applies what it is told:
//
//   - AddMember admits a member whose updates start after a given clock,
//     its entry. Nothing of it is expected at or below the entry, so the
//     gate and the commit of rows wait for it only from entry+1 on.
//   - PeerDown and PeerUp take a member out of the live set and back; Leave
//     also records the member's last clock, so nobody asks for more of it.
//   - Snapshot gives what a joiner starts from, and Config.Start starts a
//     node from it: the donor's committed rows, the exact set of updates
//     they hold (vector clock entries and any gaps below the rows' clock),
//     and the frames of the updates the donor holds above it, which the
//     joiner then receives like any other envelope.
//
// A member id is never reused for a second run of the same node: a node
// restarted from a checkpoint joins as a new incarnation (a new member id),
// so its new updates can never collide with clocks its previous incarnation
// already sent. That is what keeps "applied at most once" a plain vector
// clock check across restarts.

// Rows returns the node's committed rows, their clock and the members
// with their entries, without the frames above them: what a checkpoint
// keeps, and the base of a joiner's Snapshot.
func (n *Node) Rows() Snapshot {
	s := Snapshot{Clock: n.committedClock, View: slices.Clone(n.committedRows())}
	for _, m := range n.members {
		// A member that joined above the rows' clock has nothing up to its
		// entry; saying so keeps the joiner from waiting for those clocks.
		entry := n.entryOf[m]
		e := MemberEntry{ID: m, Live: n.live.up(m), Entry: entry, High: max(min(n.vc.Get(m), n.committedClock), entry)}
		e.Last, e.Left = n.left[m]
		for c := range n.vc.aheadOf(m) {
			if c <= n.committedClock {
				e.Ahead = append(e.Ahead, c)
			}
		}
		slices.Sort(e.Ahead)
		s.Members = append(s.Members, e)
	}
	return s
}

// start puts a new node at a snapshot: its rows, the updates they hold, and
// its own clock at the rows' clock. The node's own id is added as a member
// with entry Clock if the snapshot does not list it.
func (n *Node) start(s *Snapshot) error {
	if len(s.View) != len(n.committed) {
		return fmt.Errorf("%w: %d parameters, the model has %d", ErrSnapshot, len(s.View), len(n.committed))
	}
	copy(n.committed, s.View)
	n.work = nil
	for _, e := range s.Members {
		if e.ID != n.cfg.ID && e.Entry <= e.High {
			n.fromSnapshot += e.High - e.Entry + uint64(len(e.Ahead))
		}
	}
	n.committedClock = s.Clock
	n.clock = s.Clock
	n.joinedAt = s.Clock
	for _, e := range s.Members {
		switch {
		case e.ID == "":
			return fmt.Errorf("%w: a member without an id", ErrSnapshot)
		case e.Entry > e.High:
			return fmt.Errorf("%w: member %q holds up to %d, below its entry clock %d", ErrSnapshot, e.ID, e.High, e.Entry)
		case e.High > max(s.Clock, e.Entry):
			return fmt.Errorf("%w: member %q holds up to %d, above the rows' clock %d", ErrSnapshot, e.ID, e.High, s.Clock)
		}
		n.insertMember(e.ID)
		n.live.set(e.ID, e.Live)
		n.proto.overlayKeyStale = true
		n.vc.Set(e.ID, e.High)
		if e.ID != n.cfg.ID && e.Entry > 0 {
			n.setEntry(e.ID, e.Entry)
			n.entries += e.Entry
		}
		for _, c := range e.Ahead {
			if c <= e.High || c > s.Clock {
				return fmt.Errorf("%w: member %q lists clock %d outside (%d, %d]", ErrSnapshot, e.ID, c, e.High, s.Clock)
			}
			n.vc.Add(e.ID, c)
		}
		if e.Left && e.ID != n.cfg.ID {
			n.markLeft(e.ID, e.Last)
		}
	}
	// The joiner's own updates start after the rows' clock; whatever the
	// snapshot said of this id (a member id is never reused) is replaced.
	n.insertMember(n.cfg.ID)
	n.live.set(n.cfg.ID, true)
	n.vc.Set(n.cfg.ID, s.Clock)
	n.entries += s.Clock
	n.setEntry(n.cfg.ID, s.Clock)
	n.setLive(n.cfg.ID, true)
	n.retireLeavers()
	n.rebuildRouter()
	return nil
}

// insertMember adds id to the sorted member list if it is not there; it
// reports whether it was added. The live set is not changed.
func (n *Node) insertMember(id string) bool {
	i, ok := slices.BinarySearch(n.members, id)
	if ok {
		return false
	}
	n.members = slices.Insert(n.members, i, id)
	n.memberSlots = slices.Insert(n.memberSlots, i, n.vc.intern(id))
	if n.memberAt != nil {
		n.indexMember(id)
	}
	return true
}

// indexMember gives member id its slot: the vector clock's, so that one
// lookup finds both its entries and its frames.
func (n *Node) indexMember(id string) {
	i := n.vc.intern(id)
	n.memberAt, n.logs = reach(n.memberAt, i), reach(n.logs, i)
	n.memberAt[i] = true
}

// memberSlot returns member id's slot (see indexMember), or -1 when id is
// no member.
func (n *Node) memberSlot(id string) int { return n.memberSlotAt(n.vc.slot(id)) }

// memberSlotAt is memberSlot for the origin the slot table gave slot i
// (-1 for none).
func (n *Node) memberSlotAt(i int) int {
	if i = n.vc.slotAt(i); i >= 0 && i < len(n.memberAt) && n.memberAt[i] {
		return i
	}
	return -1
}

// addMember is the view part of AddMember: the member list, the vector
// clock entry and the router.
func (n *Node) addMember(id string, entry uint64) {
	if id == "" || id == n.cfg.ID {
		return
	}
	if n.insertMember(id) {
		before := n.vc.Get(id)
		n.vc.Set(id, max(before, entry))
		n.entries += n.vc.Get(id) - before
		n.setEntry(id, entry)
		n.rebuildRouter()
	}
	n.setLive(id, true)
	delete(n.left, id)
	delete(n.leaving, id)
	n.commit()
}

// leave is the view part of Leave.
func (n *Node) leave(id string, last uint64) {
	if _, ok := slices.BinarySearch(n.members, id); !ok || id == n.cfg.ID {
		return
	}
	n.markLeft(id, last)
	delete(n.outbox, id) // it is gone, whether or not it is still waited for
	n.retireLeavers()
}

// markLeft records member id's departure after last; a live member is
// waited for until its updates up to last are in (retireLeavers).
func (n *Node) markLeft(id string, last uint64) {
	if n.left == nil {
		n.left, n.leaving = map[string]uint64{}, map[string]uint64{}
	}
	n.left[id] = last
	if n.live.up(id) {
		n.leaving[id] = last
		n.overlayChanged(id)
	}
}

// Leaving reports whether member id announced its departure and is still
// live because some of its updates up to its last have not arrived.
func (n *Node) Leaving(id string) bool {
	_, ok := n.leaving[id]
	return ok
}

// retireLeavers takes out of the live set every member that left and whose
// updates up to its last are all in the view, and acknowledges its leave,
// which onLeave held back for them.
func (n *Node) retireLeavers() {
	var done []string
	for id, last := range n.leaving {
		if n.vc.Get(id) >= last {
			done = append(done, id)
		}
	}
	// In member order: the acknowledgements are messages, and a map's
	// order would make a simulation's run differ from its replay.
	slices.Sort(done)
	for _, id := range done {
		last := n.leaving[id]
		n.peerDown(id) // deletes it from leaving
		n.ackLeave(id, last)
	}
}

// setEntry records a member's entry clock, and counts it among the vector
// clock entries without updates behind them.
func (n *Node) setEntry(id string, entry uint64) {
	if n.entryOf == nil {
		n.entryOf = map[string]uint64{}
	}
	n.entryOf[id] = entry
}

// Ledger accounts for the updates in the node's view: fromSnapshot came in
// its starting rows, applied were applied since (its own included), held
// is how many distinct updates the vector clock says the view holds. Every
// update applied exactly once means fromSnapshot + applied == held.
func (n *Node) Ledger() (fromSnapshot, applied, held uint64) {
	for _, m := range n.members {
		held += n.vc.Get(m) + uint64(len(n.vc.aheadOf(m)))
	}
	return n.fromSnapshot, n.stats.UpdatesApplied, held - n.entries
}

// Members returns every member ever admitted, live or not, sorted.
func (n *Node) Members() []string { return slices.Clone(n.members) }

// SetRouter replaces the overlay, as the driver does when membership
// changes. nil returns to a full mesh over the members.
func (n *Node) SetRouter(r Router) {
	n.cfg.Router = r
	n.proto.overlayStale = false
	n.rebuildRouter()
}

func (n *Node) rebuildRouter() {
	if n.cfg.Router != nil {
		n.router = n.cfg.Router
		return
	}
	n.router = NewFullMesh(n.members)
}
