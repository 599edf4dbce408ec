//go:build !race

package testnet

// simInvariantSeeds is how many seeds TestSimInvariantsUnderFaults runs.
const simInvariantSeeds = 50
