package node

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

// pagedVec is a vector of float64 that holds only the pages written to
// (after model's pagedVec): the error feedback residual of a node is
// nonzero only at the keys its own updates carried, a few pages of a large
// model, and dense it cost 512 KiB per node at 2^16 weights. Values read
// and written are exactly a dense slice's.
type pagedVec struct {
	pages []*[pageLen]float64
}

func newPagedVec(n int) *pagedVec {
	return &pagedVec{pages: make([]*[pageLen]float64, (n+pageLen-1)/pageLen)}
}

// get returns the value at key k: +0 where nothing was written.
func (v *pagedVec) get(k uint64) float64 {
	if p := v.pages[k>>pageBits]; p != nil {
		return p[k&(pageLen-1)]
	}
	return 0
}

// at returns where key k lives, allocating its page.
func (v *pagedVec) at(k uint64) *float64 {
	p := v.pages[k>>pageBits]
	if p == nil {
		p = new([pageLen]float64)
		v.pages[k>>pageBits] = p
	}
	return &p[k&(pageLen-1)]
}
