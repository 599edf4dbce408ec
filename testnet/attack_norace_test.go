//go:build !race

package testnet

const raceEnabled = false
