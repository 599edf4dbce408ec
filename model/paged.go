package model

import "math"

// PagedVec is a vector of float64 that allocates only the pages written
// to. A node of a large mesh trains on a few rows and touches a few
// thousand of its model's 2^16 or more keys: its optimizer moments and
// gradient scratch, dense, would cost a megabyte each per node for zeros.
// Values read and written are exactly a dense slice's.
type PagedVec struct {
	pages []*[pageLen]float64
}

const (
	pageBits = 6
	pageLen  = 1 << pageBits
)

func newPagedVec(n int) PagedVec {
	return PagedVec{pages: make([]*[pageLen]float64, (n+pageLen-1)/pageLen)}
}

// NewPagedVec returns a paged vector of n values, all +0.
func NewPagedVec(n int) *PagedVec {
	v := newPagedVec(n)
	return &v
}

// len is the vector's length rounded up to whole pages.
func (v *PagedVec) len() int { return len(v.pages) * pageLen }

// Get returns the value at key k, +0 where nothing was written, without
// allocating.
func (v *PagedVec) Get(k uint64) float64 {
	if p := v.pages[k>>pageBits]; p != nil {
		return p[k&(pageLen-1)]
	}
	return 0
}

// At returns where key k lives, allocating its page.
func (v *PagedVec) At(k uint64) *float64 {
	p := v.pages[k>>pageBits]
	if p == nil {
		p = new([pageLen]float64)
		v.pages[k>>pageBits] = p
	}
	return &p[k&(pageLen-1)]
}

// dense returns the first n values as a new slice.
func (v *PagedVec) dense(n int) []float64 {
	out := make([]float64, n)
	for i, p := range v.pages {
		if p != nil {
			copy(out[i*pageLen:], p[:min(pageLen, n-i*pageLen)])
		}
	}
	return out
}

// load replaces the values with src, allocating the pages that hold a
// value other than +0.
func (v *PagedVec) load(src []float64) {
	clear(v.pages)
	for k, x := range src {
		if math.Float64bits(x) != 0 {
			*v.At(uint64(k)) = x
		}
	}
}
