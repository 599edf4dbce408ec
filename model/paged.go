package model

import "math"

// PagedVec is a vector of float64 that allocates only the pages written
// to. A node of a large mesh trains on a few rows and touches a few
// thousand of its model's 2^16 or more keys: its optimizer moments and
// gradient scratch, dense, would cost a megabyte each per node for zeros.
// Values read and written are exactly a dense slice's.
//
// A node of a thousand-node simulation writes a hundred or so keys of each
// of its vectors (Adam's two moments, the error feedback residual), about
// one per 64 keys: pages of 64 keys were mostly zeros, a third of such a
// simulation's heap. The directory therefore has a chunk of eight 8-key
// page pointers per 64 keys, allocated when one of them is written, and a
// key costs its chunk and its page (128 bytes for a key alone in its 64,
// 512 before). A map of 8-key pages took as little memory but made Adam's
// step six times slower for a trainer that writes thousands of keys a
// step; the chunks cost one load more than a directory of pages, and At
// stays small enough to inline.
type PagedVec struct {
	chunks []*pageChunk
}

// pageChunk holds the 8-key pages of 64 keys.
type pageChunk [pageLen / sparsePageLen]*[sparsePageLen]float64

const (
	pageBits = 6
	pageLen  = 1 << pageBits
	// sparsePageBits sets the size of a PagedVec's pages (the gradient
	// scratch has pages of pageLen keys, one bit each in a word).
	sparsePageBits = 3
	sparsePageLen  = 1 << sparsePageBits
)

func newPagedVec(n int) PagedVec {
	return PagedVec{chunks: make([]*pageChunk, (n+pageLen-1)/pageLen)}
}

// NewPagedVec returns a paged vector of n values, all +0.
func NewPagedVec(n int) *PagedVec {
	v := newPagedVec(n)
	return &v
}

// Get returns the value at key k, +0 where nothing was written, without
// allocating.
func (v *PagedVec) Get(k uint64) float64 {
	if c := v.chunks[k>>pageBits]; c != nil {
		if p := c[(k>>sparsePageBits)&(pageLen/sparsePageLen-1)]; p != nil {
			return p[k&(sparsePageLen-1)]
		}
	}
	return 0
}

// At returns where key k lives, allocating its page. The address stays
// valid as other pages are allocated.
func (v *PagedVec) At(k uint64) *float64 {
	c := v.chunks[k>>pageBits]
	if c == nil {
		c = new(pageChunk)
		v.chunks[k>>pageBits] = c
	}
	i := (k >> sparsePageBits) & (pageLen/sparsePageLen - 1)
	if c[i] == nil {
		c[i] = new([sparsePageLen]float64)
	}
	return &c[i][k&(sparsePageLen-1)]
}

// each calls f with the first key and the values of every page written.
func (v *PagedVec) each(f func(first int, vals []float64)) {
	for i, c := range v.chunks {
		if c == nil {
			continue
		}
		for j, p := range c {
			if p != nil {
				f(i*pageLen+j*sparsePageLen, p[:])
			}
		}
	}
}

// dense returns the first n values as a new slice.
func (v *PagedVec) dense(n int) []float64 {
	out := make([]float64, n)
	v.each(func(first int, vals []float64) {
		if first < n {
			copy(out[first:], vals[:min(len(vals), n-first)])
		}
	})
	return out
}

// load replaces the values with src, allocating the pages that hold a
// value other than +0.
func (v *PagedVec) load(src []float64) {
	clear(v.chunks)
	for k, x := range src {
		if math.Float64bits(x) != 0 {
			*v.At(uint64(k)) = x
		}
	}
}
