package cmd

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/sketchmesh/sketchmesh/testnet"
)

// printAttack prints what a hostile peer did (testnet --attack).
func printAttack(w io.Writer, a *testnet.AttackReport) {
	if a == nil {
		return
	}
	who := "an outsider"
	if a.Member {
		who = "a member"
	}
	reasons := make([]string, 0, len(a.Rejected))
	for r := range a.Rejected {
		reasons = append(reasons, r)
	}
	slices.Sort(reasons)
	var parts []string
	for _, r := range reasons {
		parts = append(parts, fmt.Sprintf("%s %d", r, a.Rejected[r]))
	}
	fmt.Fprintf(w, "\nattack %s by %s: %d tried; rejected: %s\n", a.Kind, who, a.Tried, strings.Join(parts, ", "))
	fmt.Fprintf(w, "hostile updates applied: %d; the attacker's valid updates applied: %d of %d; throttled messages: %d; clipped updates: %d; panics: %d\n",
		a.AppliedInvalid, a.AppliedValid, a.ValidSent, a.Throttled, a.Clipped, a.Panics)
	if a.BaselineAccuracy != nil && a.AccuracyDeltaPoints != nil {
		fmt.Fprintf(w, "honest accuracy %s against %s without the attacker (%+.2f points)\n", pct(a.HonestAccuracy), pct(a.BaselineAccuracy), *a.AccuracyDeltaPoints)
	}
	fmt.Fprintf(w, "peak heap %s", humanBytes(float64(a.PeakHeapBytes)))
	if a.MemoryBoundBytes > 0 {
		fmt.Fprintf(w, " (bound %s, within: %v)", humanBytes(float64(a.MemoryBoundBytes)), a.WithinMemoryBound)
	}
	fmt.Fprintln(w)
}
