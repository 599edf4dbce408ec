package halton

import (
	"math"
	"math/bits"
	"testing"
)

func TestRadicalKnownValues(t *testing.T) {
	tests := []struct {
		i, b uint64
		want float64
	}{
		{0, 2, 0},
		{1, 2, 1.0 / 2},
		{2, 2, 1.0 / 4},
		{3, 2, 3.0 / 4},
		{4, 2, 1.0 / 8},
		{5, 2, 5.0 / 8},
		{6, 2, 3.0 / 8},
		{7, 2, 7.0 / 8},
		{8, 2, 1.0 / 16},
		{11, 2, 13.0 / 16}, // 1011 → 0.1101
		{1 << 20, 2, 1.0 / (1 << 21)},
		{0, 3, 0},
		{1, 3, 1.0 / 3},
		{2, 3, 2.0 / 3},
		{3, 3, 1.0 / 9},
		{4, 3, 4.0 / 9},
		{5, 3, 7.0 / 9},
		{6, 3, 2.0 / 9},
		{7, 3, 5.0 / 9},
		{8, 3, 8.0 / 9},
		{9, 3, 1.0 / 27},
		{1, 5, 1.0 / 5},
		{5, 5, 1.0 / 25},
		{7, 5, 11.0 / 25}, // 12₅ → 0.21₅
		{123, 10, 0.321},
		{2024, 10, 0.4202},
		{1, 1 << 40, 1.0 / (1 << 40)},
	}
	for _, tc := range tests {
		got := Radical(tc.i, tc.b)
		if math.Abs(got-tc.want) > 1e-15 {
			t.Errorf("Radical(%d, %d) = %.17g, want %.17g", tc.i, tc.b, got, tc.want)
		}
	}
}

// The construction uses the base-2 sequence in 64-bit fixed point as the
// bit reversal of the index; the two must agree exactly wherever float64
// can hold the value.
func TestRadicalBase2IsBitReversal(t *testing.T) {
	for _, i := range []uint64{0, 1, 2, 3, 5, 1000, 123456789, 1<<52 + 12345, 1<<53 - 1} {
		want := float64(bits.Reverse64(i)) / (1 << 64)
		if got := Radical(i, 2); got != want {
			t.Errorf("Radical(%d, 2) = %.17g, want %.17g", i, got, want)
		}
	}
}

// The first b^k elements of the base-b sequence are exactly the multiples
// of b^−k, each once.
func TestRadicalPrefixIsAGrid(t *testing.T) {
	for _, c := range []struct{ b, k uint64 }{{2, 10}, {3, 6}, {7, 3}} {
		n := uint64(math.Pow(float64(c.b), float64(c.k)))
		seen := make([]bool, n)
		for i := range n {
			x := Radical(i, c.b) * float64(n)
			j := uint64(math.Round(x))
			if math.Abs(x-float64(j)) > 1e-9 || j >= n || seen[j] {
				t.Fatalf("base %d: element %d is %v·b^-%d, not a new grid point", c.b, i, x, c.k)
			}
			seen[j] = true
		}
	}
}

// b^k − 1 has every digit b−1, so its inverse is 1 − b^−k, which rounds to
// 1 in float64 for these k.
func TestRadicalStaysBelowOne(t *testing.T) {
	for _, c := range []struct{ i, b uint64 }{{math.MaxUint64, 2}, {12157665459056928800, 3}, {9999999999999999999, 10}} {
		if got := Radical(c.i, c.b); got != 1-0x1p-53 {
			t.Errorf("Radical(%d, %d) = %.17g, want the largest float64 below 1", c.i, c.b, got)
		}
	}
}

func TestRadicalRejectsBaseBelowTwo(t *testing.T) {
	for _, b := range []uint64{0, 1} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Radical(1, %d) did not panic", b)
				}
			}()
			Radical(1, b)
		}()
	}
}
