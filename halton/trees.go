package halton

import (
	"math/bits"
	"slices"
)

// Members returns the membership, sorted ascending.
func (o *Overlay) Members() []string { return slices.Clone(o.ids) }

// Len returns the number of members.
func (o *Overlay) Len() int { return len(o.ids) }

// Out returns the out-neighbours of id (the peers it opens links to), sorted; nil for unknown id.
func (o *Overlay) Out(id string) []string {
	i, ok := o.index[id]
	if !ok {
		return nil
	}
	return o.names(o.out[i])
}

// In returns the in-neighbours of id (the peers that open links to it), sorted; nil for unknown id.
func (o *Overlay) In(id string) []string {
	i, ok := o.index[id]
	if !ok {
		return nil
	}
	return o.names(o.in[i])
}

// Forward returns the next hops to which at forwards origin's update: the
// children of at in origin's broadcast tree, sorted, always a subset of
// Out(at). It is nil when at is a leaf of that tree or either id is unknown.
func (o *Overlay) Forward(origin, at string) []string {
	next := o.AppendForward(nil, origin, at)
	if len(next) == 0 {
		return nil
	}
	return next
}

// AppendForward appends Forward(origin, at) to dst and returns it: a
// relay routes every update it takes, and a slice made for each was a
// tenth of the simulator's allocations.
func (o *Overlay) AppendForward(dst []string, origin, at string) []string {
	oi, ok1 := o.index[origin]
	ai, ok2 := o.index[at]
	if !ok1 || !ok2 {
		return dst
	}
	var buf [16]int32
	for _, c := range o.appendChildren(buf[:0], oi, ai) {
		dst = append(dst, o.ids[c])
	}
	return dst
}

// Hops returns the depth of to in origin's broadcast tree, which is the
// length of a shortest overlay path: 0 when to is origin, -1 when either id
// is unknown.
func (o *Overlay) Hops(origin, to string) int {
	oi, ok1 := o.index[origin]
	ti, ok2 := o.index[to]
	if !ok1 || !ok2 {
		return -1
	}
	d := o.hop(oi, ti)
	if d == 0xff {
		return -1
	}
	return int(d)
}

// Diameter returns the largest hop count over all ordered pairs of members.
func (o *Overlay) Diameter() int { return o.diameter }

// MeanHops returns the mean hop count over all ordered pairs of distinct
// members (0 with fewer than two).
func (o *Overlay) MeanHops() float64 { return o.meanHops }

// Connected reports whether every member reaches every other one; an
// overlay of zero or one member is connected.
func (o *Overlay) Connected() bool { return o.connected }

// Construction names how the links were chosen: "halton", or "chord" for
// the rare membership whose Halton overlay would exceed the diameter bound.
func (o *Overlay) Construction() string {
	if o.chord {
		return "chord"
	}
	return "halton"
}

func (o *Overlay) names(idx []int32) []string {
	if len(idx) == 0 {
		return nil
	}
	s := make([]string, len(idx))
	for k, i := range idx {
		s[k] = o.ids[i]
	}
	return s
}

// hop returns the hop count from from to to, 0xff when unreachable (the
// stored 0 wraps around).
func (o *Overlay) hop(from, to int32) uint8 { return o.dist[int(from)*len(o.ids)+int(to)] - 1 }

// parent returns c's parent in origin's tree: its most preferred
// in-neighbour one hop nearer the origin. It is −1 for the origin itself and
// for members the origin does not reach.
func (o *Overlay) parent(origin, c int32) int32 {
	d := o.hop(origin, c)
	if d == 0 || d == 0xff {
		return -1
	}
	for _, p := range o.parents[o.pStart[c]:o.pStart[c+1]] {
		if o.hop(origin, p) == d-1 {
			return p
		}
	}
	return -1 // not reached: a member at depth d has an in-neighbour at d−1
}

// appendChildren appends at's children in origin's tree to kids, in index
// (= id) order.
func (o *Overlay) appendChildren(kids []int32, origin, at int32) []int32 {
	if o.kids != nil {
		out := o.out[at]
		for m := o.kids[int(at)*len(o.ids)+int(origin)]; m != 0; m &= m - 1 {
			kids = append(kids, out[bits.TrailingZeros16(m)])
		}
		return kids
	}
	d := o.hop(origin, at)
	if d == 0xff {
		return kids
	}
	for _, c := range o.out[at] {
		if o.hop(origin, c) == d+1 && o.parent(origin, c) == at {
			kids = append(kids, c)
		}
	}
	return kids
}

// EdgesChanged returns the size of the symmetric difference of the directed
// edge sets of a and b, matching members by id; a nil overlay has no edges.
func EdgesChanged(a, b *Overlay) int {
	if a == nil {
		a = Build(nil)
	}
	if b == nil {
		b = Build(nil)
	}
	changed := 0
	for i, id := range a.ids {
		j, ok := b.index[id]
		if !ok {
			changed += len(a.out[i])
			continue
		}
		changed += symDiff(a.names(a.out[i]), b.names(b.out[j]))
	}
	for j, id := range b.ids {
		if _, ok := a.index[id]; !ok {
			changed += len(b.out[j])
		}
	}
	return changed
}

// symDiff counts the strings in exactly one of two sorted, duplicate-free lists.
func symDiff(x, y []string) int {
	n, i, j := 0, 0, 0
	for i < len(x) && j < len(y) {
		switch {
		case x[i] < y[j]:
			n++
			i++
		case x[i] > y[j]:
			n++
			j++
		default:
			i++
			j++
		}
	}
	return n + len(x) - i + len(y) - j
}
