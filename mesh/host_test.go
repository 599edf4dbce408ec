package mesh

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/sketchmesh/sketchmesh/node"
)

func newTestHost(t *testing.T) *Host {
	t.Helper()
	h, err := NewHost(HostConfig{ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	return h
}

func TestSendReceiveInOrder(t *testing.T) {
	a, b := newTestHost(t), newTestHost(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := a.Connect(ctx, peer.AddrInfo{ID: b.Libp2p().ID(), Addrs: b.Libp2p().Addrs()}); err != nil {
		t.Fatal(err)
	}
	const n = 200
	for i := 0; i < n; i++ {
		a.Send(b.ID(), []byte(fmt.Sprintf("message %d", i)))
	}
	if err := a.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		select {
		case m := <-b.Inbox():
			if m.From != a.ID() || string(m.Data) != fmt.Sprintf("message %d", i) {
				t.Fatalf("message %d: from %s data %q", i, m.From, m.Data)
			}
		case <-ctx.Done():
			t.Fatalf("only %d of %d messages arrived", i, n)
		}
	}
	tr := a.Traffic()
	if tr.MessagesSent != n || tr.SendFailures != 0 {
		t.Fatalf("traffic %+v", tr)
	}
	if got := b.Traffic().BytesReceived; got != tr.BytesSent {
		t.Fatalf("received %d bytes, sent %d", got, tr.BytesSent)
	}
}

func TestReadMessageRefusesOversizedLength(t *testing.T) {
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], node.MaxEnvelopeBytes+1)
	_, err := readMessage(bytes.NewReader(hdr[:]))
	if !errors.Is(err, errTooLarge) {
		t.Fatalf("err = %v, want errTooLarge", err)
	}
	binary.BigEndian.PutUint32(hdr[:], 10)
	_, err = readMessage(bytes.NewReader(append(hdr[:], 1, 2, 3)))
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("truncated message: err = %v", err)
	}
	if _, err := readMessage(bytes.NewReader(nil)); !errors.Is(err, io.EOF) {
		t.Fatalf("clean end: err = %v, want io.EOF", err)
	}
}

// A peer that sends an absurd length header has its stream reset and
// counted; the host keeps serving others.
func TestHostileStreamIsResetAndCounted(t *testing.T) {
	victim, attacker := newTestHost(t), newTestHost(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := attacker.Connect(ctx, peer.AddrInfo{ID: victim.Libp2p().ID(), Addrs: victim.Libp2p().Addrs()}); err != nil {
		t.Fatal(err)
	}
	s, err := attacker.Libp2p().NewStream(ctx, victim.Libp2p().ID(), UpdateProtocol)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write([]byte{0xff, 0xff, 0xff, 0xff}); err != nil {
		t.Fatal(err)
	}
	for victim.Traffic().BadStreams == 0 {
		select {
		case <-ctx.Done():
			t.Fatal("oversized length not counted")
		case <-time.After(5 * time.Millisecond):
		}
	}
	attacker.Send(victim.ID(), []byte("still here"))
	select {
	case m := <-victim.Inbox():
		if string(m.Data) != "still here" {
			t.Fatalf("got %q", m.Data)
		}
	case <-ctx.Done():
		t.Fatal("host stopped serving after a hostile stream")
	}
}

// A forgotten member's queue is dropped: nothing more is dialed, counted or
// reported for it, and Flush does not wait for it. Its link keeps the path
// it took (a member's record outlives its connection), and no longer
// counts as failing.
func TestForgetDropsQueueAndLink(t *testing.T) {
	a, b := newTestHost(t), newTestHost(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	bid := b.Libp2p().ID()
	a.addMember(bid)
	a.Libp2p().Peerstore().AddAddrs(bid, b.Libp2p().Addrs(), time.Hour)
	a.Send(b.ID(), []byte("hello"))
	if err := a.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if l, ok := a.Links()[bid]; !ok || !l.Direct {
		t.Fatalf("link after a delivered message: %+v, %v", l, ok)
	}
	_ = b.Close()
	// Messages to a peer that is gone: each takes a failed dial.
	for range 50 {
		a.Send(b.ID(), bytes.Repeat([]byte{1}, 100))
	}
	a.Forget(bid)
	if err := a.Flush(ctx); err != nil {
		t.Fatalf("Flush after Forget: %v", err)
	}
	// The sender stops after the message it was writing, if any.
	failures := a.Traffic().SendFailures
	time.Sleep(200 * time.Millisecond)
	if l := a.Links()[bid]; !l.Direct || !l.FailingSince.IsZero() {
		t.Errorf("link record of a forgotten peer: %+v; want its direct path, not failing", l)
	}
	if got := a.Traffic().SendFailures; got != failures {
		t.Errorf("send failures went on after Forget: %d, then %d", failures, got)
	}
	a.mu.Lock()
	_, queued := a.senders[bid]
	a.mu.Unlock()
	if queued {
		t.Error("a forgotten peer still has a sender")
	}
}

// A peer's send queue stays under Limits.SendQueueBytes however fast
// messages come: the oldest are dropped and counted, the newest kept.
func TestSendQueueBounded(t *testing.T) {
	h, err := NewHost(HostConfig{ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"}, Limits: Limits{SendQueueBytes: 64 << 10}})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	// A sender whose loop does not run: nothing drains the queue.
	s := &sender{host: h, to: fixedPeer(3), wake: make(chan struct{}, 1)}
	msg := func(i int) []byte {
		return append(bytes.Repeat([]byte{0}, 16<<10-4), byte(i>>24), byte(i>>16), byte(i>>8), byte(i))
	}
	for i := range 200 {
		s.push(msg(i))
		if s.queue.dataBytes > 64<<10 {
			t.Fatalf("after %d messages %d bytes queued, limit %d", i+1, s.queue.dataBytes, 64<<10)
		}
	}
	if q := s.queue.data; len(q) != 4 || !bytes.Equal(q[3], msg(199)) || !bytes.Equal(q[0], msg(196)) {
		t.Fatalf("queue holds %d messages; want the newest 4", len(q))
	}
	if got := h.Traffic().SendDropped; got != 196 {
		t.Fatalf("dropped %d, want 196", got)
	}
	// A message over the limit on its own is still queued.
	s.push(make([]byte, 1<<20))
	if q := s.queue.data; len(q) != 1 || len(q[0]) != 1<<20 {
		t.Fatalf("a large message: queue of %d", len(q))
	}
}

// A peer that stops reading cannot hold a sender: a blocked write times
// out, the stream is reset and the sender goes on over a new one, so Flush
// returns.
func TestWriteTimesOutOnAPeerThatDoesNotRead(t *testing.T) {
	a, err := NewHost(HostConfig{ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"}, Limits: Limits{WriteTimeout: 50 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, handled := nonReadingPeer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := a.Connect(ctx, peer.AddrInfo{ID: b.Libp2p().ID(), Addrs: b.Libp2p().Addrs()}); err != nil {
		t.Fatal(err)
	}
	// 8 MiB, far more than a yamux stream's window: writes block.
	for range 1024 {
		a.Send(b.ID(), make([]byte, 8<<10))
	}
	if err := a.Flush(ctx); err != nil {
		t.Fatalf("Flush with a peer that does not read: %v", err)
	}
	if got := handled.Load(); got < 2 {
		t.Fatalf("%d update streams opened; a blocked one was not given up", got)
	}
}

// Issue 14, defect 7: Close used to stop and join the senders before it
// closed the libp2p host, so a sender blocked writing to a peer that had
// stopped reading held Close for its whole write deadline, twice (17.5 s
// here, with a 1 s deadline and a 512 KiB message; about half an hour with
// the defaults and a 64 MiB one). Close now returns within a few seconds
// whatever the peer does, with every sender joined.
func TestCloseReturnsWhileAPeerDoesNotRead(t *testing.T) {
	a, err := NewHost(HostConfig{ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"}, Limits: Limits{WriteTimeout: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	b, handled := nonReadingPeer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := a.Connect(ctx, peer.AddrInfo{ID: b.Libp2p().ID(), Addrs: b.Libp2p().Addrs()}); err != nil {
		t.Fatal(err)
	}
	// Far more than a yamux stream's window: the write blocks, with a
	// deadline of 1 s + 8 s.
	a.Send(b.ID(), make([]byte, 512<<10))
	for handled.Load() == 0 {
		select {
		case <-ctx.Done():
			t.Fatal("the update stream never opened")
		case <-time.After(10 * time.Millisecond):
		}
	}
	time.Sleep(200 * time.Millisecond) // the write is now blocked
	a.mu.Lock()
	s := a.senders[b.Libp2p().ID()]
	a.mu.Unlock()
	if !s.busy() {
		t.Fatal("the sender is not writing")
	}
	start := time.Now()
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("Close took %v with a peer that does not read, want under 5 s", took)
	}
	// Had Close given up waiting, the sender would stay blocked for
	// seconds more.
	joined := make(chan struct{})
	go func() { a.wg.Wait(); close(joined) }()
	select {
	case <-joined:
	case <-time.After(time.Second):
		t.Fatal("Close returned with a sender still running")
	}
	if got := handled.Load(); got != 1 {
		t.Fatalf("%d update streams opened, want 1 (no retry once closed)", got)
	}
	a.Send(b.ID(), []byte("after close")) // a no-op, not a new sender
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.senders) != 1 {
		t.Fatalf("%d senders after a Send on a closed host", len(a.senders))
	}
}

// The inbox holds at most Limits.InboxBytes of arrivals the node has not
// taken: past it messages are dropped and counted, in arrival order the
// rest are delivered, and what the node takes frees room again.
func TestInboxByteBudget(t *testing.T) {
	a := newTestHost(t)
	b, err := NewHost(HostConfig{ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"}, Limits: Limits{MaxMessageBytes: 256 << 10, InboxBytes: 1 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := a.Connect(ctx, peer.AddrInfo{ID: b.Libp2p().ID(), Addrs: b.Libp2p().Addrs()}); err != nil {
		t.Fatal(err)
	}
	msg := func(i int) []byte { return bytes.Repeat([]byte{byte(i)}, 200<<10) }
	for i := range 10 {
		a.Send(b.ID(), msg(i))
	}
	eventually(t, "b read all ten messages", func() bool { return b.Traffic().MessagesReceived == 10 })
	// 5 × 200 KiB fit in 1 MiB, a sixth does not.
	if got := b.Traffic().InboxDropped; got != 5 {
		t.Fatalf("%d messages dropped, want 5", got)
	}
	for i := range 5 {
		select {
		case in := <-b.Inbox():
			if !bytes.Equal(in.Data, msg(i)) {
				t.Fatalf("message %d holds %d bytes of %d", i, len(in.Data), in.Data[0])
			}
		case <-ctx.Done():
			t.Fatalf("only %d messages delivered", i)
		}
	}
	eventually(t, "the inbox's budget freed once the node took everything", func() bool { return b.inboxBytes.Load() == 0 })
	a.Send(b.ID(), msg(10))
	select {
	case in := <-b.Inbox():
		if !bytes.Equal(in.Data, msg(10)) {
			t.Fatal("a message sent after the inbox drained arrived changed")
		}
	case <-ctx.Done():
		t.Fatal("nothing delivered after the inbox drained")
	}
	if got := b.Traffic().InboxDropped; got != 5 {
		t.Fatalf("%d messages dropped in all, want 5", got)
	}
	if err := (Limits{MaxMessageBytes: 1 << 20, InboxBytes: 1 << 19}).Validate(); err == nil {
		t.Fatal("an inbox smaller than one message was accepted")
	}
}

// A peer the host does not send to (not a member's) leaves no link record
// once it disconnects; a member's stays.
func TestLinkRecordsOfDepartedNonMembersDropped(t *testing.T) {
	a, member, other := newTestHost(t), newTestHost(t), newTestHost(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, h := range []*Host{member, other} {
		if err := h.Connect(ctx, peer.AddrInfo{ID: a.Libp2p().ID(), Addrs: a.Libp2p().Addrs()}); err != nil {
			t.Fatal(err)
		}
		h.Send(a.ID(), []byte("hello"))
		if err := h.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		<-a.Inbox()
	}
	a.Send(member.ID(), []byte("to a member"))
	if err := a.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for _, h := range []*Host{member, other} {
		if l := a.Links()[h.Libp2p().ID()]; !l.Direct {
			t.Fatalf("no direct link record of %s: %+v", h.ID(), l)
		}
	}
	_ = member.Close()
	_ = other.Close()
	eventually(t, "the non-member's link record dropped", func() bool {
		_, ok := a.Links()[other.Libp2p().ID()]
		return !ok
	})
	if _, ok := a.Links()[member.Libp2p().ID()]; !ok {
		t.Fatal("the member's link record was dropped while the host still sends to it")
	}
}

// nonReadingPeer starts a host whose update streams are accepted and never
// read, and counts them; the handlers are released when the test ends.
func nonReadingPeer(t *testing.T) (*Host, *atomic.Int32) {
	t.Helper()
	b := newTestHost(t)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	var handled atomic.Int32
	b.Libp2p().SetStreamHandler(UpdateProtocol, func(s network.Stream) {
		handled.Add(1)
		<-release // never reads
		_ = s.Reset()
	})
	return b, &handled
}

// The host measures a link's throughput from what it writes (LinkRate):
// to a peer that reads its update stream at a steady 8 MB/s, once the
// buffers between them (socket and muxer windows) are full and the writes
// wait on the reader, the measured rate is that pace. Before anything
// backed up it is unknown.
func TestLinkRateMeasuresTheLinksPace(t *testing.T) {
	const pace = 8e6 // bytes per second
	a, b := newTestHost(t), newTestHost(t)
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	b.Libp2p().SetStreamHandler(UpdateProtocol, func(s network.Stream) {
		defer s.Reset()
		buf := make([]byte, 32<<10)
		start, read := time.Now(), 0
		for {
			n, err := s.Read(buf)
			if err != nil {
				return
			}
			read += n
			select {
			case <-done:
				return
			case <-time.After(time.Until(start.Add(time.Duration(float64(read) / pace * float64(time.Second))))):
			}
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := a.Connect(ctx, peer.AddrInfo{ID: b.Libp2p().ID(), Addrs: b.Libp2p().Addrs()}); err != nil {
		t.Fatal(err)
	}
	if got := a.LinkRate(b.Libp2p().ID()); got != 0 {
		t.Fatalf("rate %v before anything was sent, want 0", got)
	}
	msg := bytes.Repeat([]byte{7}, 64<<10)
	for range 800 { // 52 MB: six and a half seconds at the pace
		a.Send(b.ID(), msg)
	}
	eventually(t, "a measured the link", func() bool { return a.LinkRate(b.Libp2p().ID()) > 0 })
	time.Sleep(2 * node.RateWindow) // a few samples more
	got := a.LinkRate(b.Libp2p().ID())
	if got < pace/2 || got > 2*pace {
		t.Fatalf("measured %.3g bytes/s on a link read at %.3g", got, pace)
	}
	t.Logf("measured %.3g bytes/s on a link read at %.3g", got, pace)
}
