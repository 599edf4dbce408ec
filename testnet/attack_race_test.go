//go:build race

package testnet

// The race detector slows a testnet run severalfold: under it the hostile
// peer suite runs a few kinds only.
const raceEnabled = true
