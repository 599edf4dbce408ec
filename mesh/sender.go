package mesh

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/sketchmesh/sketchmesh/node"
)

// The send path: one sender per peer owns the outbound update stream and
// drains its queue, announcements first (sendQueue). Emulated links live in
// front of it (ShapedTransport).

// sender owns the outbound stream to one peer and drains its queue.
type sender struct {
	host     *Host
	to       peer.ID
	wake     chan struct{}
	counters *peerCounters

	// lastWarn and suppressed rate-limit failure reports (warnFailure);
	// only the sender's loop touches them.
	lastWarn   time.Time
	suppressed int

	mu sync.Mutex
	// queue holds what waits (not the message being written), its update
	// traffic held under Host.maxQueue by dropping the oldest.
	queue sendQueue
	// lastDropWarn and dropsUnreported rate-limit reports of drops.
	lastDropWarn    time.Time
	dropsUnreported int
	writing         bool
	done            bool
	// rate is the link's throughput as measured from the writes
	// (node.LinkRate).
	rate node.LinkRate
}

// linkRate returns the link's measured throughput in bytes per second, 0
// before it has backed up once.
func (s *sender) linkRate() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rate.Rate()
}

func (s *sender) push(data []byte) {
	s.mu.Lock()
	// A peer that does not keep up must not grow the queue without bound;
	// what it loses it pulls when it needs it (node.Node).
	if n := s.queue.push(data, s.host.maxQueue); n > 0 {
		s.host.sendDropped.Add(uint64(n))
		s.dropsUnreported += n
	}
	var dropped, queuedBytes int
	if s.dropsUnreported > 0 && time.Since(s.lastDropWarn) >= failureLogEvery {
		dropped, queuedBytes = s.dropsUnreported, s.queue.dataBytes
		s.lastDropWarn, s.dropsUnreported = time.Now(), 0
	}
	s.mu.Unlock()
	if dropped > 0 {
		s.host.log.Warn("send queue full: dropping the oldest updates queued for a peer that does not keep up",
			"to", shortID(s.to), "queued_bytes", queuedBytes, "limit_bytes", s.host.maxQueue, "dropped", dropped)
	}
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// stopped reports whether the sender was stopped (Forget, Close): what it
// learns of its link after that is no longer news.
func (s *sender) stopped() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.done
}

func (s *sender) busy() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.queue.empty() || s.writing
}

func (s *sender) stop() {
	s.mu.Lock()
	s.done = true
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *sender) loop() {
	defer s.host.wg.Done()
	var stream network.Stream
	defer func() {
		if stream != nil {
			_ = stream.Close()
		}
	}()
	for {
		s.mu.Lock()
		if s.done {
			s.queue.clear()
			s.mu.Unlock()
			return
		}
		// One message at a time, so that an announcement queued while
		// updates are written goes next.
		data, ok := s.queue.pop()
		s.writing = ok
		s.mu.Unlock()
		if !ok {
			<-s.wake
			continue
		}
		var err error
		started := time.Now()
		stream, err = s.write(stream, data)
		if err != nil && !s.stopped() {
			s.host.sendFailures.Add(1)
			s.warnFailure(len(data), err)
		}
		ended := time.Now()
		s.mu.Lock()
		s.writing = false
		if err == nil {
			// What was queued while the write ran makes it a write at
			// the link's pace (node.LinkRate).
			s.rate.Observe(len(data)+lengthPrefix, ended.Sub(started), !s.queue.empty(), ended)
		}
		s.mu.Unlock()
	}
}

// warnFailure logs a failed send, at most once per failureLogEvery per
// peer: a peer that died fails every send until it is declared dead, and one
// line with a count says as much as a line per message.
func (s *sender) warnFailure(bytes int, err error) {
	if time.Since(s.lastWarn) < failureLogEvery {
		s.suppressed++
		return
	}
	s.host.log.Warn("update not delivered", "to", shortID(s.to), "bytes", bytes, "err", OneLine(err), "failed_since_last_report", s.suppressed)
	s.lastWarn, s.suppressed = time.Now(), 0
}

// failureLogEvery spaces a sender's failure reports.
const failureLogEvery = 5 * time.Second

// write sends one message, opening the stream if needed and retrying once on
// a fresh stream if the old one failed.
func (s *sender) write(stream network.Stream, data []byte) (network.Stream, error) {
	var lastErr error
	for attempt := 0; attempt < 2; attempt++ {
		if stream != nil && s.host.betterConnThan(stream) {
			// A direct connection came up: move to it, closing the
			// relayed stream after what was written on it.
			_ = stream.Close()
			stream = nil
		}
		if stream == nil {
			ctx, cancel := context.WithTimeout(s.host.ctx, 10*time.Second)
			// Relayed connections may be limited (relay v2); updates go
			// over them all the same.
			ctx = network.WithAllowLimitedConn(ctx, "sketchmesh updates")
			st, err := s.host.h.NewStream(ctx, s.to, UpdateProtocol)
			cancel()
			if err != nil {
				lastErr = fmt.Errorf("open stream: %w", err)
				if s.stopped() {
					return nil, lastErr
				}
				s.host.linkDown(s.to, err)
				continue
			}
			stream = st
			if !s.stopped() {
				s.host.linkUp(s.to, st.Conn())
			}
		}
		// A peer that stops reading must not hold the sender for ever.
		_ = stream.SetWriteDeadline(time.Now().Add(s.host.writeDeadline(len(data))))
		if err := writeMessage(stream, data); err != nil {
			_ = stream.Reset()
			stream = nil
			lastErr = fmt.Errorf("write: %w", err)
			if s.stopped() {
				// Closed or forgotten: a second attempt would only wait
				// on the same peer again.
				return nil, lastErr
			}
			continue
		}
		s.host.bytesSent.Add(uint64(len(data) + lengthPrefix))
		s.host.msgsSent.Add(1)
		s.counters.bytesSent.Add(uint64(len(data) + lengthPrefix))
		s.counters.msgsSent.Add(1)
		if node.IsAnnouncement(data) {
			s.host.membershipBytesSent.Add(uint64(len(data) + lengthPrefix))
			s.host.membershipMsgsSent.Add(1)
		}
		return stream, nil
	}
	return nil, lastErr
}

func shortID(id peer.ID) string {
	s := id.String()
	if len(s) > 8 {
		return s[len(s)-8:]
	}
	return s
}
