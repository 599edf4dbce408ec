package node

import (
	"math"
	"slices"

	"github.com/sketchmesh/sketchmesh/codec"
	"github.com/sketchmesh/sketchmesh/sfb"
)

// receive handles one message for the view: updates are checked, applied
// and relayed; bad content is counted and dropped.
func (n *Node) receive(from string, data []byte) {
	updates, err := DecodeEnvelope(data)
	if err != nil {
		n.reject(RejectBadEnvelope)
		return
	}
	slots := make([]int, len(updates))
	for i, u := range updates {
		slots[i] = n.memberSlot(u.Origin)
	}
	n.receiveUpdates(from, updates, slots)
}

// receiveUpdates is receive for a decoded envelope; slots[i] is the member
// slot of updates[i]'s origin (memberSlot). n.spares.kept[i] is set to the
// entry kept for each update applied, which its relays and the log of kept
// frames share, and n.duplicates to whether any was refused as one held.
func (n *Node) receiveUpdates(from string, updates []Update, slots []int) {
	n.spares.kept = slices.Grow(n.spares.kept[:0], len(updates))[:len(updates)]
	clear(n.spares.kept)
	n.duplicates = false
	for i, u := range updates {
		if reason := n.acceptFrom(from, u, slots[i]); reason != "" {
			n.duplicates = n.duplicates || reason == RejectDuplicate
			n.reject(reason)
			continue
		}
		n.spares.kept[i] = n.keepDecoded(u)
		n.route(slots[i], n.spares.kept[i])
	}
	// Nothing of the envelope stays reachable: its buffer may be reused
	// (QueuePool.Recycle).
	n.decoded, n.decodedFrame = nil, nil
	n.retireLeavers()
	n.commit()
}

// accept validates u and adds it to the view; it returns the rejection
// reason, or "" when u was applied. q is u.Origin's member slot
// (memberSlot), -1 when it is no member.
func (n *Node) accept(u Update, q int) RejectReason {
	if q < 0 {
		return RejectNotMember
	}
	if u.Clock == 0 {
		return RejectBadClock
	}
	if n.vc.hasAt(q, u.Clock) {
		return RejectDuplicate
	}
	if last, gone := n.left[u.Origin]; gone && u.Clock > last {
		return RejectAfterLeave
	}
	// The rows hold only contiguous updates of each origin (see commit).
	if u.Clock <= n.committedClock && u.Clock != n.vc.getAt(q)+1 {
		return RejectLateGap
	}
	// An honest origin at clock c passed a gate that needed our entry to be
	// at least c − s − 1, and our entry is at most our own clock.
	if u.Clock > n.acceptBound() {
		return RejectClockAhead
	}
	if reason := n.verify(u); reason != "" {
		return reason
	}
	if n.refused[UpdateID{Origin: u.Origin, Clock: u.Clock}] {
		n.skip(u)
		return RejectMarkedRefused
	}
	decoded, reason := n.decode(u.Frame, q, u.Clock)
	screen := n.screen()
	if reason == "" {
		reason = screen.admitNorm(n.decodedNorm(u.Frame, decoded), n.cfg.Auth != nil)
	}
	if reason != "" {
		n.skip(u)
		return reason
	}
	if screen.cfg.Clip {
		if checked := screen.clip(*decoded, len(n.committed), true); !sameArrays(checked, *decoded) {
			// Clipped: this node's own. A copy, so that checked stays
			// off the heap for the updates that are not (an allocation
			// per update received, P² an iteration in a simulator).
			own := checked
			decoded = &own
		}
	}
	n.addAt(q, u.Origin, u.Clock, decoded)
	return ""
}

// decode turns a frame into the update it stands for, or names why it is
// refused: a codec frame is decoded as is, a factor frame is checked against
// the model's shape and the norm bound and then rebuilt into the delta. With
// a decode cache, the entry is left in n.decoded for keepDecoded; the frame
// of the update of clock from the member of slot q (-1 for none) is looked
// for among its origin's recent ones first (DecodeCache.lookupAt).
func (n *Node) decode(frame []byte, q int, clock uint64) (*codec.Sparse, RejectReason) {
	n.decoded, n.decodedFrame = nil, nil
	c := n.cfg.DecodeCache
	if c == nil {
		u, reason := n.decodeFrame(frame)
		return &u, reason
	}
	d, key := c.lookupAt(frame, q, clock)
	if d == nil {
		u, reason := n.decodeFrame(frame)
		norm := 0.0
		if reason == "" {
			norm = l2(u)
		}
		d = c.put(key, frame, decoded{u: &u, reason: reason, norm: norm})
		c.remember(q, clock, key, d)
	}
	n.decoded, n.decodedFrame = d, frame
	return d.u, d.reason
}

// decodedNorm is the L2 norm of u, which decode just returned for frame:
// the cache's, computed once for all the nodes sharing it, when it has one.
func (n *Node) decodedNorm(frame []byte, u *codec.Sparse) float64 {
	if n.sameDecoded(frame) {
		return n.decoded.norm
	}
	return l2(*u)
}

// sameDecoded reports whether frame is the one n.decoded was found for,
// the same bytes in memory: one message's frames do not move while it is
// handled, where a comparison of content would cost a second lookup.
func (n *Node) sameDecoded(frame []byte) bool {
	f := n.decodedFrame
	return n.decoded != nil && len(f) == len(frame) && len(f) > 0 && &f[0] == &frame[0]
}

// keepDecoded is keep for an update accept has just applied: the entry
// kept comes from the cache's entry decode found, without a second lookup.
func (n *Node) keepDecoded(u Update) *keptUpdate {
	if n.sameDecoded(u.Frame) {
		return n.decoded.keep(u)
	}
	return n.keep(u).keptUpdate
}

// sameArrays reports whether a and b are the same keys and values, not
// only equal ones.
func sameArrays(a, b codec.Sparse) bool {
	return len(a.Keys) == len(b.Keys) && len(a.Values) == len(b.Values) &&
		(len(a.Keys) == 0 || &a.Keys[0] == &b.Keys[0]) && (len(a.Values) == 0 || &a.Values[0] == &b.Values[0])
}

func (n *Node) decodeFrame(frame []byte) (codec.Sparse, RejectReason) {
	if sfb.IsFrame(frame) {
		m := n.cfg.Model
		f, err := sfb.Decode(frame, m.Blocks(), m.Stride())
		if err != nil {
			return codec.Sparse{}, RejectBadFactors
		}
		norm := f.Norm()
		if math.IsNaN(norm) || math.IsInf(norm, 0) {
			return codec.Sparse{}, RejectNaN
		}
		if n.cfg.MaxUpdateNorm > 0 && norm > n.cfg.MaxUpdateNorm {
			return codec.Sparse{}, RejectNorm
		}
		u := f.Reconstruct(&n.factorAcc)
		if !n.fits(u) {
			return codec.Sparse{}, RejectBadShape
		}
		if !finite(u) {
			return codec.Sparse{}, RejectNaN
		}
		return u, ""
	}
	u, err := codec.Decode(frame)
	if err != nil {
		return codec.Sparse{}, frameReason(err)
	}
	if !n.fits(u) {
		return codec.Sparse{}, RejectBadShape
	}
	if !finite(u) {
		return codec.Sparse{}, RejectNaN
	}
	return u, ""
}

func (n *Node) fits(u codec.Sparse) bool {
	size := len(n.committed)
	if u.Dense() {
		return len(u.Values) == size || len(u.Values) == 0
	}
	return len(u.Keys) == 0 || u.Keys[len(u.Keys)-1] < uint64(size)
}

// acceptBound is the highest clock an honest member can send this node. A
// node that started from a snapshot at clock j may hear, while it catches
// up, from members that ran on before they knew of it: they are at most
// 2s+2 past j (the donor at most s+1 past its rows, the others at most s+1
// past the donor).
func (n *Node) acceptBound() uint64 {
	s := uint64(n.cfg.Staleness)
	if n.cfg.Start != nil {
		return max(n.clock, n.joinedAt+2*s+2) + s + 1
	}
	return n.clock + s + 1
}

func (n *Node) add(origin string, clock uint64, u *codec.Sparse) {
	n.addAt(n.vc.intern(origin), origin, clock, u)
}

// addAt is add for the origin of vector clock slot q.
func (n *Node) addAt(q int, origin string, clock uint64, u *codec.Sparse) {
	n.vc.addAt(q, clock)
	n.stats.UpdatesApplied++
	n.tracer.Apply(origin, clock)
	if clock <= n.committedClock {
		// A late update of a row already committed without its origin (a
		// member that was down, or that joined after the row): it joins
		// the rows directly.
		n.applyCommitted(*u)
		return
	}
	row := n.pending[clock]
	if row == nil {
		row = make([]*codec.Sparse, len(n.vc.table.names))
	}
	row = reach(row, q)
	row[q] = u
	n.pending[clock] = row
	if n.rows != nil {
		n.cfg.SharedRows.addToSum(n.vc.table, clock, q, u)
	}
}

// route queues the update k of the origin of vector clock slot q for the
// next hops the router gives for this node.
func (n *Node) route(q int, k *keptUpdate) {
	origin := n.vc.nameAt(q)
	r := n.currentRouter()
	var hops []string
	if a, ok := r.(ForwardAppender); ok {
		n.hops = a.AppendForward(n.hops[:0], origin, n.cfg.ID)
		hops = n.hops
	} else {
		hops = r.Forward(origin, n.cfg.ID)
	}
	for _, hop := range hops {
		if hop == n.cfg.ID || hop == origin || !n.live.up(hop) || n.Leaving(hop) {
			continue
		}
		queue, ok := n.outbox[hop]
		if !ok {
			queue = n.spares.get()
		}
		n.outbox[hop] = append(queue, queued{k})
		if origin != n.cfg.ID {
			n.stats.UpdatesRelayed++
		}
	}
}

// commit folds every complete row into the committed view, in canonical
// order. The rows hold of each origin only updates contiguous from its
// entry: one held ahead of a gap (possible only for a member out of the
// live set, since the row waits for every live one) is withdrawn, and comes
// again in order, through anti-entropy, if the gap closes. So what lies
// above a gap nobody can close (updates that are gone, see catchup.go)
// does not enter the rows of whichever member it happened to reach.
func (n *Node) commit() {
	for {
		next := n.committedClock + 1
		if n.heldAt() || !n.allAtLeast(next) {
			return
		}
		for q, u := range n.pendingRow(next) {
			if n.vc.getAt(q) < next {
				n.vc.Withdraw(n.vc.nameAt(q), next)
				n.stats.UpdatesApplied--
				continue
			}
			n.applyCommitted(*u)
			n.local.rates.add(*u)
		}
		n.local.rates.endRow()
		delete(n.pending, next)
		n.committedClock = next
		n.recordDigest(next)
	}
}

func (n *Node) pendingClocks() []uint64 {
	clocks := make([]uint64, 0, len(n.pending))
	for c := range n.pending {
		clocks = append(clocks, c)
	}
	slices.Sort(clocks)
	return clocks
}

func (n *Node) observeStaleness() {
	low := n.MinLiveEntry()
	if low == math.MaxUint64 {
		low = 0
	}
	s := n.clock - min(n.clock, low)
	n.stats.StalenessMax = max(n.stats.StalenessMax, s)
	n.stats.StalenessSum += s
	n.stats.Reads++
}

// MinLiveEntry is the smallest vector-clock entry over the live members
// (Live), math.MaxUint64 when none is: what a read's staleness is measured
// against. It reads by slot and copies nothing (a simulator asks at each
// of P nodes' steps).
func (n *Node) MinLiveEntry() uint64 {
	low := uint64(math.MaxUint64)
	for _, q := range n.liveSlots {
		low = min(low, n.vc.getAt(q))
	}
	return low
}

func (n *Node) reject(reason RejectReason) {
	n.stats.Rejected[reason]++
	n.rejections++
	n.tracer.Reject(reason)
}

// Rejections returns how many messages and updates the node has refused
// so far, all reasons together (see Stats.Rejected).
func (n *Node) Rejections() uint64 { return n.rejections }

// Relays returns the members this node forwards origin's broadcasts to: the
// next hops of origin's tree in the overlay, as for its updates.
func (n *Node) Relays(origin string) []string {
	var out []string
	for _, hop := range n.currentRouter().Forward(origin, n.cfg.ID) {
		if hop != n.cfg.ID && hop != origin && n.live.up(hop) {
			out = append(out, hop)
		}
	}
	return out
}
