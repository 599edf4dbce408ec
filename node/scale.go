package node

import "slices"

// The step scale, and suspected members.
//
// Every member scales its update by 1/k, its share of the mesh-wide step,
// so that a row, once it holds every member's update of its clock, moves the
// model by one step of the mean gradient. k must therefore count the members
// whose updates of that clock will end up in the row, and no others:
//
//   - a member that is down because it died (PeerDown, DeclareDead) or left
//     (Leave) sends no more updates, so its share goes to the others: the
//     rows stay one full step each;
//   - a member that is down because it cannot be reached (Suspect: cut off
//     by a partition) goes on training; its updates join the rows, committed
//     or not, when it can be reached again. It keeps its share: counting it
//     out would make each side of a partition take full steps by itself, and
//     the rows the sides trained through would hold the sum of those steps
//     once the partition heals, one step per side instead of one.
//
// A suspected member is down for everything but the scale: the gate and the
// commit of rows do not wait for it, nothing is routed to it, and the node
// keeps every frame while it is down, as for any member down without notice.
// Which of the two a silent member is, the core cannot tell; the driver
// decides, as it decides liveness. PeerUp returns either to the live set.
//
// Frames of sufficient factors (Config.Factors) take their scale from the
// live members alone for now; with a suspected member they are larger than
// the delta frames would be.
//
// A suspected member is one of the node's members with no entry in the
// live map (PeerDown leaves a dead member's entry there, false); every
// place that writes the map (New, setLive, start) writes an entry, so only
// Suspect removes one.

// suspect is the view part of Suspect: the live set and the step scale.
func (n *Node) suspect(id string) {
	if id == n.cfg.ID || !n.isMember(id) {
		return
	}
	if _, gone := n.left[id]; gone {
		return
	}
	if n.live.up(id) {
		n.peerDown(id)
	}
	n.live.forget(id)
}

// declareDead is the view part of DeclareDead.
func (n *Node) declareDead(id string) {
	if !n.Suspected(id) {
		n.peerDown(id)
		return
	}
	n.live.set(id, false)
}

// liveSet is what a node knows of its members' liveness, by vector clock
// slot: up, down, or not known (suspected: see Suspect). A map by id cost
// each simulated core about 40 bytes per member; this is one.
type liveSet struct {
	vc    *VectorClock
	state []uint8
	known int
}

const (
	liveUnknown uint8 = iota
	liveDown
	liveUp
)

// get reports whether m is up, and whether its liveness is known.
func (l *liveSet) get(m string) (up, known bool) {
	state := l.at(l.vc.slot(m))
	return state == liveUp, state != liveUnknown
}

// at is the liveness of slot i: liveUp, liveDown or liveUnknown.
func (l *liveSet) at(i int) uint8 {
	if i < 0 || i >= len(l.state) {
		return liveUnknown
	}
	return l.state[i]
}

// up reports whether m is up.
func (l *liveSet) up(m string) bool {
	up, _ := l.get(m)
	return up
}

// set records m as up or down.
func (l *liveSet) set(m string, up bool) { l.setAt(l.vc.intern(m), up) }

// setAt is set by slot, for a member the vector clock has interned.
func (l *liveSet) setAt(i int, up bool) {
	l.state = reach(l.state, i)
	if l.state[i] == liveUnknown {
		l.known++
	}
	l.state[i] = liveDown
	if up {
		l.state[i] = liveUp
	}
}

// forget makes m's liveness not known.
func (l *liveSet) forget(m string) {
	if i := l.vc.slot(m); i >= 0 && i < len(l.state) && l.state[i] != liveUnknown {
		l.state[i] = liveUnknown
		l.known--
	}
}

// len returns how many members' liveness is known.
func (l *liveSet) len() int { return l.known }

// Suspected reports whether member id is suspected (see Suspect).
func (n *Node) Suspected(id string) bool {
	if _, gone := n.left[id]; gone || !n.isMember(id) {
		return false
	}
	_, known := n.live.get(id)
	return !known
}

// SuspectsNone reports, in O(1), that Suspected is false for every member:
// the live set holds them all. It may report false when none is suspected
// (a member that left and is not yet dropped): ask Suspected then.
func (n *Node) SuspectsNone() bool { return n.live.len() == len(n.members) }

// Shares returns the number of members the step is divided among: the live
// ones, the node itself included, and the suspected ones.
func (n *Node) Shares() int {
	k := len(n.liveList)
	if n.SuspectsNone() {
		return k
	}
	for _, m := range n.members {
		if _, known := n.live.get(m); !known {
			if _, gone := n.left[m]; !gone {
				k++
			}
		}
	}
	return k
}

// stepScale is the factor Train scales its update by, 1/Shares().
func (n *Node) stepScale() float64 { return 1 / float64(n.Shares()) }

func (n *Node) isMember(id string) bool {
	if n.memberAt != nil {
		// Kept with the member list (insertMember) once New has made it.
		return n.memberSlot(id) >= 0
	}
	_, ok := slices.BinarySearch(n.members, id)
	return ok
}

// Suspect takes member id out of the live set, as PeerDown does, but keeps
// its share of the step (see above): the member is presumed alive and cut
// off. It applies to a live or a dead member; PeerUp ends the suspicion with
// the member back, DeclareDead with the member dead (PeerDown does nothing
// to a suspected member: it is down already). The node's own id, members
// that left and ids that are not members are ignored. The failure detector
// (Tick) calls it; a driver may too.
func (n *Node) Suspect(id string) {
	n.suspect(id)
	n.updateDegraded()
}

// DeclareDead takes member id out of the live set and out of the step
// scale: PeerDown for a live member, the end of the suspicion for a
// suspected one.
func (n *Node) DeclareDead(id string) {
	n.declareDead(id)
	n.updateDegraded()
}
