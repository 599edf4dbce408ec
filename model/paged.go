package model

import (
	"fmt"
	"math"
)

// PagedVec is a vector of float64 that allocates only the pages written
// to. A node of a large mesh trains on a few rows and touches a few
// thousand of its model's 2^16 or more keys: its optimizer moments and
// gradient scratch, dense, would cost a megabyte each per node for zeros.
// Values read and written are exactly a dense slice's.
//
// A node of a thousand-node simulation writes a hundred or so keys of each
// of its vectors (Adam's two moments, the error feedback residual), about
// one per page of 64 keys, and a directory of every page beside them: 40 KB
// a vector, most of it zeros, a third of such a simulation's heap. Pages
// are therefore 8 keys, found in a map while few are written, and in a
// directory of every page (1 byte a key) once a quarter of them are, where
// the map would cost more than the directory.
type PagedVec struct {
	// pages is the directory of every page, nil while sparse holds the
	// pages written; n is how many pages the vector has.
	pages  []*[vecPageLen]float64
	sparse map[uint64]*[vecPageLen]float64
	n      int
}

const (
	pageBits = 6
	pageLen  = 1 << pageBits
	// vecPageBits sets a PagedVec's page size (the gradient scratch has
	// pages of pageLen keys, one bit each in a word).
	vecPageBits = 3
	vecPageLen  = 1 << vecPageBits
)

func newPagedVec(n int) PagedVec {
	return PagedVec{n: (n + vecPageLen - 1) / vecPageLen}
}

// NewPagedVec returns a paged vector of n values, all +0.
func NewPagedVec(n int) *PagedVec {
	v := newPagedVec(n)
	return &v
}

// len is the vector's length rounded up to whole pages.
func (v *PagedVec) len() int { return v.n * vecPageLen }

// page returns page i, or nil when it was never written.
func (v *PagedVec) page(i uint64) *[vecPageLen]float64 {
	if v.pages != nil {
		return v.pages[i]
	}
	return v.sparse[i]
}

// Get returns the value at key k, +0 where nothing was written, without
// allocating.
func (v *PagedVec) Get(k uint64) float64 {
	if p := v.page(k >> vecPageBits); p != nil {
		return p[k&(vecPageLen-1)]
	}
	return 0
}

// At returns where key k lives, allocating its page. The address stays
// valid as other pages are allocated.
func (v *PagedVec) At(k uint64) *float64 {
	i := k >> vecPageBits
	p := v.page(i)
	if p == nil {
		if i >= uint64(v.n) {
			panic(fmt.Sprintf("model: key %d of a paged vector of %d values", k, v.len()))
		}
		p = new([vecPageLen]float64)
		switch {
		case v.pages != nil:
			v.pages[i] = p
		case 4*(len(v.sparse)+1) >= v.n:
			// Dense enough for the directory.
			v.pages = make([]*[vecPageLen]float64, v.n)
			for j, q := range v.sparse {
				v.pages[j] = q
			}
			v.pages[i], v.sparse = p, nil
		default:
			if v.sparse == nil {
				v.sparse = map[uint64]*[vecPageLen]float64{}
			}
			v.sparse[i] = p
		}
	}
	return &p[k&(vecPageLen-1)]
}

// each calls f with every page written and its index.
func (v *PagedVec) each(f func(i int, p *[vecPageLen]float64)) {
	for i, p := range v.pages {
		if p != nil {
			f(i, p)
		}
	}
	for i, p := range v.sparse {
		f(int(i), p)
	}
}

// dense returns the first n values as a new slice.
func (v *PagedVec) dense(n int) []float64 {
	out := make([]float64, n)
	v.each(func(i int, p *[vecPageLen]float64) {
		if i*vecPageLen < n {
			copy(out[i*vecPageLen:], p[:min(vecPageLen, n-i*vecPageLen)])
		}
	})
	return out
}

// load replaces the values with src, allocating the pages that hold a
// value other than +0.
func (v *PagedVec) load(src []float64) {
	v.pages, v.sparse = nil, nil
	for k, x := range src {
		if math.Float64bits(x) != 0 {
			*v.At(uint64(k)) = x
		}
	}
}
