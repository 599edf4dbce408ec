package codec

import (
	"math"
)

// logHist is the quantile sketch the quantifier uses: a mergeable histogram
// of positive float32 magnitudes over logarithmic bins (the idea of DDSketch
// and HDR histograms). A bin is the float's bits shifted right by histShift,
// i.e. its exponent and top 8 mantissa bits, so for normal floats a bin
// spans a relative width of at most 2^-8 and a quantile read from the sketch
// is within a factor 1+2^-8 of the exact one. Its rank error is at most the
// count of one bin. Two sketches merge by adding counts.
//
// The codec uses it instead of datasketches-go's KLL because that KLL flips
// coins with the process-wide math/rand source (so the same update gives
// different splits run to run, and frames would not be deterministic), and
// because it alone runs at about 12 M values/s on one core, below the
// encoder's budget for the whole frame. This sketch adds at one increment per
// value and needs no sort.
type logHist struct {
	lo     uint32 // bin of counts[0]
	counts []uint32
	n      int
}

const histShift = 15

// newLogHist returns an empty sketch covering magnitudes whose float32 bits
// lie in [minBits, maxBits].
func newLogHist(minBits, maxBits uint32) *logHist {
	lo, hi := minBits>>histShift, maxBits>>histShift
	return &logHist{lo: lo, counts: make([]uint32, hi-lo+1)}
}

// add counts a magnitude given by its float32 bits, which must lie in the
// sketch's range.
func (h *logHist) add(bits uint32) {
	h.counts[bits>>histShift-h.lo]++
	h.n++
}

// merge adds o's counts into h, widening h's range as needed.
func (h *logHist) merge(o *logHist) {
	if o.n == 0 {
		return
	}
	lo := min(h.lo, o.lo)
	hi := max(h.lo+uint32(len(h.counts)), o.lo+uint32(len(o.counts)))
	if h.n == 0 {
		lo, hi = o.lo, o.lo+uint32(len(o.counts))
	}
	if lo != h.lo || hi != h.lo+uint32(len(h.counts)) {
		c := make([]uint32, hi-lo)
		if h.n > 0 {
			copy(c[h.lo-lo:], h.counts)
		}
		h.lo, h.counts = lo, c
	}
	for i, v := range o.counts {
		h.counts[o.lo-h.lo+uint32(i)] += v
	}
	h.n += o.n
}

// quantile returns an upper estimate of the phi-quantile (0 < phi ≤ 1), the
// value of rank ceil(phi·n) in ascending order: the upper edge of the bin
// holding that value, which for normal floats exceeds it by less than a
// factor 1+2^-8.
func (h *logHist) quantile(phi float64) float32 {
	rank := int(math.Ceil(phi * float64(h.n)))
	rank = max(1, min(rank, h.n))
	cum := 0
	for i, c := range h.counts {
		cum += int(c)
		if cum >= rank {
			return math.Float32frombits((h.lo + uint32(i) + 1) << histShift)
		}
	}
	return math.Float32frombits((h.lo + uint32(len(h.counts))) << histShift)
}

// partition splits the sketch into at most k buckets of consecutive bins
// with nearly equal counts (the quantiles 1/k, 2/k, ... as split points) and
// returns each bin's bucket index and the number of buckets. Bucket j ends
// at the bin boundary nearest to rank j·n/k, so every boundary is within
// half a bin's count (plus one) of its exact quantile rank. Buckets are
// never empty: a bin heavier than a bucket's share swallows the quantiles
// it spans, leaving fewer, larger buckets.
func (h *logHist) partition(k int) (lut []uint16, buckets int) {
	lut = make([]uint16, len(h.counts))
	if h.n == 0 {
		return lut, 0
	}
	n := h.n
	target := func(j int) int { return (2*j*n + k) / (2 * k) } // round(j·n/k)
	cur, cum, size, j := 0, 0, 0, 1
	// closeAt ends the current bucket at rank cum and moves to the next
	// target above it.
	closeAt := func() {
		cur++
		size = 0
		for j < k && target(j) <= cum {
			j++
		}
	}
	for i, c := range h.counts {
		if c != 0 && size > 0 && j < k {
			// Ending the bucket before this bin is nearer the target than
			// ending it after.
			if t := target(j); cum < t && t-cum < cum+int(c)-t {
				j++
				closeAt()
			}
		}
		lut[i] = uint16(cur)
		size += int(c)
		cum += int(c)
		if j < k && cum >= target(j) && cum < n {
			closeAt()
		}
	}
	return lut, cur + 1
}

// quantization is the result of quantile-bucket quantification of a value
// vector, with positive and negative values quantified apart.
type quantization struct {
	qpos, qneg int       // buckets per side
	reps       []float32 // representative magnitude per bucket: positive buckets by ascending magnitude, then negative
	upper      []float32 // largest member magnitude per bucket
	energy     []float64 // sum of squared members per bucket
	counts     []int     // members per bucket
	zeros      int       // values equal to ±0
	ids        []uint16  // per value: bucket id (positive 0..qpos-1, negative qpos..), or qpos+qneg for zero
}

func (q *quantization) zeroID() uint16 { return uint16(q.qpos + q.qneg) }

// quantize assigns every value to a bucket. Up to q buckets are used in all:
// one for zeros if there are any, the rest shared between the positive and
// negative sides in proportion to their counts, rounded to whole groups of
// ceil(q/groups) buckets so that the sides together make groups groups.
// Each side's buckets split its magnitudes at the quantiles of a logHist
// sketch, so buckets hold nearly equal numbers of values and never
// straddle zero. It reports false if a value is NaN or infinite.
func quantize(values []float32, q, groups int, rep Representative) (quantization, bool) {
	const magMask = 0x7FFFFFFF
	np, nn := 0, 0
	minP, maxP := uint32(magMask), uint32(0)
	minN, maxN := uint32(magMask), uint32(0)
	for _, v := range values {
		b := math.Float32bits(v)
		m := b & magMask
		if m == 0 {
			continue
		}
		if m >= 0x7F800000 {
			return quantization{}, false
		}
		if b>>31 == 0 {
			np++
			minP, maxP = min(minP, m), max(maxP, m)
		} else {
			nn++
			minN, maxN = min(minN, m), max(maxN, m)
		}
	}
	var qz quantization
	qz.zeros = len(values) - np - nn
	slots := q
	if qz.zeros > 0 {
		slots--
	}
	kp, kn := 0, 0
	switch {
	case np > 0 && nn > 0 && groups > 1:
		w := (q + groups - 1) / groups
		gp := (groups*np + (np+nn)/2) / (np + nn)
		gp = max(1, min(gp, groups-1))
		kp = min(gp*w, slots-1)
		kn = slots - kp
	case np > 0 && nn > 0:
		kp = (slots*np + (np+nn)/2) / (np + nn)
		kp = max(1, min(kp, slots-1))
		kn = slots - kp
	case np > 0:
		kp = slots
	case nn > 0:
		kn = slots
	}
	var hp, hn *logHist
	var lutP, lutN []uint16
	if np > 0 {
		hp = newLogHist(minP, maxP)
	}
	if nn > 0 {
		hn = newLogHist(minN, maxN)
	}
	for _, v := range values {
		b := math.Float32bits(v)
		m := b & magMask
		switch {
		case m == 0:
		case b>>31 == 0:
			hp.add(m)
		default:
			hn.add(m)
		}
	}
	if np > 0 {
		lutP, qz.qpos = hp.partition(kp)
	}
	if nn > 0 {
		lutN, qz.qneg = hn.partition(kn)
	}
	nb := qz.qpos + qz.qneg
	sums := make([]float64, nb)
	qz.energy = make([]float64, nb)
	maxBits := make([]uint32, nb)
	qz.counts = make([]int, nb)
	qz.ids = make([]uint16, len(values))
	zero := qz.zeroID()
	negBase := uint16(qz.qpos)
	for i, v := range values {
		b := math.Float32bits(v)
		m := b & magMask
		var id uint16
		switch {
		case m == 0:
			qz.ids[i] = zero
			continue
		case b>>31 == 0:
			id = lutP[m>>histShift-hp.lo]
		default:
			id = negBase + lutN[m>>histShift-hn.lo]
		}
		qz.ids[i] = id
		a := float64(math.Float32frombits(m))
		sums[id] += a
		qz.energy[id] += a * a
		maxBits[id] = max(maxBits[id], m)
		qz.counts[id]++
	}
	qz.reps = make([]float32, nb)
	qz.upper = make([]float32, nb)
	side := func(lo, hi int, minBits uint32) {
		prevMax := math.Float32frombits(minBits) // paper: the first split is the minimum
		for id := lo; id < hi; id++ {
			up := math.Float32frombits(maxBits[id])
			qz.upper[id] = up
			var r float32
			if rep == RepresentativeSplitMidpoint {
				r = float32((float64(prevMax) + float64(up)) / 2)
			} else {
				r = float32(sums[id] / float64(qz.counts[id]))
			}
			// Keep the guarantees exact under rounding: never above the
			// bucket's largest member, and strictly increasing so the
			// decoder can reject anything else.
			r = min(r, up)
			if id > lo && r <= qz.reps[id-1] {
				r = math.Nextafter32(qz.reps[id-1], float32(math.Inf(1)))
			}
			qz.reps[id] = r
			prevMax = up
		}
	}
	side(0, qz.qpos, minP)
	side(qz.qpos, nb, minN)
	return qz, true
}
