package testnet

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sketchmesh/sketchmesh/mesh"
)

// WAN describes the emulated links between nodes. The zero value (and the
// profile "lan") means no emulation: real TCP over loopback.
//
// Emulated links are real loopback TCP streams behind a shaping wrapper in
// the sender (mesh.LinkShape): each message waits for the link, its
// transmission time at the link's bandwidth and the one-way latency before it
// is written. go-libp2p's mocknet was the other candidate, but its streams
// deliver one large write per latency period (a write blocks until the
// previous one has "arrived"), so a 120 ms link carries about eight messages
// a second whatever its bandwidth: that models a stop-and-wait link, not a
// WAN path, and would hide exactly what staleness is meant to win back. The
// wrapper keeps the real TCP, Noise and yamux stack under every byte; what it
// does not model is loss and TCP's congestion dynamics.
type WAN struct {
	Name string
	// Sites is how many sites nodes are spread over, round robin; 0 or 1
	// means every link uses Inter.
	Sites int
	// Intra applies between nodes of one site, Inter between sites; with
	// several sites, InterLatency gives the one-way latency per site pair.
	Intra, Inter mesh.LinkShape
	InterLatency func(a, b int) time.Duration
}

// Emulated reports whether links are emulated (not plain loopback).
func (w WAN) Emulated() bool { return w.Name != "" && w.Name != "lan" }

// Site returns the site of node i.
func (w WAN) Site(i int) int {
	if w.Sites <= 1 {
		return 0
	}
	return i % w.Sites
}

// LinkBetween returns the shape of the link between nodes i and j.
func (w WAN) LinkBetween(i, j int) mesh.LinkShape {
	si, sj := w.Site(i), w.Site(j)
	if w.Sites > 1 && si == sj {
		return w.Intra
	}
	l := w.Inter
	if w.InterLatency != nil {
		l.Latency = w.InterLatency(si, sj)
	}
	return l
}

const (
	mbit = 1e6 / 8
	gbit = 1e9 / 8
)

// WANProfiles lists the named profiles.
func WANProfiles() []string { return []string{"lan", "geo3"} }

// ParseWAN parses a profile: "lan" (no emulation), "geo3" (three sites; 1 ms
// and 1 Gbit/s inside a site; 40, 80 and 120 ms one way and 100 Mbit/s
// between sites 0-1, 1-2 and 0-2), or a custom uniform link such as
// "latency=50ms,bandwidth=100Mbit".
func ParseWAN(s string) (WAN, error) {
	switch s {
	case "", "lan":
		return WAN{Name: "lan"}, nil
	case "geo3":
		return WAN{
			Name:         "geo3",
			Sites:        3,
			Intra:        mesh.LinkShape{Latency: time.Millisecond, Bandwidth: gbit},
			Inter:        mesh.LinkShape{Bandwidth: 100 * mbit},
			InterLatency: geo3Latency,
		}, nil
	}
	w := WAN{Name: s}
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			return WAN{}, fmt.Errorf("WAN profile %q: %q is not key=value (want lan, geo3 or latency=50ms,bandwidth=100Mbit)", s, part)
		}
		switch k {
		case "latency":
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 {
				return WAN{}, fmt.Errorf("WAN profile %q: latency %q is not a duration >= 0", s, v)
			}
			w.Inter.Latency = d
		case "bandwidth":
			bw, err := parseBandwidth(v)
			if err != nil {
				return WAN{}, fmt.Errorf("WAN profile %q: %w", s, err)
			}
			w.Inter.Bandwidth = bw
		default:
			return WAN{}, fmt.Errorf("WAN profile %q: unknown key %q (want latency or bandwidth)", s, k)
		}
	}
	return w, nil
}

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
