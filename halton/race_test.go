//go:build race

package halton

// The race detector slows the exhaustive sweeps tenfold while finding
// nothing in them (the package starts no goroutines); under it the sweeps
// visit every eighth size.
const raceEnabled = true
