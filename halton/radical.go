package halton

// Radical returns the radical inverse of i in base b (b >= 2): the i-th element of the van der Corput/Halton sequence.
//
// The base-b digits of i are mirrored about the radix point, so
// i = d0 + d1·b + d2·b² + … maps to d0/b + d1/b² + d2/b³ + …; Radical(0, b)
// is 0. The sum is evaluated innermost digit first (Horner's rule), so each
// digit costs one rounding and base 2 is exact for every i below 2^53.
// The result is below 1 even where rounding to float64 would reach 1 (large
// i). Radical panics if b < 2, for which the sequence is undefined.
func Radical(i uint64, b uint64) float64 {
	if b < 2 {
		panic("halton: Radical base must be at least 2")
	}
	var digits [64]uint64 // base 2 needs the most digits: 64
	n := 0
	for ; i > 0; i /= b {
		digits[n] = i % b
		n++
	}
	r := 0.0
	fb := float64(b)
	for k := n - 1; k >= 0; k-- {
		r = (r + float64(digits[k])) / fb
	}
	return min(r, 1-0x1p-53)
}
