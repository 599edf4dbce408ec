package codec

import (
	"fmt"
	"math"
	"slices"
)

// Column search: with TargetError or ByteBudget set, the encoder picks each
// group's sketch columns t per frame. Groups are independent: a group's
// squared error depends only on its own t, and its cells cost
// ceil(s·t·bits/8) bytes plus the header's uvarint t. So the encoder
// measures every sketched group on a ladder of column counts (the exact
// squared error of what a decoder would read, computed by querying the
// sketch it would write) and combines one point per group by Lagrangian
// relaxation: for a multiplier λ each group takes the t minimising
// bytes + λ·error, and λ is bisected until the total error meets the target
// (fewest bytes) or the total bytes meet the budget (least error).

// columnLadder are the column ratios (columns per key) tried per group:
// steps of √2 from 1/64 to 16, the configuration's maximum.
var columnLadder = func() []float64 {
	var rs []float64
	for r := 1.0 / 64; r <= maxColumnRatio*1.0001; r *= math.Sqrt2 {
		rs = append(rs, r)
	}
	return rs
}()

// columnCurve is one group's measured points, t ascending.
type columnCurve struct {
	ts    []int
	bytes []int     // cell bytes plus the uvarint t
	sqErr []float64 // squared error of the group's decoded values
}

// columnCurves measures every sketched group (ts[l] > 0 in the default
// plan) on the ladder. It also returns the squared error of the lists
// without a sketch (zeros and single-bucket groups), which no t changes,
// and the squared norm of the update.
func (c *SketchML) columnCurves(qz *quantization, sl *sparseLists, plan []int) (curves []columnCurve, fixedSqErr, normSq float64) {
	s, seed := c.cfg.Rows, c.cfg.Seed
	curves = make([]columnCurve, len(sl.gs))
	var scratch []uint16
	var hashes [][2]uint32
	for l, g := range sl.gs {
		keys := sl.keys[sl.offs[l]:sl.offs[l+1]]
		ranks := sl.ranks[sl.offs[l]:sl.offs[l+1]]
		vals := sl.values[sl.offs[l]:sl.offs[l+1]]
		for _, v := range vals {
			normSq += float64(v) * float64(v)
		}
		rep := func(rank uint16) float64 { return 0 }
		if l > 0 {
			b0 := g.first
			rep = func(rank uint16) float64 {
				b := b0 + int(rank)
				r := float64(qz.reps[b])
				if b >= qz.qpos {
					r = -r
				}
				return r
			}
		}
		floor := 0.0
		for i, v := range vals {
			d := rep(ranks[i]) - float64(v)
			floor += d * d
		}
		if plan[l] == 0 {
			fixedSqErr += floor
			continue
		}
		hashes = hashes[:0]
		for _, k := range keys {
			a, b := keyHash(k, seed)
			hashes = append(hashes, [2]uint32{a, b})
		}
		cv := &curves[l]
		lastT := 0
		for j := -1; j < len(columnLadder); j++ {
			t := 1 // the smallest sketch, then the ladder
			if j >= 0 {
				t = columnsFor(columnLadder[j], len(keys))
			}
			if t <= lastT {
				continue
			}
			lastT = t
			if cap(scratch) < s*t {
				scratch = make([]uint16, s*t)
			}
			cl := scratch[:s*t]
			for i := range cl {
				cl[i] = math.MaxUint16
			}
			for i, h := range hashes {
				r := ranks[i]
				for row := range s {
					idx := row*t + int(column(h[0], h[1], row, uint32(t)))
					cl[idx] = min(cl[idx], r)
				}
			}
			sq := 0.0
			for i, h := range hashes {
				got := uint16(0)
				for row := range s {
					got = max(got, cl[row*t+int(column(h[0], h[1], row, uint32(t)))])
				}
				d := rep(got) - float64(vals[i])
				sq += d * d
			}
			cv.ts = append(cv.ts, t)
			cv.bytes = append(cv.bytes, (s*t*int(g.bits)+7)/8+uvarintLen(uint64(t)))
			cv.sqErr = append(cv.sqErr, sq)
			if sq <= floor {
				// No collision changes a decoded value: more columns only cost.
				break
			}
		}
	}
	return curves, fixedSqErr, normSq
}

// quantizationError is the relative L2 error of decoding every value to
// its own bucket's representative: the error with no sketch collisions.
func quantizationError(qz *quantization, values []float32) float64 {
	var sq, norm float64
	for i, v := range values {
		r := 0.0
		if id := int(qz.ids[i]); id < qz.qpos {
			r = float64(qz.reps[id])
		} else if id < qz.qpos+qz.qneg {
			r = -float64(qz.reps[id])
		}
		d := r - float64(v)
		sq += d * d
		norm += float64(v) * float64(v)
	}
	if norm == 0 {
		return 0
	}
	return math.Sqrt(sq / norm)
}

// pickColumns returns, for multiplier lambda, each group's t minimising
// bytes + lambda·error, with the totals.
func pickColumns(curves []columnCurve, lambda float64, ts []int) (bytes int, sqErr float64) {
	for l, cv := range curves {
		if len(cv.ts) == 0 {
			continue
		}
		best, bestCost := 0, math.Inf(1)
		for j := range cv.ts {
			cost := float64(cv.bytes[j]) + lambda*cv.sqErr[j]
			if cost < bestCost {
				best, bestCost = j, cost
			}
		}
		ts[l] = cv.ts[best]
		bytes += cv.bytes[best]
		sqErr += cv.sqErr[best]
	}
	return bytes, sqErr
}

// fewestBytes returns the columns of the smallest multiplier whose total
// squared error is within allowed (the fewest bytes at that error), or
// those of the largest multiplier tried (the least error) when none is.
func fewestBytes(curves []columnCurve, allowed float64) []int {
	ts := make([]int, len(curves))
	// λ spans error weights from negligible to overwhelming, on a log scale.
	lo, hi := -80.0, 80.0
	if _, e := pickColumns(curves, 0, ts); e <= allowed {
		return ts
	}
	pickColumns(curves, math.Pow(2, hi), ts)
	best := append([]int(nil), ts...)
	for range 64 {
		mid := (lo + hi) / 2
		if _, e := pickColumns(curves, math.Pow(2, mid), ts); e <= allowed {
			hi = mid
			copy(best, ts)
		} else {
			lo = mid
		}
	}
	return best
}

// encodeSearched writes the frame whose columns meet TargetError or
// ByteBudget.
func (c *SketchML) encodeSearched(dst []byte, u Sparse, qz *quantization, sl *sparseLists, ks *keyStats) ([]byte, frameStats, error) {
	n := len(u.Values)
	nl := len(sl.gs)
	plan := make([]int, nl)
	for l := 1; l < nl; l++ {
		if sl.size(l) > 0 && sl.gs[l].bits > 0 {
			plan[l] = 1
		}
	}
	curves, fixedSqErr, normSq := c.columnCurves(qz, sl, plan)
	if c.cfg.TargetError > 0 {
		// Measure divides by the norm; an all-zero update has no error.
		// Out of reach (quantization error above the target), the frame
		// gets within 1% of the least error any columns give.
		allowed := c.cfg.TargetError * c.cfg.TargetError * normSq * (1 - 1e-9)
		least := 0.0
		for _, cv := range curves {
			if len(cv.sqErr) > 0 {
				least += slices.Min(cv.sqErr)
			}
		}
		allowed = max(allowed, (fixedSqErr+least)*1.01*1.01)
		ts := fewestBytes(curves, allowed-fixedSqErr)
		dst, st := c.writeSparse(dst, n, qz, sl, ks, ts)
		return dst, st, nil
	}
	// The smallest frame sets what the key lists and headers cost; the
	// cells get the rest of the budget. Coder choices and the uvarint
	// lengths of the bigger frame can differ slightly, so a frame that
	// overshoots retries with the excess taken off the cell budget.
	start := len(dst)
	dst, st := c.writeSparse(dst, n, qz, sl, ks, plan)
	smallest := len(dst) - start
	if smallest > c.cfg.ByteBudget {
		return dst[:start], frameStats{}, fmt.Errorf("%w: byte budget %d is below the %d bytes of the smallest sketchml frame of this update (%d pairs)", ErrBadInput, c.cfg.ByteBudget, smallest, n)
	}
	minCells := 0
	for _, cv := range curves {
		if len(cv.bytes) > 0 {
			minCells += cv.bytes[0]
		}
	}
	cellBudget := c.cfg.ByteBudget - (smallest - st.padBytes - minCells)
	for range 4 {
		ts := largestFitting(curves, cellBudget)
		if ts == nil {
			break
		}
		frame, st2 := c.writeSparse(dst[len(dst):], n, qz, sl, ks, ts)
		if len(frame) <= c.cfg.ByteBudget {
			return append(dst[:start], frame...), st2, nil
		}
		cellBudget -= len(frame) - c.cfg.ByteBudget
	}
	return dst, st, nil
}

// largestFitting returns the columns of the largest multiplier whose cells
// fit in cellBudget bytes (the least error at that budget), or nil when
// none does.
func largestFitting(curves []columnCurve, cellBudget int) []int {
	ts := make([]int, len(curves))
	if b, _ := pickColumns(curves, 0, ts); b > cellBudget {
		return nil
	}
	best := append([]int(nil), ts...)
	lo, hi := -80.0, 80.0
	if b, _ := pickColumns(curves, math.Pow(2, hi), ts); b <= cellBudget {
		return ts
	}
	for range 64 {
		mid := (lo + hi) / 2
		if b, _ := pickColumns(curves, math.Pow(2, mid), ts); b <= cellBudget {
			lo = mid
			copy(best, ts)
		} else {
			hi = mid
		}
	}
	return best
}
