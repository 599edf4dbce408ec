package codec

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func sampleMagnitudes(r *rand.Rand, kind, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		switch kind {
		case 0:
			v[i] = float32(r.ExpFloat64() * 1e-3) // |Laplace|
		case 1:
			v[i] = float32(math.Exp(r.NormFloat64() * 3)) // log-normal over decades
		case 2:
			v[i] = float32(1 + r.Float64()) // uniform in one binade
		default:
			v[i] = float32(1 + r.IntN(5)) // few distinct values
		}
		if v[i] == 0 {
			v[i] = 1e-30
		}
	}
	return v
}

func histOf(v []float32) *logHist {
	lo, hi := uint32(math.MaxUint32), uint32(0)
	for _, x := range v {
		b := math.Float32bits(x)
		lo, hi = min(lo, b), max(hi, b)
	}
	h := newLogHist(lo, hi)
	for _, x := range v {
		h.add(math.Float32bits(x))
	}
	return h
}

// TestLogHistQuantiles checks the sketch against exact quantiles: every
// quantile it returns is within a factor 1+2^-8 above the exact one, and
// the rank of that value is off by at most the count of one bin.
func TestLogHistQuantiles(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	for kind := range 4 {
		v := sampleMagnitudes(r, kind, 50000)
		h := histOf(v)
		sorted := slices.Clone(v)
		slices.Sort(sorted)
		maxBin := 0
		for _, c := range h.counts {
			maxBin = max(maxBin, int(c))
		}
		for q := 1; q <= 256; q++ {
			phi := float64(q) / 256
			exact := sorted[int(math.Ceil(phi*float64(len(v))))-1]
			got := h.quantile(phi)
			if got < exact || float64(got) > float64(exact)*(1+1.0/256) {
				t.Fatalf("kind %d: quantile %.4f = %v, exact %v (allowed up to ×(1+2^-8))", kind, phi, got, exact)
			}
			// Values at or below got: the rank the sketch attributes.
			rank, _ := slices.BinarySearch(sorted, math.Nextafter32(got, 0))
			for rank < len(sorted) && sorted[rank] < got {
				rank++
			}
			if want := int(math.Ceil(phi * float64(len(v)))); rank < want || rank > want+maxBin {
				t.Fatalf("kind %d: quantile %.4f has rank %d, exact %d, max bin %d", kind, phi, rank, want, maxBin)
			}
		}
	}
}

// TestLogHistPartition checks that buckets are non-empty, cover the bins in
// order and hold nearly equal counts: when no bin is heavy enough to merge
// buckets, each boundary lies within half a bin's count (plus one) of the
// exact equal-count rank.
func TestLogHistPartition(t *testing.T) {
	r := rand.New(rand.NewPCG(43, 44))
	for kind := range 4 {
		for _, k := range []int{1, 2, 7, 128, 4096} {
			v := sampleMagnitudes(r, kind, 20000)
			h := histOf(v)
			lut, nb := h.partition(k)
			if nb < 1 || nb > k {
				t.Fatalf("kind %d k %d: %d buckets", kind, k, nb)
			}
			counts := make([]int, nb)
			maxBin := 0
			for i, c := range h.counts {
				if i > 0 && lut[i] < lut[i-1] {
					t.Fatalf("bucket indexes not monotone over bins")
				}
				counts[lut[i]] += int(c)
				maxBin = max(maxBin, int(c))
			}
			cum := 0
			for b, c := range counts {
				if c == 0 {
					t.Fatalf("kind %d k %d: bucket %d empty", kind, k, b)
				}
				cum += c
				if b == nb-1 {
					break
				}
				ideal := float64(b+1) * float64(len(v)) / float64(k)
				if nb == k && math.Abs(float64(cum)-ideal) > float64(maxBin)/2+1.5 {
					t.Fatalf("kind %d k %d: boundary %d at rank %d, ideal %.0f, max bin %d", kind, k, b, cum, ideal, maxBin)
				}
			}
		}
	}
}

func TestLogHistMerge(t *testing.T) {
	r := rand.New(rand.NewPCG(45, 46))
	a, b := sampleMagnitudes(r, 1, 3000), sampleMagnitudes(r, 0, 5000)
	ha, hb := histOf(a), histOf(b)
	ha.merge(hb)
	whole := histOf(append(slices.Clone(a), b...))
	if ha.n != whole.n {
		t.Fatalf("merged n %d, want %d", ha.n, whole.n)
	}
	for q := 1; q <= 100; q++ {
		if x, y := ha.quantile(float64(q)/100), whole.quantile(float64(q)/100); x != y {
			t.Fatalf("quantile %d%%: merged %v, whole %v", q, x, y)
		}
	}
	var empty logHist
	empty.merge(hb)
	if empty.quantile(0.5) != hb.quantile(0.5) {
		t.Fatal("merge into an empty sketch differs")
	}
}

// TestQuantizeSides checks the split of buckets between the sides and the
// representatives' order and bounds.
func TestQuantizeSides(t *testing.T) {
	u := laplaceUpdate(47, 10000, 1<<30, 1)
	for i := range u.Values {
		if i%10 == 0 {
			u.Values[i] = 0
		}
	}
	qz, ok := quantize(u.Values, 256, 8, RepresentativeMemberMean)
	if !ok {
		t.Fatal("refused")
	}
	if qz.qpos+qz.qneg+1 > 256 || qz.qpos < 100 || qz.qneg < 100 {
		t.Fatalf("buckets %d positive %d negative (with a zero bucket), want about 127 each", qz.qpos, qz.qneg)
	}
	for _, side := range [][2]int{{0, qz.qpos}, {qz.qpos, qz.qpos + qz.qneg}} {
		for b := side[0]; b < side[1]; b++ {
			if qz.reps[b] <= 0 || qz.reps[b] > qz.upper[b] {
				t.Fatalf("bucket %d: representative %v outside (0, %v]", b, qz.reps[b], qz.upper[b])
			}
			if b > side[0] && qz.reps[b] <= qz.reps[b-1] {
				t.Fatalf("representatives not increasing at bucket %d", b)
			}
		}
	}
	if _, ok := quantize([]float32{1, float32(math.NaN())}, 256, 8, 0); ok {
		t.Fatal("NaN accepted")
	}
}
