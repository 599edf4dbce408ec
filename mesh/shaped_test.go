package mesh

import (
	"bytes"
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/sketchmesh/sketchmesh/node"
)

// recordingTransport stands for a host: it records what reaches it and when.
type recordingTransport struct {
	Transport
	mu      sync.Mutex
	sent    [][]byte
	at      []time.Time
	forgot  []peer.ID
	dropped uint64
	rtt     time.Duration
}

func (r *recordingTransport) SendTo(_ peer.ID, data []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sent = append(r.sent, data)
	r.at = append(r.at, time.Now())
}

func (r *recordingTransport) Forget(p peer.ID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.forgot = append(r.forgot, p)
}

func (r *recordingTransport) Flush(context.Context) error { return nil }

func (r *recordingTransport) Traffic() TrafficStats { return TrafficStats{SendDropped: r.dropped} }

func (r *recordingTransport) ProbeRTT(context.Context, string) (time.Duration, error) {
	return r.rtt, nil
}

func (r *recordingTransport) handed() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.sent)
}

// Messages on a shaped link pipeline: each waits for the link, its
// transmission at the link's bandwidth and the one-way latency, in order;
// Flush returns once all of them have reached the inner transport.
// testLatency is the one-way latency of sendThree's link.
const testLatency = 40 * time.Millisecond

// sendThree sends messages 0, 1 and 2 of 1,000 bytes with the length
// prefix, each taking 10 ms at 100 kB/s, on a link of testLatency, and
// returns the link, what it hands on, and when the first was sent.
func sendThree(t *testing.T) (*ShapedTransport, *recordingTransport, time.Time) {
	t.Helper()
	inner := &recordingTransport{}
	s := NewShapedTransport(inner, func(peer.ID) LinkShape { return LinkShape{Latency: testLatency, Bandwidth: 1e5} }, 0)
	t.Cleanup(s.Close)
	start := time.Now()
	for i := range 3 {
		s.SendTo(fixedPeer(1), append(make([]byte, 1000-lengthPrefix-1), byte(i)))
	}
	return s, inner, start
}

func TestShapedLinkPipelinesLatencyAndBandwidth(t *testing.T) {
	s, inner, start := sendThree(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := inner.handed(); got != 3 {
		t.Fatalf("Flush returned with %d of 3 messages handed on", got)
	}
	for i, at := range inner.at {
		if inner.sent[i][len(inner.sent[i])-1] != byte(i) {
			t.Fatalf("message %d handed on out of order", i)
		}
		if want := testLatency + time.Duration(i+1)*10*time.Millisecond; at.Sub(start) < want {
			t.Fatalf("message %d handed on after %v, want at least %v", i, at.Sub(start), want)
		}
	}
}

// Forget drops what waits on the link and forgets the peer in the inner
// transport too; a link that holds more than its limit drops the oldest and
// counts them among the inner transport's drops.
func TestShapedLinkForgetAndBound(t *testing.T) {
	inner := &recordingTransport{dropped: 5}
	s := NewShapedTransport(inner, func(peer.ID) LinkShape { return LinkShape{Latency: time.Hour} }, 64<<10)
	defer s.Close()
	for i := range 200 {
		s.SendTo(fixedPeer(1), bytes.Repeat([]byte{byte(i)}, 16<<10))
	}
	if got := s.Traffic().SendDropped; got != 5+196 {
		t.Fatalf("SendDropped = %d, want 5 of the inner transport and 196 of the link", got)
	}
	s.Forget(fixedPeer(1))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Flush(ctx); err != nil {
		t.Fatalf("Flush after Forget: %v", err)
	}
	if inner.handed() != 0 || len(inner.forgot) != 1 || inner.forgot[0] != fixedPeer(1) {
		t.Fatalf("after Forget: %d handed on, forgot %v", inner.handed(), inner.forgot)
	}
}

// A probe pays the link's latency both ways on top of the inner round trip.
func TestShapedProbeAddsTheRoundTrip(t *testing.T) {
	inner := &recordingTransport{rtt: 5 * time.Millisecond}
	s := NewShapedTransport(inner, func(peer.ID) LinkShape { return LinkShape{Latency: 30 * time.Millisecond} }, 0)
	defer s.Close()
	rtt, err := s.ProbeRTT(context.Background(), fixedPeer(2).String())
	if err != nil {
		t.Fatal(err)
	}
	if rtt != 65*time.Millisecond {
		t.Fatalf("rtt = %v, want 65ms", rtt)
	}
	if _, err := s.ProbeRTT(context.Background(), "not-a-peer-id"); err == nil {
		t.Fatal("a probe to an invalid peer id succeeded")
	}
}

// An announcement goes ahead of the messages that have not started to
// cross the link, behind the one on the wire, and delays them by its own
// transmission: the link stands for a sender's queue, announcements first,
// and the path behind it.
func TestShapedLinkAnnouncementsGoFirst(t *testing.T) {
	s, inner, start := sendThree(t)
	hello := node.EncodeAnnouncement(node.Announcement{Kind: node.KindHello, Member: "m", Seq: 1})
	s.SendTo(fixedPeer(1), hello)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if len(inner.sent) != 4 {
		t.Fatalf("%d of 4 messages handed on", len(inner.sent))
	}
	if !bytes.Equal(inner.sent[1], hello) {
		t.Fatalf("the announcement was handed on at place %d, want 1 (after the message on the wire)", slices.IndexFunc(inner.sent, func(b []byte) bool { return bytes.Equal(b, hello) }))
	}
	for i, want := range []byte{0, 1, 2} {
		if m := inner.sent[[]int{0, 2, 3}[i]]; m[len(m)-1] != want {
			t.Fatalf("update %d handed on out of order", want)
		}
	}
	helloTx := time.Duration(float64(len(hello)+lengthPrefix) / 1e5 * float64(time.Second))
	if got, want := inner.at[3].Sub(start), testLatency+30*time.Millisecond+helloTx; got < want {
		t.Fatalf("the last update arrived after %v, want at least %v (the announcement's transmission included)", got, want)
	}
}
