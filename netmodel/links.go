package netmodel

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// LinkProfile is a run's network: per site pair a one-way latency and
// a bandwidth, plus faults that apply to every link. Node i sits at site
// i mod Sites.
type LinkProfile struct {
	// Name is "lan", "geo3" or "custom".
	Name string
	// Sites is the number of sites (at least 1); Latency[a][b] and
	// Bandwidth[a][b] describe the directed link from site a to site b, a
	// node's links to the other nodes of its own site included.
	Sites     int
	Latency   [][]time.Duration
	Bandwidth [][]float64 // bytes per second
	// Jitter is the mean of an exponentially distributed delay added to
	// every message's latency (a long tail, as on real paths). Jitter lets
	// later messages overtake earlier ones on a link.
	Jitter time.Duration
	// Loss, Duplicate and Reorder are per-message probabilities: a lost
	// message uses the link but never arrives; a duplicated one arrives a
	// second time, one jitter (or a tenth of the latency) later; a reordered
	// one is held back by one extra latency, so later messages overtake it.
	Loss, Duplicate, Reorder float64
}

// ParseLinkProfile reads a network: "lan" (one site, 0.1 ms one way,
// 10 Gbit/s), "geo3" (three sites; 1 ms and 1 Gbit/s inside a site; 40, 80
// and 120 ms one way and 100 Mbit/s between sites 0-1, 1-2 and 0-2), or a
// uniform custom link "latency=50ms,bandwidth=100Mbit". Each may be followed
// by faults: ",loss=0.01", ",jitter=5ms", ",dup=0.001", ",reorder=0.01", as
// in "geo3,loss=0.01". The empty string is "lan".
func ParseLinkProfile(s string) (LinkProfile, error) {
	parts := strings.Split(s, ",")
	var p LinkProfile
	switch parts[0] {
	case "", "lan":
		p = uniformProfile("lan", 100*time.Microsecond, 10*gbit)
		parts = parts[1:]
	case "geo3":
		p = geo3Profile()
		parts = parts[1:]
	default:
		p = LinkProfile{Name: "custom", Sites: 1}
	}
	var latency time.Duration
	var bandwidth float64
	seen := map[string]bool{}
	for _, part := range parts {
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			return LinkProfile{}, fmt.Errorf("link profile %q: %q is not key=value (want lan, geo3 or latency=50ms,bandwidth=100Mbit, then loss=, jitter=, dup=, reorder=)", s, part)
		}
		if seen[k] {
			return LinkProfile{}, fmt.Errorf("link profile %q: %s given twice", s, k)
		}
		seen[k] = true
		var err error
		switch k {
		case "latency", "bandwidth":
			if p.Name != "custom" {
				return LinkProfile{}, fmt.Errorf("link profile %q: %s fixes latency and bandwidth; only loss, jitter, dup and reorder may follow it", s, p.Name)
			}
			if k == "latency" {
				latency, err = time.ParseDuration(v)
				if err == nil && latency < 0 {
					err = fmt.Errorf("negative")
				}
				if err != nil {
					return LinkProfile{}, fmt.Errorf("link profile %q: latency %q is not a duration >= 0", s, v)
				}
			} else if bandwidth, err = parseBandwidth(v); err != nil {
				return LinkProfile{}, fmt.Errorf("link profile %q: %w", s, err)
			}
		case "jitter":
			if p.Jitter, err = time.ParseDuration(v); err != nil || p.Jitter < 0 {
				return LinkProfile{}, fmt.Errorf("link profile %q: jitter %q is not a duration >= 0", s, v)
			}
		case "loss", "dup", "reorder":
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || !(f >= 0 && f < 1) {
				return LinkProfile{}, fmt.Errorf("link profile %q: %s %q is not a probability in [0, 1)", s, k, v)
			}
			switch k {
			case "loss":
				p.Loss = f
			case "dup":
				p.Duplicate = f
			default:
				p.Reorder = f
			}
		default:
			return LinkProfile{}, fmt.Errorf("link profile %q: unknown key %q (want latency, bandwidth, loss, jitter, dup or reorder)", s, k)
		}
	}
	if p.Name == "custom" {
		if !seen["latency"] || !seen["bandwidth"] {
			return LinkProfile{}, fmt.Errorf("link profile %q: a custom link needs latency= and bandwidth= (or use lan or geo3)", s)
		}
		q := uniformProfile("custom", latency, bandwidth)
		q.Jitter, q.Loss, q.Duplicate, q.Reorder = p.Jitter, p.Loss, p.Duplicate, p.Reorder
		p = q
	}
	return p, nil
}

func uniformProfile(name string, latency time.Duration, bandwidth float64) LinkProfile {
	return LinkProfile{
		Name:      name,
		Sites:     1,
		Latency:   [][]time.Duration{{latency}},
		Bandwidth: [][]float64{{bandwidth}},
	}
}

func geo3Profile() LinkProfile {
	p := LinkProfile{Name: "geo3", Sites: 3}
	for a := range 3 {
		var lat []time.Duration
		var bw []float64
		for b := range 3 {
			if a == b {
				lat, bw = append(lat, time.Millisecond), append(bw, gbit)
			} else {
				lat, bw = append(lat, geo3Latency(a, b)), append(bw, 100*mbit)
			}
		}
		p.Latency, p.Bandwidth = append(p.Latency, lat), append(p.Bandwidth, bw)
	}
	return p
}

// Validate checks a profile built by hand rather than parsed.
func (p *LinkProfile) Validate() error {
	if p.Sites < 1 || len(p.Latency) != p.Sites || len(p.Bandwidth) != p.Sites {
		return fmt.Errorf("link profile %q: %d sites but %d latency and %d bandwidth rows", p.Name, p.Sites, len(p.Latency), len(p.Bandwidth))
	}
	for a := range p.Sites {
		if len(p.Latency[a]) != p.Sites || len(p.Bandwidth[a]) != p.Sites {
			return fmt.Errorf("link profile %q: site %d has %d latencies and %d bandwidths, want %d", p.Name, a, len(p.Latency[a]), len(p.Bandwidth[a]), p.Sites)
		}
		for b := range p.Sites {
			if p.Latency[a][b] < 0 || !(p.Bandwidth[a][b] > 0) {
				return fmt.Errorf("link profile %q: link %d→%d needs latency >= 0 and bandwidth > 0", p.Name, a, b)
			}
		}
	}
	for _, f := range []float64{p.Loss, p.Duplicate, p.Reorder} {
		if !(f >= 0 && f < 1) {
			return fmt.Errorf("link profile %q: loss, dup and reorder must be probabilities in [0, 1)", p.Name)
		}
	}
	if p.Jitter < 0 {
		return fmt.Errorf("link profile %q: negative jitter", p.Name)
	}
	return nil
}

// MaxLatency is the largest one-way latency of any link.
func (p *LinkProfile) MaxLatency() time.Duration {
	var m time.Duration
	for _, row := range p.Latency {
		for _, l := range row {
			m = max(m, l)
		}
	}
	return m
}

// MinBandwidth is the smallest bandwidth of any link, in bytes per second;
// +Inf for a profile with no links.
func (p *LinkProfile) MinBandwidth() float64 {
	m := math.Inf(1)
	for _, row := range p.Bandwidth {
		for _, b := range row {
			m = min(m, b)
		}
	}
	return m
}

// String describes the profile in the syntax ParseLinkProfile reads when it
// has one, for reports.
func (p LinkProfile) String() string {
	var b strings.Builder
	switch p.Name {
	case "lan", "geo3":
		b.WriteString(p.Name)
	default:
		if p.Sites == 1 {
			fmt.Fprintf(&b, "latency=%v,bandwidth=%gMbit", p.Latency[0][0], p.Bandwidth[0][0]*8/1e6)
		} else {
			fmt.Fprintf(&b, "%s(%d sites)", p.Name, p.Sites)
		}
	}
	if p.Jitter > 0 {
		fmt.Fprintf(&b, ",jitter=%v", p.Jitter)
	}
	for _, f := range []struct {
		k string
		v float64
	}{{"loss", p.Loss}, {"dup", p.Duplicate}, {"reorder", p.Reorder}} {
		if f.v > 0 {
			fmt.Fprintf(&b, ",%s=%g", f.k, f.v)
		}
	}
	return b.String()
}

// Emulated reports whether the profile is anything but lan: the testnet
// then shapes its links, and otherwise runs over plain loopback.
func (p LinkProfile) Emulated() bool { return p.Name != "" && p.Name != "lan" }

// Site returns the site of node i: nodes are spread round robin.
func (p LinkProfile) Site(i int) int { return i % max(p.Sites, 1) }

// Link returns the one-way latency and the bandwidth (bytes per second)
// of the link from node i to node j.
func (p LinkProfile) Link(i, j int) (time.Duration, float64) {
	a, b := p.Site(i), p.Site(j)
	return p.Latency[a][b], p.Bandwidth[a][b]
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
