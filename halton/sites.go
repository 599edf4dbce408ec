package halton

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"math/bits"
	"slices"
	"time"
)

// Sites.
//
// On a WAN whose members sit in a few sites (data centres, regions), the
// flat overlay relays updates across sites at random: a path of three hops
// may cross two or three inter-site links, each costing tens of
// milliseconds, where a full mesh crosses one. BuildSites keeps the update
// to at most one inter-site link:
//
//   - within a site, the members form the flat overlay of that site alone
//     (Build over the site's members), and an origin's update spreads along
//     its tree there;
//   - an origin also links to one member of every other site, its entry
//     there, and sends its update to each entry directly;
//   - the entry spreads it within its site along its own tree in that
//     site's overlay.
//
// Every member therefore receives each update exactly once, after at most
// one inter-site hop, and an origin sends S−1 inter-site messages per
// update instead of the P−|site| of a full mesh or the one to three
// inter-site hops per path of the flat overlay. The entry of origin o in
// site B is the owner, among B's members, of a ring point drawn from o's
// hash and B's label: entries spread evenly over B (each member owns
// sixteen virtual points, as in the flat overlay) and a join or leave in B
// only moves the entries whose points fall in its arcs.
//
// The overlay is a pure function of the membership and of every member's
// site label, so members agree on it as long as they agree on the labels;
// members that disagree on some label (one has not heard the other's
// latest yet) relay along different trees for a while, which duplicates or
// withholds some deliveries but never makes an update apply twice or get
// lost: receivers drop duplicates, and retransmission pulls what the
// overlay withheld. With one site, or with more sites than the flat
// overlay has links per member (DiameterBound), BuildSites is Build: an
// origin's S−1 direct inter-site links are then no better than the flat
// overlay's log2 P. So it is while some member has no label: every member
// sees the same missing label and builds the same flat overlay.
//
// Labels come from measured round-trip times (SiteLabel): a member's site
// is itself and every member nearer than the first clear gap in its sorted
// round-trip times, and its label is the least id of that set (none when
// the set holds every member it measured: one site). Members of a site
// with clear latency clusters all see the same set and pick the same label
// without talking to each other.

const siteDomain = "sketchmesh/halton/sites/v1\x00"

// Site clustering thresholds: a member is in self's site when its
// round-trip time lies below the first gap in self's sorted round-trip
// times (0 for self first) where a time is at least SiteGapRatio times the
// one before it and SiteGapMin above it. The ratio alone would split a
// data centre at 0.1 vs 0.5 ms; the minimum alone would split sites 150
// and 180 ms away from self. WAN sites are tens of milliseconds apart, the
// members of one site a few at most; a member whose nearest peer is
// already SiteGapMin away is a site of its own.
const (
	SiteGapRatio = 4
	SiteGapMin   = 20 * time.Millisecond
)

// SiteLabel returns the label of self's site given self's measured
// round-trip times to other members (unmeasured members are absent): the
// least id among self and the members nearer than the first clear gap (see
// SiteGapRatio); one whose nearest member is already past a gap is a site
// of its own. A member that sees no clear gap sees one site, which the
// overlay cannot use (one site builds the flat overlay, as a missing label
// does), and gets no label: "". Announced, such a label cost a mesh on one
// site a hello from every member to every other, P² deliveries, for
// nothing.
func SiteLabel(self string, rtt map[string]time.Duration) string {
	type near struct {
		id  string
		rtt time.Duration
	}
	byRTT := make([]near, 0, len(rtt))
	for id, d := range rtt {
		if id != self {
			byRTT = append(byRTT, near{id, max(d, 0)})
		}
	}
	slices.SortFunc(byRTT, func(a, b near) int { return cmp.Or(cmp.Compare(a.rtt, b.rtt), cmp.Compare(a.id, b.id)) })
	label, prev := self, time.Duration(0)
	for _, n := range byRTT {
		if n.rtt >= SiteGapRatio*prev && n.rtt-prev >= SiteGapMin {
			return label
		}
		label, prev = min(label, n.id), n.rtt
	}
	return ""
}

// SiteOverlay is the site-aware overlay of a membership (see BuildSites).
// It is immutable and safe for concurrent use.
type SiteOverlay struct {
	// flat is the whole overlay when there is one site (or too many);
	// every method then answers from it.
	flat *Overlay

	ids    []string // sorted
	index  map[string]int32
	labels []string   // site labels, sorted
	siteOf []int32    // member → site
	local  []*Overlay // per site, the flat overlay of its members
	// entries[o*S+s] is the member origin o sends its update to in site s;
	// o itself for its own site.
	entries []int32
	out, in [][]int32
	// ecc and hopSum are each member's largest and total hop count to the
	// other members of its site, in its site's overlay.
	ecc, hopSum []int
	diameter    int
	meanHops    float64
}

// BuildSites derives the site-aware overlay of a membership from every
// member's site label. Members may come in any order and with duplicates.
// With one site, with more sites than DiameterBound(P), or when some
// member has no label (empty or absent), it is Build(members): a member
// that has not measured its site yet, or that does not take part, turns
// the sites off for everyone alike.
func BuildSites(members []string, label map[string]string) *SiteOverlay {
	ids := slices.Clone(members)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	var labels []string
	for _, id := range ids {
		if label[id] == "" {
			return &SiteOverlay{flat: Build(ids)}
		}
		labels = append(labels, label[id])
	}
	slices.Sort(labels)
	labels = slices.Compact(labels)
	if len(labels) <= 1 || len(labels) > DiameterBound(len(ids)) {
		return &SiteOverlay{flat: Build(ids)}
	}
	n, ns := len(ids), len(labels)
	o := &SiteOverlay{ids: ids, index: make(map[string]int32, n), labels: labels, siteOf: make([]int32, n)}
	groups := make([][]string, ns)
	for i, id := range ids {
		o.index[id] = int32(i)
		s, _ := slices.BinarySearch(labels, label[id])
		o.siteOf[i] = int32(s)
		groups[s] = append(groups[s], id)
	}
	o.local = make([]*Overlay, ns)
	tables := make([]*pointTable, ns)
	for s, g := range groups {
		o.local[s] = Build(g)
		tables[s] = entryTable(g, o.index)
	}
	o.entries = make([]int32, n*ns)
	for i, id := range ids {
		m := hashMember(id)
		for s := range ns {
			if int32(s) == o.siteOf[i] {
				o.entries[i*ns+s] = int32(i)
				continue
			}
			// The point mixes the origin's seed with the site's label, so
			// that an origin's entries in different sites are unrelated.
			x := splitmix64(m.seed ^ labelHash(labels[s]))
			o.entries[i*ns+s] = int32(uint32(tables[s].first(x)))
		}
	}
	o.link()
	o.measure()
	return o
}

// entryTable holds the sixteen virtual points of each member of a site,
// carrying the member's index in the whole membership in its low 32 bits.
func entryTable(group []string, index map[string]int32) *pointTable {
	raw := make([]uint64, 0, len(group)*virtualPoints)
	for _, id := range group {
		m, i := hashMember(id), uint64(uint32(index[id]))
		s := m.seed
		raw = append(raw, m.pos&^0xffffffff|i)
		for range virtualPoints - 1 {
			s = splitmix64(s)
			raw = append(raw, s&^0xffffffff|i)
		}
	}
	return newPointTable(raw)
}

func labelHash(label string) uint64 {
	sum := sha256.Sum256([]byte(siteDomain + label))
	return binary.BigEndian.Uint64(sum[:8])
}

// link derives every member's out-links (its site's overlay plus its
// entries elsewhere) and in-links.
func (o *SiteOverlay) link() {
	n, ns := len(o.ids), len(o.labels)
	o.out, o.in = make([][]int32, n), make([][]int32, n)
	for i, id := range o.ids {
		s := o.siteOf[i]
		links := o.indices(o.local[s].Out(id))
		for t := range ns {
			if int32(t) != s {
				links = append(links, o.entries[i*ns+t])
			}
		}
		slices.Sort(links)
		o.out[i] = links
		for _, c := range links {
			o.in[c] = append(o.in[c], int32(i))
		}
	}
}

func (o *SiteOverlay) indices(ids []string) []int32 {
	idx := make([]int32, len(ids))
	for k, id := range ids {
		idx[k] = o.index[id]
	}
	return idx
}

// measure computes the diameter and mean hop count from each site's
// overlay: a member of the origin's site is as far as in that site's
// overlay, one elsewhere is one hop past the origin's entry there.
func (o *SiteOverlay) measure() {
	n, ns := len(o.ids), len(o.labels)
	o.ecc, o.hopSum = make([]int, n), make([]int, n)
	for _, l := range o.local {
		members := l.Members()
		for _, v := range members {
			vi := o.index[v]
			for _, w := range members {
				h := l.Hops(v, w)
				o.ecc[vi] = max(o.ecc[vi], h)
				o.hopSum[vi] += h
			}
		}
		o.diameter = max(o.diameter, l.Diameter())
	}
	var sum int
	for i := range n {
		for t := range ns {
			e := o.entries[i*ns+t]
			if int32(t) == o.siteOf[i] {
				sum += o.hopSum[i]
				continue
			}
			o.diameter = max(o.diameter, 1+o.ecc[e])
			sum += o.local[t].Len() + o.hopSum[e]
		}
	}
	if n > 1 {
		o.meanHops = float64(sum) / float64(n*(n-1))
	}
}

// Members returns the membership, sorted ascending.
func (o *SiteOverlay) Members() []string {
	if o.flat != nil {
		return o.flat.Members()
	}
	return slices.Clone(o.ids)
}

// Len returns the number of members.
func (o *SiteOverlay) Len() int {
	if o.flat != nil {
		return o.flat.Len()
	}
	return len(o.ids)
}

// Sites returns the number of sites the overlay is built over: 1 when it
// is the flat overlay.
func (o *SiteOverlay) Sites() int {
	if o.flat != nil {
		return 1
	}
	return len(o.labels)
}

// Site returns the label of id's site ("" when the overlay is flat or id
// is unknown).
func (o *SiteOverlay) Site(id string) string {
	if o.flat != nil {
		return ""
	}
	i, ok := o.index[id]
	if !ok {
		return ""
	}
	return o.labels[o.siteOf[i]]
}

// Out returns the peers id opens links to, sorted; nil for an unknown id.
func (o *SiteOverlay) Out(id string) []string {
	if o.flat != nil {
		return o.flat.Out(id)
	}
	i, ok := o.index[id]
	if !ok {
		return nil
	}
	return o.names(o.out[i])
}

// In returns the peers that open links to id, sorted; nil for an unknown id.
func (o *SiteOverlay) In(id string) []string {
	if o.flat != nil {
		return o.flat.In(id)
	}
	i, ok := o.index[id]
	if !ok {
		return nil
	}
	return o.names(o.in[i])
}

func (o *SiteOverlay) names(idx []int32) []string {
	if len(idx) == 0 {
		return nil
	}
	s := make([]string, len(idx))
	for k, i := range idx {
		s[k] = o.ids[i]
	}
	return s
}

// Forward returns the next hops to which at forwards origin's update,
// sorted, a subset of Out(at); nil when at is a leaf of origin's tree or
// either id is unknown.
func (o *SiteOverlay) Forward(origin, at string) []string {
	next := o.AppendForward(nil, origin, at)
	if len(next) == 0 {
		return nil
	}
	return next
}

// AppendForward appends Forward(origin, at) to dst and returns it.
func (o *SiteOverlay) AppendForward(dst []string, origin, at string) []string {
	if o.flat != nil {
		return o.flat.AppendForward(dst, origin, at)
	}
	oi, ok1 := o.index[origin]
	ai, ok2 := o.index[at]
	if !ok1 || !ok2 {
		return dst
	}
	ns := len(o.labels)
	so, sa := o.siteOf[oi], o.siteOf[ai]
	if so != sa {
		return o.local[sa].AppendForward(dst, o.ids[o.entries[int(oi)*ns+int(sa)]], at)
	}
	start := len(dst)
	dst = o.local[so].AppendForward(dst, origin, at)
	if oi == ai {
		for t := range ns {
			if int32(t) != so {
				dst = append(dst, o.ids[o.entries[int(oi)*ns+t]])
			}
		}
		slices.Sort(dst[start:])
	}
	return dst
}

// Hops returns how many hops origin's update takes to reach to: 0 when to
// is origin, -1 when either id is unknown.
func (o *SiteOverlay) Hops(origin, to string) int {
	if o.flat != nil {
		return o.flat.Hops(origin, to)
	}
	oi, ok1 := o.index[origin]
	ti, ok2 := o.index[to]
	if !ok1 || !ok2 {
		return -1
	}
	st := o.siteOf[ti]
	if o.siteOf[oi] == st {
		return o.local[st].Hops(origin, to)
	}
	return 1 + o.local[st].Hops(o.ids[o.entries[int(oi)*len(o.labels)+int(st)]], to)
}

// Diameter returns the largest hop count over all ordered pairs of members.
func (o *SiteOverlay) Diameter() int {
	if o.flat != nil {
		return o.flat.Diameter()
	}
	return o.diameter
}

// MeanHops returns the mean hop count over all ordered pairs of distinct
// members (0 with fewer than two).
func (o *SiteOverlay) MeanHops() float64 {
	if o.flat != nil {
		return o.flat.MeanHops()
	}
	return o.meanHops
}

// Connected reports whether every member reaches every other one.
func (o *SiteOverlay) Connected() bool {
	if o.flat != nil {
		return o.flat.Connected()
	}
	for _, l := range o.local {
		if !l.Connected() {
			return false
		}
	}
	return true
}

// Construction is "sites" for a site-aware overlay, otherwise the flat
// overlay's (see Overlay.Construction).
func (o *SiteOverlay) Construction() string {
	if o.flat != nil {
		return o.flat.Construction()
	}
	return "sites"
}

// Report measures the overlay as Overlay.Report does, counting messages by
// following every origin's tree round by round.
func (o *SiteOverlay) Report() Report {
	if o.flat != nil {
		r := o.flat.Report()
		r.Sites = 1
		return r
	}
	n := len(o.ids)
	r := Report{
		Nodes:                        n,
		Construction:                 o.Construction(),
		Sites:                        len(o.labels),
		Diameter:                     o.diameter,
		DiameterBound:                DiameterBound(n),
		MeanHops:                     o.meanHops,
		Connected:                    o.Connected(),
		FullMeshMessagesPerIteration: n * (n - 1),
		FullMeshLinksPerNode:         n - 1,
	}
	links := 0
	for v := range n {
		r.Edges += len(o.out[v])
		r.OutDegreeMax = max(r.OutDegreeMax, len(o.out[v]))
		r.InDegreeMax = max(r.InDegreeMax, len(o.in[v]))
		links += len(o.out[v]) + len(o.in[v]) - common(o.out[v], o.in[v])
	}
	r.OutDegreeMean = float64(r.Edges) / float64(n)
	r.LinksPerNode = float64(links) / float64(n)
	r.UpdateDeliveriesPerIteration, r.MessagesPerIteration = o.traffic()
	return r
}

// InterSite follows every origin's tree and counts the links between
// members of different sites (by label, which need not be the labels the
// overlay was built from) that updates cross: on average per update, that
// is per origin, and the most on one origin's path to one member.
func (o *SiteOverlay) InterSite(label map[string]string) (perUpdate float64, worstPath int) {
	ids := o.Members()
	if len(ids) == 0 {
		return 0, 0
	}
	total := 0
	type held struct {
		at      string
		crossed int
	}
	for _, origin := range ids {
		frontier := []held{{origin, 0}}
		for len(frontier) > 0 {
			var next []held
			for _, h := range frontier {
				for _, c := range o.Forward(origin, h.at) {
					x := h.crossed
					if label[c] != label[h.at] {
						x++
						total++
					}
					worstPath = max(worstPath, x)
					next = append(next, held{c, x})
				}
			}
			frontier = next
		}
	}
	return float64(total) / float64(len(ids)), worstPath
}

// traffic counts one iteration of all-to-all broadcast in synchronous
// rounds: deliveries, and messages as distinct (sender, next hop, round)
// triples, as the package documentation defines them.
func (o *SiteOverlay) traffic() (deliveries, messages int) {
	n := len(o.ids)
	start := make([]int, n+1)
	for v := range n {
		start[v+1] = start[v] + len(o.out[v])
	}
	rounds := make([]uint64, start[n]) // bit r−1: the edge carries a message in round r
	type held struct{ at, depth int32 }
	var frontier, next []held
	for origin := range n {
		frontier = append(frontier[:0], held{int32(origin), 0})
		for len(frontier) > 0 {
			next = next[:0]
			for _, h := range frontier {
				for _, c := range o.Forward(o.ids[origin], o.ids[h.at]) {
					ci := o.index[c]
					k, _ := slices.BinarySearch(o.out[h.at], ci)
					rounds[start[h.at]+k] |= 1 << h.depth
					deliveries++
					next = append(next, held{ci, h.depth + 1})
				}
			}
			frontier, next = next, frontier
		}
	}
	for _, m := range rounds {
		messages += bits.OnesCount64(m)
	}
	return deliveries, messages
}
