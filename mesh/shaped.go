package mesh

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
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
}

// queued is a message and the time it arrives at the far end of its link.
type queued struct {
	data []byte
	due  time.Time
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
	start := l.free
	if start.Before(now) {
		start = now
	}
	l.free = start.Add(l.shape.transmitTime(len(data) + lengthPrefix))
	l.queue = append(l.queue, queued{data: data, due: l.free.Add(l.shape.Latency)})
	l.queuedBytes += len(data)
	for l.queuedBytes > s.queueLimit && len(l.queue) > 1 {
		l.queuedBytes -= len(l.queue[0].data)
		l.queue[0] = queued{}
		l.queue = l.queue[1:]
		s.dropped.Add(1)
	}
	l.mu.Unlock()
	l.signal()
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
		l.handing = true
		l.mu.Unlock()
		s.Transport.SendTo(to, q.data)
		l.mu.Lock()
		l.handing = false
		l.mu.Unlock()
	}
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
