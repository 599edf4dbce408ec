package sim

// The link model: each message waits for its link, its transmission time
// at the link's bandwidth and the one-way latency, and may be lost,
// duplicated or held back as the network and the scenario say.

import (
	"github.com/sketchmesh/sketchmesh/node"
)

// deliver hands an arriving message to its node, unless the node is dead or
// cut off from the sender.
func (s *sim) deliver(ev simEvent) {
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

func (s *sim) drop(from, to int32, size int, reason string) {
	s.dropped[reason]++
	var code uint64
	switch reason {
	case "loss":
		code = 1
	case "partition":
		code = 2
	case "dead":
		code = 3
	}
	s.trace.words(trDrop, uint64(s.now), uint64(from), uint64(to), uint64(size), code)
}

// linkKey names the directed link from → to in sim.busy.
func linkKey(from, to int32) uint64 { return uint64(uint32(from))<<32 | uint64(uint32(to)) }

// sweepLinks forgets the links free by now. A fresh map, since a map
// does not give back the room of the entries deleted from it.
func (s *sim) sweepLinks() {
	busy := make(map[uint64]int64, len(s.busy)/2)
	for link, free := range s.busy {
		if free > s.now {
			busy[link] = free
		}
	}
	s.busy, s.busyKept = busy, len(busy)
}

// send puts one message on the link from → to.
func (s *sim) send(from, to int32, data []byte) {
	size := len(data)
	switch {
	case node.IsAnnouncement(data):
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
	a, b := s.nodes[from], s.nodes[to]
	if a.group != b.group {
		s.drop(from, to, size, "partition")
		return
	}
	link := linkKey(from, to)
	start := max(s.now, s.busy[link])
	done := start + int64(float64(size)/s.bw[a.site][b.site]*1e9)
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
		s.schedule(arrive+extra, evDeliver, to, from, 0, data)
	}
}

func (s *sim) jitterDelay() int64 {
	if s.jitter == 0 {
		return 0
	}
	return int64(s.rng.ExpFloat64() * s.jitter)
}
