package halton

import (
	"slices"
	"testing"
)

// broadcaster is what simulate needs of an overlay: Overlay and SiteOverlay.
type broadcaster interface {
	Members() []string
	Out(id string) []string
	Forward(origin, at string) []string
	Hops(origin, to string) int
}

// simulate runs one iteration of all-to-all broadcast through the public
// API, in synchronous rounds: in round r every member forwards each update
// that reached it in round r−1 (its own in round 1) to Forward(origin, at),
// one message per next hop per round. It fails the test unless every member
// receives every other member's update exactly once, after Hops(origin, at)
// hops, from a member that links to it.
func simulate(t *testing.T, o broadcaster) (deliveries, messages, rounds int) {
	t.Helper()
	ids := o.Members()
	p := len(ids)
	idx := make(map[string]int, p)
	out := make([][]string, p)
	for i, id := range ids {
		idx[id] = i
		out[i] = o.Out(id)
	}
	received := make([]int, p*p) // received[at*p+origin]
	type held struct{ origin, at int }
	var frontier []held
	for i := range ids {
		frontier = append(frontier, held{i, i})
	}
	for r := 1; len(frontier) > 0; r++ {
		var next []held
		batches := map[[2]int]bool{}
		for _, h := range frontier {
			for _, c := range o.Forward(ids[h.origin], ids[h.at]) {
				if !slices.Contains(out[h.at], c) {
					t.Fatalf("P=%d: %s forwards %s's update to %s, which it has no link to", p, ids[h.at], ids[h.origin], c)
				}
				ci := idx[c]
				if got := o.Hops(ids[h.origin], c); got != r {
					t.Fatalf("P=%d: %s's update reaches %s in round %d, but Hops says %d", p, ids[h.origin], c, r, got)
				}
				received[ci*p+h.origin]++
				next = append(next, held{h.origin, ci})
				batches[[2]int{h.at, ci}] = true
				deliveries++
			}
		}
		if len(next) > 0 {
			rounds = r
		}
		messages += len(batches)
		frontier = next
	}
	for at := range p {
		for origin := range p {
			want := 1
			if at == origin {
				want = 0
			}
			if got := received[at*p+origin]; got != want {
				t.Fatalf("P=%d: %s received %s's update %d times, want %d", p, ids[at], ids[origin], got, want)
			}
		}
	}
	return deliveries, messages, rounds
}

// The property the issue asks for: for every P ≤ 256 and every origin, each
// member receives the update exactly once within the diameter, and the
// traffic Build counted is the traffic the trees produce.
func TestBroadcastReachesEveryMemberOnce(t *testing.T) {
	parallelRange(t, 1, 256, func(t *testing.T, p int) {
		o := Build(nodes(p))
		deliveries, messages, rounds := simulate(t, o)
		r := o.Report()
		if rounds != o.Diameter() || rounds > DiameterBound(p) {
			t.Fatalf("P=%d: broadcast took %d rounds, diameter %d, bound %d", p, rounds, o.Diameter(), DiameterBound(p))
		}
		if deliveries != p*(p-1) || r.UpdateDeliveriesPerIteration != deliveries {
			t.Fatalf("P=%d: %d deliveries simulated, %d reported, want %d", p, deliveries, r.UpdateDeliveriesPerIteration, p*(p-1))
		}
		if r.MessagesPerIteration != messages {
			t.Fatalf("P=%d: %d messages simulated, %d reported", p, messages, r.MessagesPerIteration)
		}
	})
}

// The trees of the fallback obey the same contract.
func TestChordBroadcastReachesEveryMemberOnce(t *testing.T) {
	for _, p := range []int{2, 3, 8, 31, 64, 100} {
		o := build(nodes(p), 0)
		deliveries, messages, rounds := simulate(t, o)
		if o.Construction() != "chord" || rounds > log2Ceil(p) || deliveries != p*(p-1) || messages != o.Report().MessagesPerIteration {
			t.Fatalf("P=%d: %s, %d rounds, %d deliveries, %d messages (reported %d)", p, o.Construction(), rounds, deliveries, messages, o.Report().MessagesPerIteration)
		}
	}
}

// A tree parent is the preferred in-neighbour one hop nearer the origin; the
// preference does not depend on the origin, which is what lets relays batch.
func TestParentIsNearestBehindOnTheRing(t *testing.T) {
	o := Build(nodes(200))
	pos := make([]uint64, 200)
	for i, id := range o.Members() {
		pos[i] = hashMember(id).pos
	}
	for origin := range int32(200) {
		for c := range int32(200) {
			p := o.parent(origin, c)
			if c == origin {
				if p != -1 {
					t.Fatalf("the origin has parent %d", p)
				}
				continue
			}
			d := o.hop(origin, c)
			var best int32 = -1
			for _, q := range o.in[c] {
				if o.hop(origin, q) == d-1 && (best < 0 || pos[c]-pos[q] < pos[c]-pos[best]) {
					best = q
				}
			}
			if p != best {
				t.Fatalf("parent of %d for origin %d is %d, want %d", c, origin, p, best)
			}
		}
	}
}

// The children table (kids) and the scan of the neighbours' in-neighbours
// it replaces, kept for members with more out-neighbours than its masks
// hold, give every origin the same tree.
func TestChildrenTableMatchesTheScan(t *testing.T) {
	for _, p := range []int{1, 2, 3, 17, 130, 300} {
		o := Build(nodes(p))
		if o.kids == nil {
			t.Fatalf("P=%d: no children table", p)
		}
		scan := *o
		scan.kids = nil
		for origin := range int32(p) {
			for at := range int32(p) {
				if got, want := o.appendChildren(nil, origin, at), scan.appendChildren(nil, origin, at); !slices.Equal(got, want) {
					t.Fatalf("P=%d: children of %d for origin %d are %v by the table, %v by the scan", p, at, origin, got, want)
				}
			}
		}
	}
}

func TestForwardUnknownIDs(t *testing.T) {
	o := Build(nodes(10))
	for _, c := range [][2]string{{"nobody", "node-1"}, {"node-1", "nobody"}, {"nobody", "nobody"}} {
		if got := o.Forward(c[0], c[1]); got != nil {
			t.Errorf("Forward(%q, %q) = %v", c[0], c[1], got)
		}
		if got := o.Hops(c[0], c[1]); got != -1 {
			t.Errorf("Hops(%q, %q) = %d", c[0], c[1], got)
		}
	}
}
