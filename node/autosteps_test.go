package node

import "testing"

// AutoLocalSteps takes MaxAutoLocalSteps, within a run's MinAutoExchanges
// exchanges.
func TestAutoLocalSteps(t *testing.T) {
	for _, tc := range []struct {
		iterations uint64
		want       int
	}{
		{0, MaxAutoLocalSteps},       // no end
		{1 << 40, MaxAutoLocalSteps}, // a long run
		{200, 8},
		{48, 8}, // exactly MinAutoExchanges exchanges of 8
		{47, 7},
		{30, 5},
		{11, 1}, // too short a run for two steps an exchange
		{1, 1},
	} {
		if got := AutoLocalSteps(tc.iterations); got != tc.want {
			t.Errorf("AutoLocalSteps(%d) = %d, want %d", tc.iterations, got, tc.want)
		}
	}
}
