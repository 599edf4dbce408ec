package halton

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"math/bits"
	"slices"
)

const (
	// hashDomain separates ring positions from any other use of SHA-256 over
	// peer ids and versions the construction: every peer must derive the same
	// overlay, so changing how links are chosen means changing this string.
	hashDomain = "sketchmesh/halton/v1\x00"

	// virtualPoints is how many ring points each member owns for the purpose
	// of receiving links. With one point a member's share of the ring is
	// exponentially distributed, so members hashed just after a neighbour
	// are almost never chosen and hang off their predecessor alone; sixteen
	// points shrink the spread of the share to a quarter of its mean.
	virtualPoints = 16

	// walkLimit caps how many Halton offsets a member tries while looking
	// for distinct link targets. It only binds when a few members own almost
	// the whole ring, and then the member keeps fewer links.
	walkLimit = 256

	// sqrt2Q32 is √2 in 32.32 fixed point: the degree dither is computed in
	// integers so that every platform derives identical link counts.
	sqrt2Q32 = 0x16a09e668
)

// member is what a peer id hashes to.
type member struct {
	pos    uint64 // ring position
	rot    uint64 // rotation applied to this member's Halton offsets
	dither uint64 // places the member's out-degree between ⌊log2 P⌋ and ⌈log2 P⌉+1
	seed   uint64 // seeds the member's extra virtual points
}

func hashMember(id string) member {
	sum := sha256.Sum256([]byte(hashDomain + id))
	return member{
		pos:    binary.BigEndian.Uint64(sum[0:8]),
		rot:    binary.BigEndian.Uint64(sum[8:16]),
		dither: binary.BigEndian.Uint64(sum[16:24]),
		seed:   binary.BigEndian.Uint64(sum[24:32]),
	}
}

// splitmix64 stretches one digest word into a stream of independent-looking
// words; it is a bijection, so distinct seeds never share a stream prefix.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// log2Ceil returns ⌈log2 p⌉ for p >= 1.
func log2Ceil(p int) int {
	if p <= 1 {
		return 0
	}
	return bits.Len64(uint64(p - 1))
}

// DiameterBound returns ⌈log2 p⌉+1, the largest diameter Build allows for p
// members (0 when p is 0).
func DiameterBound(p int) int {
	if p <= 0 {
		return 0
	}
	return log2Ceil(p) + 1
}

// outDegree is ⌊log2(P·s)⌋ capped at P−1, with s spread over [√2, 2√2)
// by the member's hash. Tying the degree to ⌈log2 P⌉ directly would give
// every member one more link whenever P passes a power of two; with the
// dither only the members whose threshold P crosses gain one, about 1.4 per
// join. The mean is about log2 P + ½, and since P·s < 4·2^⌈log2 P⌉ the
// degree never exceeds ⌈log2 P⌉+1.
func outDegree(p int, dither uint64) int {
	if p <= 1 {
		return 0
	}
	frac := dither >> 33 // 31 bits, so that the product below fits 64
	s := sqrt2Q32 + frac*sqrt2Q32>>31
	hi, lo := bits.Mul64(uint64(p), s)
	d := bits.Len64(lo) - 1 - 32
	if hi != 0 {
		d = 64 + bits.Len64(hi) - 1 - 32
	}
	return min(d, p-1)
}

// Overlay is a directed overlay over a fixed membership together with one
// broadcast tree per origin. It is immutable after Build and safe for
// concurrent use.
type Overlay struct {
	ids   []string         // sorted; a member's index is its rank here
	index map[string]int32 // id → index
	ring  []int32          // indices in ring order
	out   [][]int32        // sorted by index
	in    [][]int32        // sorted by index
	edges int
	chord bool
	// parents[pStart[c]:pStart[c+1]] are c's in-neighbours in the order c
	// prefers them as tree parent: nearest behind it on the ring first. The
	// order does not depend on the origin, so a relay that is c's parent for
	// one origin tends to be its parent for others too, which lets relays
	// batch. A position in parents also names an edge, parents[k] → c.
	parents, pStart []int32
	// dist[o*n+v] is one more than the hop count from o to v, so that the
	// zero value means unreachable and a fresh allocation needs no filling.
	// The breadth-first search, which settles 64 origins of one
	// destination at a time, writes it by destination and transposes it
	// when done: a relay looks up hop counts from one origin to its
	// neighbours and theirs (Forward), which then lie in one row, where
	// each was a cache miss in a row of its own.
	dist []uint8
	// kids[v*n+o] has bit j set when out[v][j] is v's child in o's tree;
	// nil when some member has more out-neighbours than the mask holds
	// (then the children are found by a scan, see appendChildren). It
	// makes a relay's children one lookup, where a scan of each
	// neighbour's in-neighbours was a third of the simulator's routing. It
	// is kept by relay, as the search writes it: a relay routes a batch of
	// updates of many origins, whose entries then lie in one row.
	kids      []uint16
	diameter  int
	meanHops  float64
	connected bool
	// deliveries and messages count one iteration of all-to-all broadcast.
	deliveries, messages int
}

// Build derives the overlay of a membership: members may come in any order
// and with duplicates; an empty or one-member membership is valid.
//
// Build runs the Halton construction, measures its diameter exactly and,
// if it exceeds ⌈log2 P⌉+1, uses the rank-exponential fallback instead (see
// the package documentation). It takes O(P²) time and P² bytes, the price
// of answering Forward and Hops for every origin without further search.
func Build(members []string) *Overlay {
	return build(members, -1)
}

// build is Build with the diameter limit for the Halton construction
// exposed for tests; a negative limit means DiameterBound.
func build(members []string, limit int) *Overlay {
	ids := slices.Clone(members)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	n := len(ids)
	o := &Overlay{ids: ids, index: make(map[string]int32, n), ring: make([]int32, n)}
	ms := make([]member, n)
	for i, id := range ids {
		o.index[id] = int32(i)
		ms[i] = hashMember(id)
		o.ring[i] = int32(i)
	}
	slices.SortFunc(o.ring, func(a, b int32) int {
		return cmp.Or(cmp.Compare(ms[a].pos, ms[b].pos), cmp.Compare(a, b))
	})

	bound := DiameterBound(n)
	if limit < 0 {
		limit = bound
	}
	if limit > 0 || n < 2 { // with n ≥ 2 a limit of 0 only asks for the fallback
		o.setLinks(haltonLinks(ms, o.ring))
		if o.measure(limit) {
			return o
		}
	}
	o.chord = true
	o.setLinks(chordLinks(o.ring))
	o.measure(bound) // cannot fail: chordLinks has diameter ⌈log2 P⌉
	return o
}

// haltonLinks gives each member its ring successor plus links to the owners
// of the points pos + rot + h_k on the ring, h_k = Radical(k, 2) in 64-bit
// fixed point, k = 0, 1, 2, …, skipping targets it already has.
func haltonLinks(ms []member, ring []int32) [][]int32 {
	n := len(ms)
	out := make([][]int32, n)
	if n < 2 {
		return out
	}
	// A virtual point keeps the top 32 bits of its ring position and
	// carries its owner in the low 32: ties are ordered, and finding the
	// owner of a point is a search over plain integers. 2^32 cells are far
	// finer than any membership this package can hold.
	raw := make([]uint64, 0, n*virtualPoints)
	for i, m := range ms {
		s := m.seed
		raw = append(raw, m.pos&^0xffffffff|uint64(i))
		for range virtualPoints - 1 {
			s = splitmix64(s)
			raw = append(raw, s&^0xffffffff|uint64(i))
		}
	}
	pts := newPointTable(raw)
	owner := func(x uint64) int32 { return int32(uint32(pts.first(x))) }
	flat := make([]int32, 0, n*(bits.Len(uint(n))+1))
	for r, i := range ring {
		m := ms[i]
		d := outDegree(n, m.dither)
		first := len(flat)
		flat = append(flat, ring[(r+1)%n])
		for k := uint64(0); len(flat)-first < d && k < walkLimit; k++ {
			t := owner(m.pos + m.rot + bits.Reverse64(k))
			if t != i && !slices.Contains(flat[first:], t) {
				flat = append(flat, t)
			}
		}
		links := flat[first:len(flat):len(flat)]
		slices.Sort(links)
		out[i] = links
	}
	return out
}

// pointTable is a sorted set of ring points bucketed by their top bits.
// Hashed points are uniform, so with at least as many buckets as points
// sorting is one counting pass and a lookup inspects O(1) points.
type pointTable struct {
	shift uint
	start []int32 // bucket b holds pts[start[b]:start[b+1]]
	pts   []uint64
}

func newPointTable(raw []uint64) *pointTable {
	nb := 1 << bits.Len(uint(len(raw)))
	t := &pointTable{shift: uint(64 - bits.Len(uint(len(raw)))), start: make([]int32, nb+1), pts: make([]uint64, len(raw))}
	for _, x := range raw {
		t.start[x>>t.shift+1]++
	}
	for b := range nb {
		t.start[b+1] += t.start[b]
	}
	fill := slices.Clone(t.start[:nb])
	for _, x := range raw {
		b := x >> t.shift
		t.pts[fill[b]] = x
		fill[b]++
	}
	for b := range nb {
		if t.start[b+1]-t.start[b] > 1 {
			slices.Sort(t.pts[t.start[b]:t.start[b+1]])
		}
	}
	return t
}

// first returns the first point at or after x clockwise: the smallest point
// ≥ x, or the smallest point of all when x is past the last one.
func (t *pointTable) first(x uint64) uint64 {
	for _, p := range t.pts[t.start[x>>t.shift]:] { // later buckets hold larger points
		if p >= x {
			return p
		}
	}
	return t.pts[0]
}

// chordLinks links the member at ring rank r to ranks r+1, r+2, r+4, …,
// r+2^(⌈log2 P⌉−1) (mod P): any rank distance below P is a sum of distinct
// such powers, so the diameter is at most ⌈log2 P⌉ whatever the positions.
func chordLinks(ring []int32) [][]int32 {
	n := len(ring)
	out := make([][]int32, n)
	m := log2Ceil(n)
	flat := make([]int32, 0, n*m)
	for r, i := range ring {
		first := len(flat)
		for k := range m {
			flat = append(flat, ring[(r+1<<k)%n])
		}
		links := flat[first:len(flat):len(flat)]
		slices.Sort(links)
		out[i] = links
	}
	return out
}

// setLinks installs out-links and derives in-links and parent preferences.
func (o *Overlay) setLinks(out [][]int32) {
	n := len(out)
	o.out = out
	indeg := make([]int32, n)
	o.edges = 0
	for _, ls := range out {
		o.edges += len(ls)
		for _, c := range ls {
			indeg[c]++
		}
	}
	o.pStart = make([]int32, n+1)
	for c := range n {
		o.pStart[c+1] = o.pStart[c] + indeg[c]
	}
	inFlat := make([]int32, o.edges)
	o.in = make([][]int32, n)
	fill := slices.Clone(o.pStart[:n])
	for v, ls := range out { // ascending v leaves each in-list sorted
		for _, c := range ls {
			inFlat[fill[c]] = int32(v)
			fill[c]++
		}
	}
	for c := range n {
		o.in[c] = inFlat[o.pStart[c]:o.pStart[c+1]:o.pStart[c+1]]
	}
	// Visiting sources in descending ring order lists each member's
	// in-neighbours by descending rank: first those ranked above it (behind
	// it across the wrap), then those ranked below. Rotating the two runs
	// puts the nearest behind first.
	o.parents = make([]int32, o.edges)
	rank := make([]int32, n)
	for r, v := range o.ring {
		rank[v] = int32(r)
	}
	copy(fill, o.pStart[:n])
	for r := n - 1; r >= 0; r-- {
		v := o.ring[r]
		for _, c := range out[v] {
			o.parents[fill[c]] = v
			fill[c]++
		}
	}
	for c := range n {
		ps := o.parents[o.pStart[c]:o.pStart[c+1]]
		above := 0
		for above < len(ps) && rank[ps[above]] > rank[c] {
			above++
		}
		slices.Reverse(ps[:above]) // rotate ps[:above] to the end
		slices.Reverse(ps[above:])
		slices.Reverse(ps)
	}
}

// measure computes every hop count by breadth-first search from all origins
// at once, 64 origins per machine word, and counts the traffic of one
// iteration on the way (see the package documentation). It gives up and
// reports false as soon as some member is not reached within limit hops,
// which must be at most 64.
func (o *Overlay) measure(limit int) bool {
	n := len(o.ids)
	o.dist = make([]uint8, n*n)
	// outPos[k] is c's place in out[parents[k]], for edge parents[k] → c.
	var outPos []uint8
	o.kids = nil
	if o.maxOutDegree() <= 16 {
		o.kids = make([]uint16, n*n)
		outPos = o.outPositions()
	}
	o.diameter, o.meanHops, o.connected = 0, 0, true
	o.deliveries, o.messages = 0, 0
	// rounds[k] has bit r−1 set when edge parents[k] → c carries a message
	// in round r.
	rounds := make([]uint64, o.edges)
	cur := make([]uint64, n)
	next := make([]uint64, n)
	var sum uint64
	for base := 0; base < n; base += 64 {
		w := min(64, n-base)
		full := ^uint64(0) >> (64 - w)
		clear(cur)
		for b := range w {
			cur[base+b] = 1 << b
			o.dist[(base+b)*n+base+b] = 1 // row and column coincide
		}
		done := 0 // members reached by every origin of the block
		if w == 1 {
			done = 1 // a lone origin has reached itself
		}
		for r := 1; done < n; r++ {
			changed := false
			for v := range n {
				got := cur[v]
				if got == full {
					next[v] = got
					continue
				}
				// Walking in-neighbours in preference order hands each newly
				// reached origin to its tree parent: an origin in cur[u] but
				// not yet in v's set is at depth r−1 at u.
				ps := o.parents[o.pStart[v]:o.pStart[v+1]]
				rs := rounds[o.pStart[v]:o.pStart[v+1]]
				for k, u := range ps {
					if take := cur[u] &^ got; take != 0 {
						got |= take
						rs[k] |= 1 << (r - 1)
						if o.kids != nil {
							kids, bit := o.kids[int(u)*n+base:int(u)*n+base+w], uint16(1)<<outPos[int(o.pStart[v])+k]
							for ; take != 0; take &= take - 1 {
								kids[bits.TrailingZeros64(take)] |= bit
							}
						}
						if got == full {
							break
						}
					}
				}
				next[v] = got
				fresh := got &^ cur[v]
				if fresh == 0 {
					continue
				}
				if r > limit {
					o.connected = false
					return false
				}
				changed = true
				if got == full {
					done++
				}
				c := bits.OnesCount64(fresh)
				o.deliveries += c
				sum += uint64(r) * uint64(c)
				row := o.dist[v*n+base : v*n+base+w]
				for ; fresh != 0; fresh &= fresh - 1 {
					row[bits.TrailingZeros64(fresh)] = uint8(r + 1)
				}
			}
			cur, next = next, cur
			if changed {
				o.diameter = max(o.diameter, r)
			} else if done < n {
				o.connected = false // some origin of the block never arrives
				return false
			}
		}
	}
	for _, m := range rounds {
		o.messages += bits.OnesCount64(m)
	}
	if n > 1 {
		o.meanHops = float64(sum) / float64(n*(n-1))
	}
	transpose(o.dist, n)
	return true
}

// maxOutDegree returns the most out-neighbours any member has.
func (o *Overlay) maxOutDegree() int {
	most := 0
	for _, ls := range o.out {
		most = max(most, len(ls))
	}
	return most
}

// outPositions returns, for each edge parents[k] → c, c's place in
// out[parents[k]].
func (o *Overlay) outPositions() []uint8 {
	pos := make([]uint8, len(o.parents))
	for c := range len(o.ids) {
		for k := o.pStart[c]; k < o.pStart[c+1]; k++ {
			j, _ := slices.BinarySearch(o.out[o.parents[k]], int32(c))
			pos[k] = uint8(j)
		}
	}
	return pos
}

// transpose transposes the n×n matrix m in place, in blocks that stay in
// the cache.
func transpose(m []uint8, n int) {
	const block = 64
	for bi := 0; bi < n; bi += block {
		for bj := bi; bj < n; bj += block {
			for i := bi; i < min(bi+block, n); i++ {
				j0 := bj
				if bi == bj {
					j0 = i + 1
				}
				for j := j0; j < min(bj+block, n); j++ {
					m[i*n+j], m[j*n+i] = m[j*n+i], m[i*n+j]
				}
			}
		}
	}
}
