package node

import (
	"math/bits"

	"github.com/sketchmesh/sketchmesh/codec"
)

// Sums of pending rows shared between cores.
//
// A core's training read overlays its pending rows on its committed view
// (Node.view): every update of every row up to its clock that is not yet
// committed. In a simulator of P cores at staleness s that is up to s + 1
// rows of P updates at every read, P reads an iteration: O(P² · keys) of
// additions, a third of the time at P = 4096 and the largest term there.
// Most of those rows are the same in every core, or nearly: the cores
// that hold a row of clock c mostly hold the same updates of it.
//
// So the store keeps, by clock, the sum of the updates of that clock the
// cores added to their pending rows (the first one added per origin, by
// pointer: the cores share decoded updates through a DecodeCache), and the
// pages they touched. A core whose row differs from the sum in a few
// origins reads it as the sum's pages, minus the updates it lacks, plus
// the ones it holds otherwise; when that costs more additions than its row
// (a small mesh, or a row that is mostly missing) it adds its row as
// before. The sums are the simulator's only arithmetic that is not a
// daemon's bit for bit: a read through a sum equals the overlay in the
// origins' order to within rounding (a float64 sum of float32 values in
// another order), and a committed view never goes through one, so digests
// and every protocol decision are the same.

// rowSumLimit bounds the clocks whose sums the store keeps: past it the
// lowest goes, and the cores still holding that row (far behind) add it
// themselves. Cores hold pending rows over staleness + 1 clocks, and a
// few ahead.
const rowSumLimit = 16

// rowSum is the sum of the updates of one clock that cores added to their
// pending rows, by origin slot.
type rowSum struct {
	table *SlotTable
	clock uint64
	// by[q] is the update of slot q in the sum, nil for none.
	by []*codec.Sparse
	// vals holds the sum by page of pageLen keys, nil for a page no
	// update touched; pages lists those that are not, in the order
	// touched, and held[i] marks the keys of pages.list[i] an update
	// touched (a bit each: the sum is read key by key, as sparse as the
	// union of its updates).
	vals  []*sumPage
	pages pageSet
	// added counts the updates in the sum, keys their keys (values, for
	// dense ones) and union the keys of the sum, for the cost of a read
	// (overlaySum).
	added, keys, union int
}

// sumPage is one page of a sum: its values, and a bit for each key an
// update touched.
type sumPage struct {
	vals [pageLen]float64
	held uint64
}

// findSum returns the sum of clock c over the slots of table, nil for
// none.
func (s *RowStore) findSum(table *SlotTable, c uint64) *rowSum {
	r := s.lastSum
	if r == nil || r.clock != c {
		r = nil
		for _, x := range s.sums {
			if x.clock == c {
				r = x
				break
			}
		}
		if r == nil {
			return nil
		}
		s.lastSum = r
	}
	if r.table != table {
		// Slots name origins only within one table: the cores of a
		// simulator share one (Config.Slots), other cores do not share
		// sums.
		return nil
	}
	return r
}

// sumFor returns the sum of clock c over the slots of table, made when c
// is not below every sum kept; nil otherwise.
func (s *RowStore) sumFor(table *SlotTable, c uint64) *rowSum {
	if r := s.findSum(table, c); r != nil || s.lastSum != nil && s.lastSum.clock == c {
		return r
	}
	if len(s.sums) >= rowSumLimit {
		low := 0
		for i, r := range s.sums {
			if r.clock < s.sums[low].clock {
				low = i
			}
		}
		if s.sums[low].clock > c {
			return nil
		}
		s.sums[low] = s.sums[len(s.sums)-1]
		s.sums = s.sums[:len(s.sums)-1]
	}
	pages := (s.size + pageLen - 1) / pageLen
	r := &rowSum{table: table, clock: c, vals: make([]*sumPage, pages), pages: newPageSet(s.size)}
	s.sums = append(s.sums, r)
	s.lastSum = r
	return r
}

// addToSum adds u, the update of table's slot q of clock c, to the sum of c unless the
// sum holds an update of q already.
func (s *RowStore) addToSum(table *SlotTable, c uint64, q int, u *codec.Sparse) {
	r := s.sumFor(table, c)
	if r == nil {
		return
	}
	r.by = reach(r.by, q)
	if r.by[q] != nil {
		return
	}
	r.by[q] = u
	r.added++
	if u.Dense() {
		r.keys += len(u.Values)
		for k, v := range u.Values {
			*r.at(uint64(k)) += float64(v)
		}
		return
	}
	r.keys += len(u.Keys)
	for i, k := range u.Keys {
		*r.at(k) += float64(u.Values[i])
	}
}

// at returns the sum's value of key k, its page made on first use.
func (r *rowSum) at(k uint64) *float64 {
	p := k >> pageBits
	pg := r.vals[p]
	if pg == nil {
		pg = new(sumPage)
		r.vals[p] = pg
		r.pages.bits[p>>6] |= 1 << (p & 63)
		r.pages.list = append(r.pages.list, uint32(p))
	}
	if bit := uint64(1) << (k & (pageLen - 1)); pg.held&bit == 0 {
		pg.held |= bit
		r.union++
	}
	return &pg.vals[k&(pageLen-1)]
}

// overlaySum adds row, a core's pending row of the sum's clock, to w
// through the sum, and reports whether it did: only when that costs fewer
// additions than adding the row's updates.
func (s *RowStore) overlaySum(w *workScratch, row []*codec.Sparse, r *rowSum) bool {
	if r.added == 0 {
		return false
	}
	held := 0
	s.differ = s.differ[:0]
	for q := range max(len(row), len(r.by)) {
		var mine, summed *codec.Sparse
		if q < len(row) {
			mine = row[q]
		}
		if q < len(r.by) {
			summed = r.by[q]
		}
		if mine != nil {
			held++
		}
		if mine != summed {
			s.differ = append(s.differ, int32(q))
		}
	}
	// In additions: the sum's keys and a few for each page, against each
	// update's keys once (twice for one that differs).
	perUpdate := r.keys / r.added
	if r.union+4*len(r.pages.list)+2*len(s.differ)*perUpdate >= held*perUpdate {
		return false
	}
	for _, p := range r.pages.list {
		pg, dst := r.vals[p], w.vals[int(p)<<pageBits:]
		for m := pg.held; m != 0; m &= m - 1 {
			i := bits.TrailingZeros64(m)
			dst[i] += pg.vals[i]
		}
	}
	w.marks.markPages(&r.pages)
	for _, q := range s.differ {
		if q < int32(len(r.by)) && r.by[q] != nil {
			subtractSparse(w.vals, *r.by[q])
		}
		if q < int32(len(row)) && row[q] != nil {
			applySparse(w.vals, *row[q])
			w.marks.mark(*row[q])
		}
	}
	s.SumReads++
	return true
}

// subtractSparse takes u off view.
func subtractSparse(view []float64, u codec.Sparse) {
	if u.Dense() {
		for i, v := range u.Values {
			view[i] -= float64(v)
		}
		return
	}
	for i, k := range u.Keys {
		view[k] -= float64(u.Values[i])
	}
}
