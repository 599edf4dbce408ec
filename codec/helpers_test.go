package codec

import (
	"math"
	"math/rand/v2"
	"slices"
)

// laplaceUpdate returns a sparse update of n distinct keys drawn from
// [0, keyRange) with Laplace-distributed values of scale b, the shape of a
// mini-batch gradient.
func laplaceUpdate(seed uint64, n int, keyRange uint64, b float64) Sparse {
	r := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	set := make(map[uint64]struct{}, n)
	for len(set) < n {
		set[r.Uint64N(keyRange)] = struct{}{}
	}
	keys := make([]uint64, 0, n)
	for k := range set {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	vals := make([]float32, n)
	for i := range vals {
		vals[i] = laplace(r, b)
	}
	return Sparse{Keys: keys, Values: vals}
}

func laplace(r *rand.Rand, b float64) float32 {
	u := r.Float64() - 0.5
	v := -b * math.Copysign(math.Log1p(-2*math.Abs(u)), u)
	return float32(v)
}

// gapStats holds the statistics both key coders are chosen from, as the
// encoder gathers them: byteHist[l] counts gaps of l bytes, symHist the
// gap symbols, and extraBits totals the Huffman extra bits.
type gapStats struct {
	byteHist  [9]int
	symHist   [gapSymbols]uint32
	extraBits int
}

func (s *gapStats) addList(keys []uint64) {
	prev := uint64(0)
	for i, k := range keys {
		x := k
		if i > 0 {
			x = k - prev - 1
		}
		prev = k
		s.byteHist[byteLen(x)]++
		sym, eb := gapSymbol(x)
		s.symHist[sym]++
		s.extraBits += int(eb)
	}
}
