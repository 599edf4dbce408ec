//go:build !race

package halton

const raceEnabled = false
