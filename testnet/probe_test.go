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

// The probes cover every ordered pair once, and within a round no pair is
// probed from both ends (so never dialled from both at once); the first
// round dials from the lower index.
func TestProbeRoundsNeverDialBothWays(t *testing.T) {
	for _, n := range []int{2, 3, 8} {
		rounds := probeRounds(n)
		seen := map[[2]int]bool{}
		for r, pairs := range rounds {
			inRound := map[[2]int]bool{}
			for _, p := range pairs {
				if p[0] == p[1] || seen[p] {
					t.Fatalf("n=%d: pair %v probed twice or is a self-probe", n, p)
				}
				if inRound[[2]int{p[1], p[0]}] {
					t.Errorf("n=%d round %d: %v probed from both ends", n, r, p)
				}
				if r == 0 && p[0] > p[1] {
					t.Errorf("n=%d: first round dials %v from the higher index", n, p)
				}
				seen[p], inRound[p] = true, true
			}
		}
		if len(seen) != n*(n-1) {
			t.Errorf("n=%d: %d ordered pairs probed, want %d", n, len(seen), n*(n-1))
		}
	}
}
