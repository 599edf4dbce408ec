package testnet

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/p2p/net/swarm"

	"github.com/sketchmesh/sketchmesh/mesh"
)

func probeHost(t *testing.T) *member {
	t.Helper()
	h, err := mesh.NewHost(mesh.HostConfig{ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return &member{host: h, net: h}
}

// A probe whose first dial fails (here: libp2p's dial backoff, as after a
// dial that met the other end's) succeeds on the next attempt; a peer that
// is gone fails the probe after every attempt, saying so.
func TestProbeRetriesAFailedDial(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	a, b := probeHost(t), probeHost(t)
	sw, ok := a.host.Libp2p().Network().(*swarm.Swarm)
	if !ok {
		t.Skip("the host's network is not a swarm")
	}
	for _, addr := range b.host.Libp2p().Addrs() {
		sw.Backoff().AddBackoff(b.host.Libp2p().ID(), addr)
	}
	if err := a.host.Connect(ctx, infoOf(b)); err == nil {
		t.Fatal("a dial under backoff connected: the test no longer sets a first failure up")
	}
	if d, err := probeRTT(ctx, a, b); err != nil || d <= 0 {
		t.Fatalf("probe after a failed dial: %v, %v; want a round trip", d, err)
	}
	c := probeHost(t)
	c.host.Close()
	if _, err := probeRTT(ctx, a, c); err == nil || !strings.Contains(err.Error(), "3 attempts") {
		t.Fatalf("probe of a closed host: %v, want an error after 3 attempts", err)
	}
}
