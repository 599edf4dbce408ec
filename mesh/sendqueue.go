package mesh

import "github.com/sketchmesh/sketchmesh/node"

// sendQueue is what waits to be written to one peer. Membership
// announcements (hellos, admits, leave notices and their acknowledgements)
// go ahead of update and sync traffic: on a link the updates saturate, a
// hello queued behind seconds of frames arrived after the suspicion
// timeout, the members took each other for dead, and every gate stopped
// waiting for updates that were only late. Announcements are small and
// their order among themselves is kept; only update traffic counts against
// the queue's bound and is dropped, oldest first, past it (what a peer lost
// it pulls when it needs it, see node.Node), while announcements past
// maxUrgentQueued are dropped oldest first too (hellos repeat, admits are
// resent with them).
type sendQueue struct {
	urgent [][]byte
	data   [][]byte
	// dataBytes is the size of data.
	dataBytes int
}

// maxUrgentQueued bounds the announcements waiting for one peer.
const maxUrgentQueued = 1024

// push queues msg and returns how many messages it dropped to stay within
// limit bytes of update traffic.
func (q *sendQueue) push(msg []byte, limit int) (dropped int) {
	if node.IsAnnouncement(msg) {
		q.urgent = append(q.urgent, msg)
		for len(q.urgent) > maxUrgentQueued {
			q.urgent[0] = nil
			q.urgent = q.urgent[1:]
			dropped++
		}
		return dropped
	}
	q.data = append(q.data, msg)
	q.dataBytes += len(msg)
	for q.dataBytes > limit && len(q.data) > 1 {
		q.dataBytes -= len(q.data[0])
		q.data[0] = nil // the dropped message can be collected
		q.data = q.data[1:]
		dropped++
	}
	return dropped
}

// pop returns the next message to write: the oldest announcement, else the
// oldest update message; ok is false when nothing waits.
func (q *sendQueue) pop() (msg []byte, ok bool) {
	switch {
	case len(q.urgent) > 0:
		msg = q.urgent[0]
		q.urgent[0] = nil
		q.urgent = q.urgent[1:]
	case len(q.data) > 0:
		msg = q.data[0]
		q.data[0] = nil
		q.data = q.data[1:]
		q.dataBytes -= len(msg)
	default:
		return nil, false
	}
	return msg, true
}

// empty reports whether nothing waits.
func (q *sendQueue) empty() bool { return len(q.urgent) == 0 && len(q.data) == 0 }

// clear drops everything that waits.
func (q *sendQueue) clear() { *q = sendQueue{} }
