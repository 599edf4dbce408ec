package model

import "math"

// pagedVec is a vector of float64 that allocates only the pages written
// to. A node of a large mesh trains on a few rows and touches a few
// thousand of its model's 2^16 or more keys: its optimizer moments and
// gradient scratch, dense, would cost a megabyte each per node for zeros.
// Values read and written are exactly a dense slice's.
type pagedVec struct {
	pages []*[pageLen]float64
}

const (
	pageBits = 6
	pageLen  = 1 << pageBits
)

func newPagedVec(n int) pagedVec {
	return pagedVec{pages: make([]*[pageLen]float64, (n+pageLen-1)/pageLen)}
}

// len is the vector's length rounded up to whole pages.
func (v *pagedVec) len() int { return len(v.pages) * pageLen }

// at returns where key k lives, allocating its page.
func (v *pagedVec) at(k uint64) *float64 {
	p := v.pages[k>>pageBits]
	if p == nil {
		p = new([pageLen]float64)
		v.pages[k>>pageBits] = p
	}
	return &p[k&(pageLen-1)]
}

// dense returns the first n values as a new slice.
func (v *pagedVec) dense(n int) []float64 {
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
func (v *pagedVec) load(src []float64) {
	clear(v.pages)
	for k, x := range src {
		if math.Float64bits(x) != 0 {
			*v.at(uint64(k)) = x
		}
	}
}
