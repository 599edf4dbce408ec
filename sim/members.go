package sim

// Members that come and go: joins through a donor core's Admit, rejoins by
// snapshot after falling behind the history, leaves with notice, stops.

import (
	"fmt"
	"slices"
	"time"

	"github.com/sketchmesh/sketchmesh/node"
)

// join starts member i from the snapshot of a live member started before
// the step (first is the first node the step starts), one of via when the
// step names donors: the donor's core
// admits it (node.Node.Admit), broadcasts the signed admit, and the
// joiner starts from the snapshot with its admission, which its hellos
// carry to any member the admit missed.
func (s *sim) join(i, first int, via []int) error {
	var donors []*simNode
	for _, n := range s.nodes[:first] {
		if n.alive && !n.leaving && (via == nil || slices.Contains(via, n.idx)) {
			donors = append(donors, n)
		}
	}
	if len(donors) == 0 {
		return fmt.Errorf("join of node %d: no live member to join through", i)
	}
	donor := donors[s.rng.IntN(len(donors))]
	snap, adm, err := donor.core.Admit(s.ids[i], nil)
	if err != nil {
		return fmt.Errorf("join of node %d through node %d: %w", i, donor.idx, err)
	}
	n := &simNode{idx: i, id: s.ids[i], site: i % s.cfg.WAN.Sites, alive: true, slow: 1, group: donor.group}
	s.nodes = append(s.nodes, n)
	s.joined++
	if n.core, err = s.newCore(i, &snap, &adm); err != nil {
		return err
	}
	s.startFrom(n, donor, &snap)
	return nil
}

// rejoin starts n again as a new incarnation from a snapshot of the member
// its core named (or, if that one is no longer up, of another member whose
// gone updates it lacks, node.Node.RejoinDonors), as a real node does when
// it fell behind the frame history (node/catchup.go). It reports whether n
// rejoined.
func (s *sim) rejoin(n *simNode) bool {
	var donor *simNode
	for _, id := range n.core.RejoinDonors() {
		if i, ok := s.index[id]; ok && donor == nil {
			if m := s.nodes[i]; m.id == id && m.member() && m.group == n.group && m.core.Rejoining() == "" {
				donor = m
			}
		}
	}
	if donor == nil {
		return false
	}
	id := fmt.Sprintf("%s/%d", s.ids[n.idx], n.incarnation+1)
	snap, adm, err := donor.core.Admit(id, nil)
	if err != nil {
		return false
	}
	core, err := s.newCoreAs(n.idx, id, &snap, &adm)
	if err != nil {
		return false
	}
	s.workerOf(int32(n.idx)).endStall(n)
	n.incarnation++
	s.retire(n)
	n.core, n.id = core, id
	s.index[id] = int32(n.idx)
	n.computing, n.done, n.flushArmed, n.declaredDead = false, false, false, nil
	n.inc++
	s.rejoins++
	s.startFrom(n, donor, &snap)
	return true
}

// startFrom runs n's new core from donor's snapshot: it takes the frames
// above the snapshot's rows, starts its anti-entropy and ticks, and sends
// what the join queued at both ends.
func (s *sim) startFrom(n, donor *simNode, snap *node.Snapshot) {
	s.trace.words(trJoin, uint64(s.now), uint64(n.idx), uint64(donor.idx), snap.Clock)
	if len(snap.Pending) > 0 {
		n.core.Receive(donor.id, node.EncodeEnvelope(snap.Pending))
	}
	s.schedule(s.now+s.tick, evTick, int32(n.idx), 0, n.inc, nil)
	wn, wd := s.workerOf(int32(n.idx)), s.workerOf(int32(donor.idx))
	wn.cause, wd.cause = causeMembership, causeMembership
	wn.flush(n)
	wd.flush(donor)
	wn.advance(n)
	wd.advance(donor)
	s.noteDone()
}

// leave makes n leave with notice: its core sends the signed notice to
// every member it counts live and resends it each heartbeat until
// acknowledged. n stays up for that, training no more, until every notice
// is acknowledged or leaveTimeout has passed.
func (s *sim) leave(n *simNode) {
	w := s.workerOf(int32(n.idx))
	w.endStall(n)
	n.left, n.leaving, n.computing, n.done = true, true, false, false
	n.last, n.entry = n.core.Clock(), n.core.Entry()
	n.core.StartLeave()
	s.schedule(s.now+leaveTimeout, evGone, int32(n.idx), 0, n.inc, nil)
	w.cause = causeMembership
	w.flush(n)
}

// leaveTimeout bounds how long a leaver waits for acknowledgements, as
// mesh.DaemonConfig.LeaveTimeout does.
const leaveTimeout = int64(3 * time.Second)

// stopNode takes n down: it drops what arrives and does nothing more.
func (s *sim) stopNode(n *simNode) {
	s.workerOf(int32(n.idx)).endStall(n)
	n.alive, n.leaving, n.computing, n.done, n.flushArmed = false, false, false, false, false
	n.inc++
	if n.left || !s.restartable[n.idx] {
		s.retire(n)
	}
}

// retire drops n's core, which no event will use again (its node left, or
// stopped with no restart ahead, or was replaced by a rejoin), keeping what
// the report and the invariants read of it. Under churn most of the nodes
// a run started are gone by its end, and their cores (views, optimizer
// state, a record of every member) were most of the simulator's memory.
func (s *sim) retire(n *simNode) {
	if n.core == nil {
		return
	}
	st := n.core.SyncStats()
	s.retiredStats.UpdatesResent += st.UpdatesResent
	s.retiredStats.RequestsServed += st.RequestsServed
	s.retiredStats.DigestsCompared += st.DigestsCompared
	s.retiredStats.Retained += st.Retained
	s.retiredStats.StallAsks += st.StallAsks
	s.retired = append(s.retired, incarnationSpan{id: n.id, entry: n.core.Entry(), clock: n.core.Clock()})
	base, applied, held := n.core.Ledger()
	if base+applied > held {
		s.retiredTwice += base + applied - held
	}
	if base+applied != held {
		s.unbalanced = append(s.unbalanced, n.id)
	}
	n.core.DropSharedRows()
	n.core.DropSharedLogs()
	n.core = nil
}
