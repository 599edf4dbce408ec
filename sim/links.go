package sim

// The link model: each message waits for its link, its transmission time
// at the link's bandwidth and the one-way latency, and may be lost,
// duplicated or held back as the network and the scenario say. What waits
// for a busy link is the sender's queue, kept as the daemon keeps it
// (mesh's sendQueue, and the testnet's emulated links): announcements go
// ahead of the update traffic that has not started, and update traffic
// past SendQueueBytes is dropped, oldest first. With one FIFO per link, as
// before, a hello on a saturated link waited behind seconds of frames,
// where the daemon and the testnet send it first.

import (
	"slices"

	"github.com/sketchmesh/sketchmesh/node"
)

// deliver hands an arriving message to its node, unless the node is dead or
// cut off from the sender.
func (s *worker) deliver(ev simEvent) {
	to := s.nodes[ev.node]
	switch {
	case !to.alive:
		s.drop(ev.from, ev.node, len(ev.data), "dead")
		return
	case s.nodes[ev.from].group != to.group:
		s.drop(ev.from, ev.node, len(ev.data), "partition")
		return
	}
	s.trace.words(trDeliver, uint64(s.now), uint64(ev.from), uint64(ev.node), uint64(len(ev.data)))
	to.core.Receive(s.nodes[ev.from].id, ev.data)
	if !s.cfg.keepEnvelopes {
		// The event held the message's only reference (a duplicate
		// travels as a copy, see transmit).
		s.queues.Recycle(ev.data)
	}
	switch {
	case s.flushDly == 0:
		s.cause = causeAtOnce
		s.flush(to)
	case !to.flushArmed && !to.computing:
		// A node that computes sends what arrived with its own update.
		to.flushArmed = true
		to.window++
		s.schedule(s.now+s.flushDly, evFlush, ev.node, int32(to.window), to.inc, nil)
	}
	s.advance(to)
}

func (s *worker) drop(from, to int32, size int, reason string) {
	s.dropped[reason]++
	var code uint64
	switch reason {
	case "loss":
		code = 1
	case "partition":
		code = 2
	case "dead":
		code = 3
	case "queue":
		code = 4
	}
	s.trace.words(trDrop, uint64(s.now), uint64(from), uint64(to), uint64(size), code)
}

// linkKey names the directed link from → to in sim.busy.
func linkKey(from, to int32) uint64 { return uint64(uint32(from))<<32 | uint64(uint32(to)) }

// sweepLinks forgets the links free by now. A fresh map, since a map
// does not give back the room of the entries deleted from it.
func (s *worker) sweepLinks() {
	busy := make(map[uint64]int64, len(s.busy)/2)
	for link, free := range s.busy {
		if free > s.now {
			busy[link] = free
		}
	}
	s.busy, s.busyKept = busy, len(busy)
}

// send puts one message on the link from → to: at once when the link is
// free, else in the link's queue.
func (s *worker) send(from, to int32, data []byte) {
	size := len(data)
	urgent := node.IsAnnouncement(data)
	switch {
	case urgent:
		s.memberMsgs++
		s.memberBytes += uint64(size)
	default:
		s.msgs++
		s.bytes += uint64(size)
		cause := s.cause
		if node.IsSyncMessage(data) {
			cause = causeSyncRequest
			s.syncMsgs++
			s.syncBytes += uint64(size)
		}
		s.sentBy[cause]++
	}
	link := linkKey(from, to)
	q := s.waiting[link]
	if q == nil && s.busy[link] <= s.now {
		s.transmit(from, to, data)
		return
	}
	if q == nil {
		q = &linkQueue{inc: s.nodes[from].inc}
		s.waiting[link] = q
		s.schedule(s.busy[link], evLinkFree, to, from, 0, nil)
	}
	if inc := s.nodes[from].inc; q.inc != inc {
		s.dropQueued(from, to, q) // what the sender's last life queued
		q.inc = inc
	}
	for _, d := range q.push(data, urgent, s.queueLimit) {
		s.drop(from, to, len(d), "queue")
	}
}

// linkFree starts the next message waiting on the link from → to, which
// is free now. What a sender queued before it stopped went with it.
func (s *worker) linkFree(from, to int32) {
	link := linkKey(from, to)
	q := s.waiting[link]
	if q == nil {
		return
	}
	if a := s.nodes[from]; !a.alive || a.inc != q.inc {
		s.dropQueued(from, to, q)
	}
	if !q.empty() {
		s.transmit(from, to, q.pop())
	}
	if q.empty() {
		delete(s.waiting, link)
		return
	}
	// A message cut by a partition took no time on the link.
	s.schedule(max(s.busy[link], s.now), evLinkFree, to, from, 0, nil)
}

// dropQueued drops everything q holds for the link from → to, whose
// sender stopped.
func (s *worker) dropQueued(from, to int32, q *linkQueue) {
	for _, d := range q.urgent {
		s.drop(from, to, len(d), "dead")
	}
	for _, d := range q.data {
		s.drop(from, to, len(d), "dead")
	}
	*q = linkQueue{inc: q.inc}
}

// transmit puts data on the link from → to, free now: it occupies the link
// for its transmission time and arrives a latency later, unless lost.
func (s *worker) transmit(from, to int32, data []byte) {
	size := len(data)
	a, b := s.nodes[from], s.nodes[to]
	if a.group != b.group {
		s.drop(from, to, size, "partition")
		return
	}
	link := linkKey(from, to)
	done := s.now + int64(float64(size)/s.bw[a.site][b.site]*1e9)
	s.busy[link] = done
	if len(s.busy) > max(4096, 2*s.busyKept) {
		s.sweepLinks()
	}
	if s.net.Loss > 0 && s.rng.Float64() < s.net.Loss {
		s.drop(from, to, size, "loss")
		return
	}
	lat := s.lat[a.site][b.site]
	arrive := done + lat + s.jitterDelay()
	if s.net.Reorder > 0 && s.rng.Float64() < s.net.Reorder {
		arrive += max(lat, 1)
	}
	s.schedule(arrive, evDeliver, to, from, 0, data)
	if s.net.Duplicate > 0 && s.rng.Float64() < s.net.Duplicate {
		s.dups++
		extra := s.jitterDelay()
		if extra == 0 {
			extra = lat/10 + 1
		}
		s.schedule(arrive+extra, evDeliver, to, from, 0, slices.Clone(data))
	}
}

// linkQueue is what waits for one busy link: announcements, then update
// traffic, each in the order sent.
type linkQueue struct {
	urgent, data [][]byte
	// dataBytes is the size of data, which the bound counts (as the
	// daemon's does); inc is the sender's incarnation when it queued.
	dataBytes int
	inc       uint32
}

// push queues msg and returns the update messages dropped, oldest first,
// to keep the update traffic within limit bytes (announcements do not
// count, and the newest message is kept).
func (q *linkQueue) push(msg []byte, urgent bool, limit int) (dropped [][]byte) {
	if urgent {
		q.urgent = append(q.urgent, msg)
		return nil
	}
	q.data = append(q.data, msg)
	q.dataBytes += len(msg)
	for q.dataBytes > limit && len(q.data) > 1 {
		dropped = append(dropped, q.data[0])
		q.dataBytes -= len(q.data[0])
		q.data[0] = nil
		q.data = q.data[1:]
	}
	return dropped
}

// pop takes the next message: the oldest announcement, else the oldest
// update message. The queue must not be empty.
func (q *linkQueue) pop() []byte {
	if len(q.urgent) > 0 {
		msg := q.urgent[0]
		q.urgent[0], q.urgent = nil, q.urgent[1:]
		return msg
	}
	msg := q.data[0]
	q.data[0], q.data = nil, q.data[1:]
	q.dataBytes -= len(msg)
	return msg
}

func (q *linkQueue) empty() bool { return len(q.urgent) == 0 && len(q.data) == 0 }

func (s *worker) jitterDelay() int64 {
	if s.jitter == 0 {
		return 0
	}
	return int64(s.rng.ExpFloat64() * s.jitter)
}
