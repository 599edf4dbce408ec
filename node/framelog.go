package node

import (
	"bytes"
	"cmp"
	"slices"
)

// Logs of kept frames.
//
// A core keeps, per member, the frames of the member's last updates that
// others may ask for again (retainAt): about a sync window of clocks each,
// P logs per core and P² in a simulator, where a slice of pointers per
// member and core (a 24-byte header and a backing array grown to 8
// entries) was as large as the member's record. The cores on one slot
// table keep the same frames of the same members, one shared entry per
// frame (DecodeCache), over runs of consecutive clocks: the table holds,
// per member, one timeline of those entries by clock, each counting the
// logs that hold it, and a core's log is a run of clocks in it (frameLog,
// 8 bytes). A log that is not a run of the timeline's entries (a gap
// below an update that came ahead of it, or another frame for one clock
// than the other cores keep) is a list of its own until it is one again.
// A core on a table of its own (a daemon's) has timelines of its own; the
// log holds the same frames either way.

// frameLog is a core's log of kept frames of one member: n clocks of the
// member's timeline from the one whose low 32 bits are lo, or, when the top
// bit of n (ownLog) is set, the core's list of its own (Node.ownLogs).
// Eight bytes, P² of them in a simulator: a run's first clock is read
// against the timeline's base (start), which lies less than 2³² clocks
// below it, since the timeline holds the run's entries.
type frameLog struct {
	lo, n uint32
}

// ownLog marks a frameLog that is a list of the core's own.
const ownLog = 1 << 31

// own reports whether the log is a list of the core's own.
func (l frameLog) own() bool { return l.n&ownLog != 0 }

// start returns the first clock of a run log of tl, which holds n > 0
// frames.
func (l frameLog) start(tl *timeline) uint64 { return tl.base + uint64(l.lo-uint32(tl.base)) }

// holds reports whether the run log holds clock c; follows whether c is
// the clock after its last. Both compare the low 32 bits: a member's
// updates a core keeps lie within its history of each other.
func (l frameLog) holds(c uint64) bool   { return l.n > 0 && uint32(c)-l.lo < l.n }
func (l frameLog) follows(c uint64) bool { return l.n == 0 || uint32(c) == l.lo+l.n }

// timeline is the kept entries of one member's frames by clock, from
// base on, with the number of logs holding each; an entry no log holds is
// nil, and those at either end are trimmed.
type timeline struct {
	base    uint64
	entries []timelineEntry
}

type timelineEntry struct {
	k    *keptUpdate
	refs int32
}

// timeline returns slot q's timeline, made on first use.
func (t *SlotTable) timeline(q int) *timeline {
	t.timelines = reach(t.timelines, q)
	return &t.timelines[q]
}

// at returns the entry of clock c, or nil.
func (l *timeline) at(c uint64) *keptUpdate {
	if c < l.base || c-l.base >= uint64(len(l.entries)) {
		return nil
	}
	return l.entries[c-l.base].k
}

// hold adds a log's hold on k, kept for k.clock, and returns the entry
// the log holds: k, or the entry of equal clock, frame and signature the
// timeline has already. It returns nil, holding nothing, when the timeline
// has another frame or signature at that clock.
func (l *timeline) hold(k *keptUpdate) *keptUpdate {
	c := k.clock
	switch {
	case len(l.entries) == 0:
		l.base = c
		l.entries = append(l.entries[:0], timelineEntry{})
	case c < l.base:
		grown := make([]timelineEntry, l.base-c+uint64(len(l.entries)), l.base-c+uint64(cap(l.entries)))
		copy(grown[l.base-c:], l.entries)
		l.base, l.entries = c, grown
	case c-l.base >= uint64(len(l.entries)):
		l.entries = append(l.entries, make([]timelineEntry, c-l.base+1-uint64(len(l.entries)))...)
	}
	e := &l.entries[c-l.base]
	switch {
	case e.k == nil:
		e.k = k
	case e.k != k && !(bytes.Equal(e.k.frame, k.frame) && bytes.Equal(e.k.sig, k.sig)):
		l.trim()
		return nil
	}
	e.refs++
	return e.k
}

// release drops a log's hold on the entry of clock c.
func (l *timeline) release(c uint64) {
	e := &l.entries[c-l.base]
	if e.refs--; e.refs == 0 {
		e.k = nil
		l.trim()
	}
}

// trim drops the entries no log holds at either end.
func (l *timeline) trim() {
	k := 0
	for k < len(l.entries) && l.entries[k].refs == 0 {
		k++
	}
	l.base += uint64(k)
	l.entries = l.entries[k:]
	for len(l.entries) > 0 && l.entries[len(l.entries)-1].refs == 0 {
		l.entries = l.entries[:len(l.entries)-1]
	}
	if len(l.entries) == 0 {
		l.entries, l.base = nil, 0
	}
}

// logLen returns how many frames the log of slot i holds.
func (n *Node) logLen(i int) int {
	if l := n.logs[i]; !l.own() {
		return int(l.n)
	}
	return len(n.ownLogs[i])
}

// logOf returns the log of slot i as a list, sorted by clock, in a slice
// that is valid until the next call and must not be modified.
func (n *Node) logOf(i int) []retained {
	l := n.logs[i]
	if l.own() {
		return n.ownLogs[i]
	}
	n.logBuf = n.logBuf[:0]
	if l.n > 0 {
		tl := n.vc.table.timeline(i)
		for c, end := l.start(tl), l.start(tl)+uint64(l.n); c < end; c++ {
			n.logBuf = append(n.logBuf, retained{tl.at(c)})
		}
	}
	return n.logBuf
}

// retainAt keeps r as the update of its clock of the origin of member slot
// i (memberSlot), and drops what the retention rules no longer require.
func (n *Node) retainAt(i int, origin string, r retained) {
	if i < 0 {
		return
	}
	l := n.logs[i]
	if !l.own() {
		switch clock := r.clock; {
		case l.holds(clock):
			return // held
		case l.follows(clock):
			// In clock order, the usual case.
			if k := n.vc.table.timeline(i).hold(r.keptUpdate); k != nil {
				if l.n == 0 {
					l.lo = uint32(clock)
				}
				l.n++
				n.logs[i] = l
				n.retainedOne(len(k.frame))
				n.dropRun(i, origin)
				return
			}
		}
		n.ownLog(i)
	}
	n.retainOwn(i, origin, r)
	n.compactLog(i)
}

// retainedOne counts a frame of size bytes kept.
func (n *Node) retainedOne(size int) {
	n.bytes += size
	n.count++
}

// dropCount returns how many of the oldest frames of a log of origin, of
// length k whose oldest frames droppable reports on (the first the oldest)
// and whose newest clock is newest, the retention rules drop.
func (n *Node) dropCount(origin string, k int, newest uint64, droppable func(int) bool) int {
	drop := 0
	// The cheap tests before the live lookup.
	keepCutOff := origin != n.cfg.ID && n.cutOff != nil && n.keepsCutOff(origin)
	if origin != n.cfg.ID && !n.degraded && !keepCutOff && droppable(0) && n.live.up(origin) {
		for drop < k && droppable(drop) {
			drop++
		}
	}
	keep := n.sc.History
	if keepCutOff {
		keep *= 2
	}
	return max(drop, k-keep)
}

// droppable reports whether a frame of clock c, in a log whose newest
// clock is newest, is no longer required by itself: older than the sync
// window, and in the committed rows.
func (n *Node) droppable(c, newest uint64) bool {
	return c+uint64(n.sc.Window) <= newest && c <= n.committedClock
}

// dropRun drops from the run log of slot i what the retention rules no
// longer require.
func (n *Node) dropRun(i int, origin string) {
	l := n.logs[i]
	tl := n.vc.table.timeline(i)
	lo := l.start(tl)
	newest := lo + uint64(l.n) - 1
	drop := n.dropCount(origin, int(l.n), newest, func(j int) bool { return n.droppable(lo+uint64(j), newest) })
	if drop == 0 {
		return
	}
	for c := lo; c < lo+uint64(drop); c++ {
		n.bytes -= len(tl.at(c).frame)
		tl.release(c)
	}
	n.count -= drop
	l.lo += uint32(drop)
	l.n -= uint32(drop)
	n.logs[i] = l
}

// retainOwn is retainAt for a log that is a list of its own.
func (n *Node) retainOwn(i int, origin string, r retained) {
	clock := r.clock
	log := n.ownLogs[i]
	// Frames mostly come in clock order: append without a search.
	if len(log) == 0 || log[len(log)-1].clock < clock {
		log = append(log, r)
	} else {
		j, found := slices.BinarySearchFunc(log, clock, func(r retained, c uint64) int { return cmp.Compare(r.clock, c) })
		if found {
			return
		}
		log = slices.Insert(log, j, r)
	}
	n.retainedOne(len(r.frame))
	newest := log[len(log)-1].clock
	drop := n.dropCount(origin, len(log), newest, func(j int) bool { return n.droppable(log[j].clock, newest) })
	for _, r := range log[:drop] {
		n.bytes -= len(r.frame)
	}
	n.count -= drop
	if drop > 0 {
		// Copy down rather than reslice, so the dropped frames are freed.
		log = slices.Delete(log, 0, drop)
	}
	n.ownLogs[i] = log
}

// ownLog turns the run log of slot i into a list of its own, releasing
// the timeline's entries.
func (n *Node) ownLog(i int) {
	l := n.logs[i]
	log := make([]retained, 0, l.n+1)
	if l.n > 0 {
		tl := n.vc.table.timeline(i)
		for c, end := l.start(tl), l.start(tl)+uint64(l.n); c < end; c++ {
			log = append(log, retained{tl.at(c)})
			tl.release(c)
		}
	}
	if n.ownLogs == nil {
		n.ownLogs = map[int][]retained{}
	}
	n.ownLogs[i] = log
	n.logs[i] = frameLog{n: ownLog}
}

// compactLog turns the log of slot i, a list of its own, back into a run
// of the timeline when it is one: empty, or consecutive clocks whose
// frames the timeline has or can take.
func (n *Node) compactLog(i int) {
	log := n.ownLogs[i]
	if len(log) > 0 && log[len(log)-1].clock-log[0].clock != uint64(len(log)-1) {
		return // a gap
	}
	tl := n.vc.table.timeline(i)
	for j, r := range log {
		if tl.hold(r.keptUpdate) == nil {
			for _, h := range log[:j] {
				tl.release(h.clock)
			}
			return
		}
	}
	var l frameLog
	if len(log) > 0 {
		l = frameLog{lo: uint32(log[0].clock), n: uint32(len(log))}
	}
	n.logs[i] = l
	delete(n.ownLogs, i)
}

// DropSharedLogs releases the node's holds on the logs of kept frames it
// shares with the other nodes on its slot table, for a driver that drops
// the node (a simulator's node gone for good); the node must not be used
// after.
func (n *Node) DropSharedLogs() {
	for i, l := range n.logs {
		if l.own() || l.n == 0 {
			continue
		}
		tl := n.vc.table.timeline(i)
		for c, end := l.start(tl), l.start(tl)+uint64(l.n); c < end; c++ {
			tl.release(c)
		}
	}
	n.logs, n.ownLogs = nil, nil
}
