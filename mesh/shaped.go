package mesh

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/sketchmesh/sketchmesh/node"
)

// Link emulation sits in front of a Transport rather than inside the
// sender, so the production send path holds no test machinery: a testnet
// wraps each host's transport in a ShapedTransport (as memberlist's
// MockNetwork sits behind its Transport), and the daemon drives it without
// knowing. The real TCP, Noise and yamux stack still carries every byte.

// LinkShape is an emulated link: each message waits for the link to be free,
// takes len/Bandwidth to transmit, then Latency to arrive. Links are
// symmetric: the way back has the same shape.
type LinkShape struct {
	Latency time.Duration // one way
	// Bandwidth in bytes per second; 0 is unlimited.
	Bandwidth float64
}

// transmitTime is how long n bytes occupy the link.
func (l LinkShape) transmitTime(n int) time.Duration {
	if l.Bandwidth <= 0 {
		return 0
	}
	return time.Duration(float64(n) / l.Bandwidth * float64(time.Second))
}

// ShapedTransport is a Transport whose sends go out on emulated links: it
// holds each message until it would have crossed its link, then hands it
// to the transport it wraps. Messages on one link pipeline as they would on
// a real path. Round-trip probes pay the link's latency both ways.
type ShapedTransport struct {
	Transport
	shape func(to peer.ID) LinkShape
	// queueLimit bounds what waits on one link, in bytes, as
	// Limits.SendQueueBytes bounds a sender's queue.
	queueLimit int
	dropped    atomic.Uint64

	mu     sync.Mutex
	links  map[peer.ID]*shapedLink
	closed bool
	wg     sync.WaitGroup
}

// NewShapedTransport wraps inner: a message to peer p waits for the link
// shape(p) gives, and at most queueLimit bytes wait on one link (the oldest
// go first; 0 takes DefaultLimits' SendQueueBytes). Close stops it.
func NewShapedTransport(inner Transport, shape func(to peer.ID) LinkShape, queueLimit int) *ShapedTransport {
	if queueLimit <= 0 {
		queueLimit = DefaultLimits().SendQueueBytes
	}
	return &ShapedTransport{Transport: inner, shape: shape, queueLimit: queueLimit, links: map[peer.ID]*shapedLink{}}
}

// shapedLink holds the messages on their way to one peer.
type shapedLink struct {
	shape LinkShape
	wake  chan struct{}

	mu          sync.Mutex
	queue       []queued
	queuedBytes int
	// free is when the link has transmitted what was queued so far.
	free time.Time
	// handing is set while a message due is being handed to the inner
	// transport, so Flush does not see the link idle in between.
	handing bool
	done    bool
	// rate is the link's throughput measured from what it carried, as a
	// host measures its writes (Host.LinkRate).
	rate node.LinkRate
}

// queued is a message, when its transmission starts and how long it takes,
// and the time it arrives at the far end of its link; urgent marks a
// membership announcement.
type queued struct {
	data   []byte
	start  time.Time
	tx     time.Duration
	due    time.Time
	urgent bool
}

// SendTo implements Transport: data leaves for to once it has crossed the
// emulated link.
func (s *ShapedTransport) SendTo(to peer.ID, data []byte) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	l := s.links[to]
	if l == nil {
		l = &shapedLink{shape: s.shape(to), wake: make(chan struct{}, 1)}
		s.links[to] = l
		s.wg.Add(1)
		go s.carry(to, l)
	}
	s.mu.Unlock()

	l.mu.Lock()
	now := time.Now()
	q := queued{data: data, tx: l.shape.transmitTime(len(data) + lengthPrefix), urgent: node.IsAnnouncement(data)}
	if q.urgent {
		l.insertUrgent(q, now)
	} else {
		q.start = l.free
		if q.start.Before(now) {
			q.start = now
		}
		l.free = q.start.Add(q.tx)
		q.due = l.free.Add(l.shape.Latency)
		l.queue = append(l.queue, q)
	}
	l.queuedBytes += len(data)
	for l.queuedBytes > s.queueLimit && l.dropOldest() {
		s.dropped.Add(1)
	}
	l.mu.Unlock()
	l.signal()
}

// insertUrgent puts announcement q on l ahead of the messages whose
// transmission has not started, which it delays by its own transmission
// time: the link stands for the sender's queue, where announcements go
// first (sendQueue), and the path behind it, which nothing overtakes.
func (l *shapedLink) insertUrgent(q queued, now time.Time) {
	i := len(l.queue)
	for i > 0 && l.queue[i-1].start.After(now) && !l.queue[i-1].urgent {
		i--
	}
	q.start = now
	if i > 0 {
		if end := l.queue[i-1].start.Add(l.queue[i-1].tx); end.After(now) {
			q.start = end
		}
	}
	q.due = q.start.Add(q.tx + l.shape.Latency)
	// The messages behind it were queued back to back while the link was
	// busy: each starts, and arrives, one announcement later.
	for j := i; j < len(l.queue); j++ {
		l.queue[j].start = l.queue[j].start.Add(q.tx)
		l.queue[j].due = l.queue[j].due.Add(q.tx)
	}
	if i < len(l.queue) {
		l.free = l.free.Add(q.tx)
	} else if end := q.start.Add(q.tx); l.free.Before(end) {
		l.free = end
	}
	l.queue = slices.Insert(l.queue, i, q)
}

// dropOldest drops the oldest update message waiting on l (announcements
// are kept, as a sender keeps them) and reports whether there was one to
// drop besides the newest.
func (l *shapedLink) dropOldest() bool {
	for i := range len(l.queue) - 1 {
		if !l.queue[i].urgent {
			l.queuedBytes -= len(l.queue[i].data)
			l.queue = slices.Delete(l.queue, i, i+1)
			return true
		}
	}
	return false
}

func (l *shapedLink) signal() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// carry hands each message on l to the inner transport once it is due.
func (s *ShapedTransport) carry(to peer.ID, l *shapedLink) {
	defer s.wg.Done()
	for {
		l.mu.Lock()
		if l.done {
			l.queue, l.queuedBytes = nil, 0
			l.mu.Unlock()
			return
		}
		if len(l.queue) == 0 {
			l.mu.Unlock()
			<-l.wake
			continue
		}
		if wait := time.Until(l.queue[0].due); wait > 0 {
			l.mu.Unlock()
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-l.wake:
				// Stopped, or the head was dropped: look again. A new
				// message is due after the head, so it changes nothing.
				t.Stop()
			}
			continue
		}
		q := l.queue[0]
		l.queue[0] = queued{}
		l.queue = l.queue[1:]
		l.queuedBytes -= len(q.data)
		// Its transmission is a write at the link's pace when the next
		// message waited for it to end.
		end := q.start.Add(q.tx)
		l.rate.Observe(len(q.data)+lengthPrefix, q.tx, len(l.queue) > 0 && !l.queue[0].start.After(end), end)
		l.handing = true
		l.mu.Unlock()
		s.Transport.SendTo(to, q.data)
		l.mu.Lock()
		l.handing = false
		l.mu.Unlock()
	}
}

// LinkRate returns the throughput of the emulated link to p as measured
// from what it carried (node.LinkRate), in bytes per second; 0 when it is
// not known.
func (s *ShapedTransport) LinkRate(p peer.ID) float64 {
	s.mu.Lock()
	l := s.links[p]
	s.mu.Unlock()
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rate.Rate()
}

// busy reports whether messages are still on their way over l.
func (l *shapedLink) busy() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.done && (len(l.queue) > 0 || l.handing)
}

// stop drops what waits on l and ends its carrier.
func (l *shapedLink) stop() {
	l.mu.Lock()
	l.done = true
	l.mu.Unlock()
	l.signal()
}

// Forget implements Transport: what waits on the link to p is dropped with
// what the inner transport queued for p.
func (s *ShapedTransport) Forget(p peer.ID) {
	s.mu.Lock()
	if l := s.links[p]; l != nil {
		l.stop()
		delete(s.links, p)
	}
	s.mu.Unlock()
	s.Transport.Forget(p)
}

// Flush implements Transport: it waits until every message has crossed its
// link and the inner transport has written it.
func (s *ShapedTransport) Flush(ctx context.Context) error {
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		s.mu.Lock()
		busy := false
		for _, l := range s.links {
			if l.busy() {
				busy = true
				break
			}
		}
		s.mu.Unlock()
		if !busy {
			return s.Transport.Flush(ctx)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("flush emulated links: %w", ctx.Err())
		case <-tick.C:
		}
	}
}

// Traffic implements Transport: the inner transport's counts, with the
// messages dropped from full links among SendDropped.
func (s *ShapedTransport) Traffic() TrafficStats {
	t := s.Transport.Traffic()
	t.SendDropped += s.dropped.Load()
	return t
}

// ProbeRTT implements Transport: the inner round trip plus the link's
// latency each way.
func (s *ShapedTransport) ProbeRTT(ctx context.Context, to string) (time.Duration, error) {
	p, err := peer.Decode(to)
	if err != nil {
		return 0, fmt.Errorf("probe %s: %w", to, err)
	}
	rtt, err := s.Transport.ProbeRTT(ctx, to)
	if err != nil {
		return 0, err
	}
	return rtt + 2*s.shape(p).Latency, nil
}

// Close drops what waits on the links and stops their carriers; it does
// not close the inner transport.
func (s *ShapedTransport) Close() {
	s.mu.Lock()
	s.closed = true
	for p, l := range s.links {
		l.stop()
		delete(s.links, p)
	}
	s.mu.Unlock()
	s.wg.Wait()
}

var _ Transport = (*ShapedTransport)(nil)
