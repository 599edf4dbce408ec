package mesh

import (
	"context"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
)

// A probe pays the emulated latency both ways, as an update would: on a
// link shaped to 30 ms one way it measures at least 60 ms; between the
// same hosts unshaped, it measures the loopback.
func TestProbeMeasuresTheEmulatedRoundTrip(t *testing.T) {
	shaped := func(to string) LinkShape { return LinkShape{Latency: 30 * time.Millisecond, Bandwidth: 1e9} }
	newHost := func(shape func(string) LinkShape) *Host {
		h, err := NewHost(HostConfig{ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"}, Shape: shape})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = h.Close() })
		return h
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	a, b, c := newHost(shaped), newHost(shaped), newTestHost(t)
	for _, pair := range [][2]*Host{{a, b}, {c, a}} {
		if err := pair[0].Connect(ctx, peer.AddrInfo{ID: pair[1].Libp2p().ID(), Addrs: pair[1].Libp2p().Addrs()}); err != nil {
			t.Fatal(err)
		}
	}
	rtt, err := a.ProbeRTT(ctx, b.ID())
	if err != nil {
		t.Fatal(err)
	}
	if rtt < 60*time.Millisecond {
		t.Fatalf("probe over a 30 ms link measured %v, want at least 60 ms", rtt)
	}
	// c sends unshaped, a answers after its 30 ms.
	half, err := c.ProbeRTT(ctx, a.ID())
	if err != nil {
		t.Fatal(err)
	}
	if half < 30*time.Millisecond {
		t.Fatalf("probe answered over a 30 ms link measured %v", half)
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
