//go:build !race

package sim

// simInvariantSeeds is how many seeds TestSimInvariantsUnderFaults runs.
const simInvariantSeeds = 50

// simRelaysLargestP is the largest mesh TestSimRelaysBatch runs (P = 256
// takes about 12 s of CPU, ten times that under the race detector).
const simRelaysLargestP = 256

// simNearHistorySeeds is how many seeds TestSimSplitNearHistory runs.
const simNearHistorySeeds = 6
