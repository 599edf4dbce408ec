package testnet

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sketchmesh/sketchmesh/mesh"
)

// The real testnet and the simulator share one description of the network,
// LinkProfile, parsed by ParseLinkProfile. The testnet emulates its latency
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
func ParseWAN(s string) (LinkProfile, error) {
	p, err := ParseLinkProfile(s)
	if err != nil {
		return LinkProfile{}, err
	}
	if p.Jitter > 0 || p.Loss > 0 || p.Duplicate > 0 || p.Reorder > 0 {
		return LinkProfile{}, fmt.Errorf("link profile %q: the testnet runs real TCP streams and emulates latency and bandwidth only; loss, jitter, dup and reorder are for 'sketchmesh simulate'", s)
	}
	return p, nil
}

// Emulated reports whether the testnet shapes links (anything but lan).
func (p LinkProfile) Emulated() bool { return p.Name != "" && p.Name != "lan" }

// Site returns the site of node i: nodes are spread round robin.
func (p LinkProfile) Site(i int) int { return i % max(p.Sites, 1) }

// LinkBetween returns the shape of the link from node i to node j.
func (p LinkProfile) LinkBetween(i, j int) mesh.LinkShape {
	a, b := p.Site(i), p.Site(j)
	return mesh.LinkShape{Latency: p.Latency[a][b], Bandwidth: p.Bandwidth[a][b]}
}

const (
	mbit = 1e6 / 8
	gbit = 1e9 / 8
)

// geo3Latency is the one-way latency between two of geo3's sites: 40 ms
// between sites 0 and 1, 80 ms between 1 and 2, 120 ms between 0 and 2.
func geo3Latency(a, b int) time.Duration {
	switch lo, hi := min(a, b), max(a, b); {
	case lo == 0 && hi == 1:
		return 40 * time.Millisecond
	case lo == 1 && hi == 2:
		return 80 * time.Millisecond
	default:
		return 120 * time.Millisecond
	}
}

// parseBandwidth reads "100Mbit", "1Gbit", "500kbit" or a plain bits-per-
// second number, and returns bytes per second.
func parseBandwidth(v string) (float64, error) {
	units := []struct {
		suffix string
		bits   float64
	}{{"Gbit", 1e9}, {"Mbit", 1e6}, {"kbit", 1e3}, {"bit", 1}}
	mult := 1.0
	num := v
	for _, u := range units {
		if strings.HasSuffix(v, u.suffix) {
			num, mult = strings.TrimSuffix(v, u.suffix), u.bits
			break
		}
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || !(f > 0) {
		return 0, fmt.Errorf("bandwidth %q: want a positive rate such as 100Mbit", v)
	}
	return f * mult / 8, nil
}
