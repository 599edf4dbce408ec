package node

import "testing"

// AutoLocalSteps pays one round per ⌈round/step⌉ steps, within its bounds.
func TestAutoLocalSteps(t *testing.T) {
	for _, tc := range []struct {
		round, step, iterations uint64
		want                    int
	}{
		{0, 5, 100, 1},   // loopback: no round to pay
		{4, 5, 100, 1},   // a round below one step
		{5, 5, 100, 1},   // a round of exactly one step
		{6, 5, 100, 2},   // just above: two steps
		{25, 5, 100, 5},  // a round of five steps
		{26, 5, 100, 6},  // rounded up
		{36, 5, 100, 8},  // rounded up to the bound
		{240, 3, 100, 8}, // a WAN round: at most MaxAutoLocalSteps
		{240, 3, 30, 5},  // at least MinAutoExchanges exchanges of 30 steps
		{240, 3, 5, 1},   // too short a run for two steps an exchange
		{240, 0, 100, 8}, // a step too fast to measure counts as one unit
		{1 << 63, 1, 1 << 40, MaxAutoLocalSteps},
	} {
		if got := AutoLocalSteps(tc.round, tc.step, tc.iterations); got != tc.want {
			t.Errorf("AutoLocalSteps(%d, %d, %d) = %d, want %d", tc.round, tc.step, tc.iterations, got, tc.want)
		}
	}
}
