package mesh

import (
	"context"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
)

// A probe through a shaped transport pays the emulated latency both ways:
// on a link shaped to 30 ms one way it measures at least 60 ms.
func TestProbeMeasuresTheEmulatedRoundTrip(t *testing.T) {
	shaped := func(peer.ID) LinkShape { return LinkShape{Latency: 30 * time.Millisecond, Bandwidth: 1e9} }
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	a, b := newTestHost(t), newTestHost(t)
	if err := a.Connect(ctx, peer.AddrInfo{ID: b.Libp2p().ID(), Addrs: b.Libp2p().Addrs()}); err != nil {
		t.Fatal(err)
	}
	net := NewShapedTransport(a, shaped, 0)
	defer net.Close()
	rtt, err := net.ProbeRTT(ctx, b.ID())
	if err != nil {
		t.Fatal(err)
	}
	if rtt < 60*time.Millisecond {
		t.Fatalf("probe over a 30 ms link measured %v, want at least 60 ms", rtt)
	}
	// A probe to a peer it was not connected to leaves no connection.
	d := newTestHost(t)
	a.Libp2p().Peerstore().AddAddrs(d.Libp2p().ID(), d.Libp2p().Addrs(), time.Minute)
	if _, err := a.ProbeRTT(ctx, d.ID()); err != nil {
		t.Fatal(err)
	}
	if got := a.Libp2p().Network().Connectedness(d.Libp2p().ID()); got == network.Connected {
		t.Fatal("the probe left its connection open")
	}
	if _, err := a.ProbeRTT(ctx, "not-a-peer-id"); err == nil {
		t.Fatal("a probe to an invalid peer id succeeded")
	}
}
