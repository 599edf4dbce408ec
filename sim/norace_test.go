//go:build !race

package sim

// simInvariantSeeds is how many seeds TestSimInvariantsUnderFaults runs.
const simInvariantSeeds = 50
