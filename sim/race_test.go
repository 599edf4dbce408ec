//go:build race

package sim

// The race detector slows the simulator about tenfold; a few seeds still
// exercise every code path.
const simInvariantSeeds = 8

// simRelaysLargestP is the largest mesh TestSimRelaysBatch runs.
const simRelaysLargestP = 64

// simNearHistorySeeds is 0: TestSimSplitNearHistory sweeps the core's
// decisions, which the race detector does not check, at ten times the cost.
const simNearHistorySeeds = 0
