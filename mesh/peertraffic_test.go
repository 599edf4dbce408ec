package mesh

import (
	"context"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// Per-peer counters add up to the host's totals, each side sees the other's
// sends as its receipts, and a connected loopback peer is reached directly.
func TestPeerTrafficCountsEachPeer(t *testing.T) {
	a, b, c := newTestHost(t), newTestHost(t), newTestHost(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, to := range []*Host{b, c} {
		if err := a.Connect(ctx, peer.AddrInfo{ID: to.Libp2p().ID(), Addrs: to.Libp2p().Addrs()}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 3; i++ {
		a.Send(b.ID(), make([]byte, 100))
	}
	a.Send(c.ID(), make([]byte, 10))
	b.Send(a.ID(), make([]byte, 50))
	for _, h := range []*Host{a, b} {
		if err := h.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	waitFor := func(h *Host, from string, msgs uint64) PeerTraffic {
		for ctx.Err() == nil {
			if got := h.PeerTraffic()[from]; got.MessagesReceived >= msgs {
				return got
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatalf("%s never received %d messages from %s", h.ID(), msgs, from)
		return PeerTraffic{}
	}
	atB := waitFor(b, a.ID(), 3)
	waitFor(c, a.ID(), 1)
	atA := waitFor(a, b.ID(), 1)
	ab, ac := a.PeerTraffic()[b.ID()], a.PeerTraffic()[c.ID()]
	// Each message carries a 4-byte length prefix.
	if ab.MessagesSent != 3 || ab.BytesSent != 3*104 || ac.MessagesSent != 1 || ac.BytesSent != 14 {
		t.Fatalf("a's sends: to b %+v, to c %+v", ab, ac)
	}
	if atB.BytesReceived != ab.BytesSent || atA.BytesReceived != 54 || ab.BytesReceived != 54 {
		t.Fatalf("receipts: b from a %+v, a from b %+v", atB, atA)
	}
	if tot := a.Traffic(); tot.BytesSent != ab.BytesSent+ac.BytesSent {
		t.Fatalf("a sent %d in all, %d + %d by peer", tot.BytesSent, ab.BytesSent, ac.BytesSent)
	}
	if ab.Path != "direct" || a.PathTo(b.Libp2p().ID()) != "direct" {
		t.Fatalf("path to b %q / %q, want direct", ab.Path, a.PathTo(b.Libp2p().ID()))
	}
	_ = b.Close()
	for ctx.Err() == nil && a.PathTo(b.Libp2p().ID()) == "direct" {
		time.Sleep(10 * time.Millisecond)
	}
	if p := a.PathTo(b.Libp2p().ID()); p != "" {
		t.Fatalf("path to a closed peer that nothing was sent to since: %q, want \"\"", p)
	}
}
