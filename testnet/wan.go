package testnet

import (
	"fmt"

	"github.com/sketchmesh/sketchmesh/mesh"
	"github.com/sketchmesh/sketchmesh/netmodel"
)

// The real testnet and the simulator share one description of the network,
// netmodel.LinkProfile, parsed by netmodel.ParseLinkProfile. The testnet emulates its latency
// and bandwidth on real loopback TCP streams behind a transport decorator
// (mesh.ShapedTransport, wrapped around each member's host): each message
// waits for the link, its transmission time at the link's bandwidth and the
// one-way latency before the host's sender writes it.
// go-libp2p's mocknet was the other candidate, but its streams deliver one
// large write per latency period (a write blocks until the previous one has
// "arrived"), so a 120 ms link carries about eight messages a second whatever
// its bandwidth: that models a stop-and-wait link, not a WAN path, and would
// hide exactly what staleness is meant to win back. The decorator keeps the
// real TCP, Noise and yamux stack under every byte; loss, jitter,
// duplication and reordering are the simulator's (TCP would hide them anyway).

// ParseWAN parses a network for the real testnet: "lan" (loopback, no
// shaping), "geo3" or "latency=50ms,bandwidth=100Mbit". Link faults (loss,
// jitter, dup, reorder) are refused: they belong to the simulator.
func ParseWAN(s string) (netmodel.LinkProfile, error) {
	p, err := netmodel.ParseLinkProfile(s)
	if err != nil {
		return netmodel.LinkProfile{}, err
	}
	if p.Jitter > 0 || p.Loss > 0 || p.Duplicate > 0 || p.Reorder > 0 {
		return netmodel.LinkProfile{}, fmt.Errorf("link profile %q: the testnet runs real TCP streams and emulates latency and bandwidth only; loss, jitter, dup and reorder are for 'sketchmesh simulate'", s)
	}
	return p, nil
}

// linkBetween returns the shape of the link from node i to node j of a run
// over p.
func linkBetween(p netmodel.LinkProfile, i, j int) mesh.LinkShape {
	latency, bandwidth := p.Link(i, j)
	return mesh.LinkShape{Latency: latency, Bandwidth: bandwidth}
}
