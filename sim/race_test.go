//go:build race

package sim

// The race detector slows the simulator about tenfold; a few seeds still
// exercise every code path.
const simInvariantSeeds = 8

// simRelaysLargestP is the largest mesh TestSimRelaysBatch runs.
const simRelaysLargestP = 64
