package node

import "github.com/sketchmesh/sketchmesh/codec"

// Pages of 64 keys are the unit in which the core tracks where a sparse
// update touched a dense vector (the working view's overlay, the error
// feedback residual): a node of a large mesh touches a few thousand of its
// model's keys, clustered by feature, and a page costs one bit to mark and
// 512 bytes to hold.
const (
	pageBits = 6
	pageLen  = 1 << pageBits
)

// pageSet is a set of pages of a vector: a bitmap to test membership in
// O(1) and the list of members in the order added, to visit them in
// O(members).
type pageSet struct {
	bits []uint64
	list []uint32
}

func newPageSet(n int) pageSet {
	pages := (n + pageLen - 1) / pageLen
	return pageSet{bits: make([]uint64, (pages+63)/64)}
}

// addKeys adds the pages of keys.
func (s *pageSet) addKeys(keys []uint64) {
	for _, k := range keys {
		p := k >> pageBits
		w, b := p>>6, uint64(1)<<(p&63)
		if s.bits[w]&b == 0 {
			s.bits[w] |= b
			s.list = append(s.list, uint32(p))
		}
	}
}

// clear empties the set in O(members).
func (s *pageSet) clear() {
	for _, p := range s.list {
		s.bits[p>>6] = 0
	}
	s.list = s.list[:0]
}

// overlayMarks records where an overlay of updates made a vector differ
// from its base: the pages its sparse updates touched, or everywhere once
// a dense one came. By page, so that what a node keeps of its overlays is
// bounded by the pages they touch, not the sum of their keys (O(P)
// updates of the same keys at a large mesh); restoring copies only those
// pages back.
type overlayMarks struct {
	pages pageSet
	dense bool
}

func newOverlayMarks(n int) overlayMarks { return overlayMarks{pages: newPageSet(n)} }

// mark records where u changes the vector.
func (m *overlayMarks) mark(u codec.Sparse) {
	if u.Dense() {
		m.dense = true
		return
	}
	if !m.dense {
		m.pages.addKeys(u.Keys)
	}
}

// markPages records that the vector changed on the pages of set.
func (m *overlayMarks) markPages(set *pageSet) {
	if m.dense {
		return
	}
	for _, p := range set.list {
		w, b := p>>6, uint64(1)<<(p&63)
		if m.pages.bits[w]&b == 0 {
			m.pages.bits[w] |= b
			m.pages.list = append(m.pages.list, p)
		}
	}
}

// restore makes dst equal to base where the overlay marked it, and
// clears the marks.
func (m *overlayMarks) restore(dst, base []float64) {
	if m.dense {
		copy(dst, base)
	} else {
		for _, p := range m.pages.list {
			lo := int(p) << pageBits
			hi := min(lo+pageLen, len(dst))
			copy(dst[lo:hi], base[lo:hi])
		}
	}
	m.reset()
}

// reset clears the marks (the vector was made equal to its base).
func (m *overlayMarks) reset() {
	m.pages.clear()
	m.dense = false
}
