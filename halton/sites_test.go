package halton

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// randomSites labels p members "m-0" … with sites drawn from ns labels,
// every label used at least once.
func randomSites(rng *rand.Rand, p, ns int) ([]string, map[string]string) {
	ids := series(fmt.Sprintf("r%d-%%d", rng.Uint32()), p)
	label := map[string]string{}
	for i, id := range ids {
		s := i // the first ns members make every label appear
		if i >= ns {
			s = rng.IntN(ns)
		}
		label[id] = fmt.Sprintf("site-%d", s)
	}
	rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	return ids, label
}

// interSiteHops follows every origin's tree through the public API and
// returns, per (origin, receiver), how many inter-site links the update
// crossed on its way.
func interSiteHops(o *SiteOverlay, label map[string]string) map[[2]string]int {
	crossed := map[[2]string]int{}
	for _, origin := range o.Members() {
		type held struct {
			at      string
			crossed int
		}
		frontier := []held{{origin, 0}}
		for len(frontier) > 0 {
			var next []held
			for _, h := range frontier {
				for _, c := range o.Forward(origin, h.at) {
					x := h.crossed
					if label[c] != label[h.at] {
						x++
					}
					crossed[[2]string{origin, c}] = x
					next = append(next, held{c, x})
				}
			}
			frontier = next
		}
	}
	return crossed
}

// The property: for random site assignments, every update reaches every
// member exactly once along the trees, crossing exactly one inter-site link
// to a member of another site and none within its own; the counts BuildSites
// reports are those the trees produce.
func TestSitesReachEveryMemberOnceAcrossOneInterSiteLink(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 3))
	for trial := range 120 {
		p := 2 + rng.IntN(90)
		ns := 2 + rng.IntN(min(DiameterBound(p), p)-1)
		ids, label := randomSites(rng, p, ns)
		o := BuildSites(ids, label)
		if o.Construction() != "sites" || o.Sites() != ns {
			t.Fatalf("trial %d: P=%d with %d sites built %s over %d sites", trial, p, ns, o.Construction(), o.Sites())
		}
		deliveries, messages, rounds := simulate(t, o)
		r := o.Report()
		if deliveries != p*(p-1) || r.UpdateDeliveriesPerIteration != deliveries || r.MessagesPerIteration != messages {
			t.Fatalf("trial %d: P=%d: %d deliveries and %d messages simulated, %d and %d reported", trial, p, deliveries, messages, r.UpdateDeliveriesPerIteration, r.MessagesPerIteration)
		}
		if rounds != o.Diameter() || r.Diameter != rounds || !r.Connected || r.Sites != ns {
			t.Fatalf("trial %d: P=%d: %d rounds, report %+v", trial, p, rounds, r)
		}
		if perUpdate, worst := o.InterSite(label); perUpdate != float64(ns-1) || worst != 1 {
			t.Fatalf("trial %d: InterSite %v per update, worst path %d; want %d and 1", trial, perUpdate, worst, ns-1)
		}
		total := 0
		for pair, x := range interSiteHops(o, label) {
			want := 0
			if label[pair[0]] != label[pair[1]] {
				want = 1
			}
			if x != want {
				t.Fatalf("trial %d: %s's update crossed %d inter-site links to reach %s, want %d", trial, pair[0], x, pair[1], want)
			}
			total += o.Hops(pair[0], pair[1])
		}
		if mean := float64(total) / float64(p*(p-1)); math.Abs(mean-o.MeanHops()) > 1e-9 {
			t.Fatalf("trial %d: MeanHops %v, trees give %v", trial, o.MeanHops(), mean)
		}
		for _, id := range o.Members() {
			if o.Site(id) != label[id] {
				t.Fatalf("Site(%s) = %q, want %q", id, o.Site(id), label[id])
			}
		}
	}
}

// Links are the site's own overlay plus exactly one link into every other
// site, and In mirrors Out.
func TestSiteLinksAreTheSiteOverlayPlusOneEntryPerSite(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	ids, label := randomSites(rng, 150, 4)
	o := BuildSites(ids, label)
	groups := map[string][]string{}
	for _, id := range ids {
		groups[label[id]] = append(groups[label[id]], id)
	}
	in := map[string][]string{}
	for _, id := range o.Members() {
		local := Build(groups[label[id]])
		perSite := map[string]int{}
		for _, w := range o.Out(id) {
			perSite[label[w]]++
			in[w] = append(in[w], id)
		}
		for s, n := range perSite {
			if s == label[id] && n != len(local.Out(id)) || s != label[id] && n != 1 {
				t.Fatalf("%s (%s) has %d links into %s", id, label[id], n, s)
			}
		}
		if len(perSite) != 4 {
			t.Fatalf("%s links into %d sites, want 4", id, len(perSite))
		}
		for _, w := range local.Out(id) {
			if !slices.Contains(o.Out(id), w) {
				t.Fatalf("%s lost its site link to %s", id, w)
			}
		}
	}
	for _, id := range o.Members() {
		if got := o.In(id); !slices.Equal(got, in[id]) {
			t.Fatalf("In(%s) = %v, want %v", id, got, in[id])
		}
	}
}

// Entries spread over the members of a site: with sixteen ring points each,
// no member of a small site takes more than twice its share of the origins
// of a large one (one ring point each would give some members several
// times their share and others none).
func TestEntriesSpreadOverTheSite(t *testing.T) {
	ids := series("spread-%d", 340)
	label := map[string]string{}
	for i, id := range ids {
		label[id] = "large"
		if i < 20 {
			label[id] = []string{"small-a", "small-b"}[i%2]
		}
	}
	o := BuildSites(ids, label)
	worst, total := 0, 0
	for _, id := range ids[:20] {
		fromLarge := 0
		for _, v := range o.In(id) {
			if label[v] == "large" {
				fromLarge++
			}
		}
		worst, total = max(worst, fromLarge), total+fromLarge
	}
	if share := 320 / 10; total != 2*320 || worst > 2*share {
		t.Fatalf("the large site's origins enter the small sites %d times (want %d), at most %d times at one member (share %d)", total, 2*320, worst, share)
	}
}

// One site is today's overlay exactly, and so is a membership with more
// sites than the flat overlay has links per member, or one in which a
// member has no label.
func TestOneSiteIsTheFlatOverlay(t *testing.T) {
	for _, p := range []int{0, 1, 2, 7, 8, 33, 100} {
		ids := nodes(p)
		flat := Build(ids)
		one := map[string]string{}
		many := map[string]string{}
		unmeasured := map[string]string{}
		for i, id := range ids {
			one[id] = "dc"
			many[id] = fmt.Sprint(i)
			if i > 0 {
				unmeasured[id] = fmt.Sprint(i % 2) // two sites, but the first member has no label
			}
		}
		for name, label := range map[string]map[string]string{"no labels": nil, "one label": one, "a site each": many, "one unlabelled": unmeasured} {
			if name == "a site each" && p <= 3 {
				continue // up to 3 members, a site each is within the bound
			}
			o := BuildSites(ids, label)
			if o.Sites() != 1 || o.Construction() != flat.Construction() {
				t.Fatalf("P=%d, %s: %d sites, %s", p, name, o.Sites(), o.Construction())
			}
			for _, v := range ids {
				if !slices.Equal(o.Out(v), flat.Out(v)) || !slices.Equal(o.In(v), flat.In(v)) {
					t.Fatalf("P=%d, %s: links of %s differ from Build's", p, name, v)
				}
				for _, w := range ids {
					if !slices.Equal(o.Forward(v, w), flat.Forward(v, w)) || o.Hops(v, w) != flat.Hops(v, w) {
						t.Fatalf("P=%d, %s: Forward or Hops(%s, %s) differ from Build's", p, name, v, w)
					}
				}
			}
			want := flat.Report()
			want.Sites = 1
			if got := o.Report(); got != want || o.Diameter() != flat.Diameter() || o.MeanHops() != flat.MeanHops() {
				t.Fatalf("P=%d, %s: report %+v, want %+v", p, name, got, want)
			}
		}
	}
}

// The overlay depends on the membership and labels only, not on their order.
func TestSitesAreAFunctionOfMembershipAndLabels(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	ids, label := randomSites(rng, 60, 3)
	a := BuildSites(ids, label)
	shuffled := append(slices.Clone(ids), ids[:5]...)
	rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	b := BuildSites(shuffled, maps.Clone(label))
	for _, v := range ids {
		for _, w := range ids {
			if !slices.Equal(a.Forward(v, w), b.Forward(v, w)) {
				t.Fatalf("Forward(%s, %s) differs between builds", v, w)
			}
		}
	}
	if a.Forward("nobody", ids[0]) != nil || a.Hops(ids[0], "nobody") != -1 || a.Out("nobody") != nil || a.Site("nobody") != "" {
		t.Fatal("unknown ids answered")
	}
}

// On a mesh like geo3 (three sites of eight members, round trips of 2 ms
// inside a site and 80 to 240 ms between sites, some unmeasured), a site
// is a latency cluster; one LAN, or members equally far apart, are not
// split.
func TestSiteLabelFindsLatencyClusters(t *testing.T) {
	ms := time.Millisecond
	oneWay := [3][3]time.Duration{{ms, 40 * ms, 120 * ms}, {40 * ms, ms, 80 * ms}, {120 * ms, 80 * ms, ms}}
	ids := series("g-%02d", 24)
	rng := rand.New(rand.NewPCG(13, 14))
	labels := map[string]string{}
	for i, self := range ids {
		rtt := map[string]time.Duration{}
		for j, id := range ids {
			if rng.IntN(10) > 0 { // a tenth unmeasured yet
				jitter := time.Duration(rng.IntN(500)) * time.Microsecond
				rtt[id] = 2*oneWay[i%3][j%3] + jitter
			}
		}
		labels[self] = SiteLabel(self, rtt)
	}
	for i, id := range ids {
		if want := ids[i%3]; labels[id] != want && labels[id] != ids[i%3+3] {
			t.Fatalf("%s labelled %q, want %q (or the next member of its site when the first is unmeasured)", id, labels[id], want)
		}
	}
	cases := []struct {
		name string
		rtt  map[string]time.Duration
		want string
	}{
		{"no measurement", nil, ""},
		{"one LAN", map[string]time.Duration{"a": 300 * time.Microsecond, "b": 100 * time.Microsecond, "z": 2 * ms}, ""},
		{"equally far", map[string]time.Duration{"a": 100 * ms, "b": 101 * ms}, "m"},
		{"alone at its site", map[string]time.Duration{"a": 80 * ms, "b": 81 * ms, "c": 240 * ms}, "m"},
		{"ratio without distance", map[string]time.Duration{"a": 100 * time.Microsecond, "b": 5 * ms, "c": 90 * ms}, "a"},
		{"nearest already far", map[string]time.Duration{"a": 30 * ms, "b": 35 * ms, "z": 200 * ms}, "m"},
		{"self ignored", map[string]time.Duration{"m": 0, "a": ms, "b": 100 * ms}, "a"},
	}
	for _, c := range cases {
		if got := SiteLabel("m", c.rtt); got != c.want {
			t.Errorf("%s: SiteLabel = %q, want %q", c.name, got, c.want)
		}
	}
}
