package node

import (
	"math"
	"slices"
)

// View digests.
//
// Committed rows are a function of the set of updates a row holds and of
// the rows before it (rows are applied clock by clock, origin by origin in
// sorted id order), so two members that committed row c from the same
// updates hold bit-identical committed views at c. A node records a digest
// of its committed view when it commits a row, keeps the last few, and
// sends its latest with anti-entropy; the answerer compares it with its own
// of the same clock and reports a mismatch (SyncStats.ViewDivergence,
// EventDiverged). A mismatch means the two replicas have drifted apart: a
// bug, corrupted memory, or rows committed from different sets of updates,
// which happens legitimately when the two disagreed on the membership at
// that row (one committed it without a member it had declared down, the
// other with that member's update; the late update is added to the first's
// rows afterwards, in a different order, so their bits differ from then on).
//
// The digest is FNV-1a 64 over the little-endian bytes of each float64 of
// the committed view, then of the clock. FNV-1a is serial, one multiply
// per byte: hashing 2^20 parameters takes about 12 ms
// (BenchmarkViewDigest), while a sparse iteration of a model that size
// takes about 0.2 ms at 32 rows a batch (BenchmarkTrainIteration), so
// hashing every row would make training some 50 times slower. A node
// therefore hashes only the rows whose clock is a multiple of
// DigestEvery, one row per 2^11 parameters (512 clocks for 2^20), which
// keeps the hashing to about a tenth of the training time whatever the
// model's size. Every member derives the interval from the same model, so
// all of them hash the same rows.

// ViewDigest is the digest of a node's committed view at a clock.
type ViewDigest struct {
	Clock uint64
	Sum   uint64
}

const (
	fnvOffset64 = 14695981039346656037
	fnvPrime64  = 1099511628211
	// digestParamsPerClock is the model size whose hash costs about a
	// tenth of a sparse iteration of 32 rows; a model of d parameters is
	// hashed every ⌈d / digestParamsPerClock⌉ clocks.
	digestParamsPerClock = 1 << 11
)

// DigestEvery returns the interval in clocks between the rows a node with
// a model of params parameters hashes.
func DigestEvery(params int) uint64 {
	return uint64(max(1, (params+digestParamsPerClock-1)/digestParamsPerClock))
}

// digestView returns FNV-1a 64 over the little-endian bytes of view's
// float64s, then of clock. It is written out rather than fed through
// hash/fnv so that nothing is copied or allocated.
func digestView(view []float64, clock uint64) uint64 {
	h := uint64(fnvOffset64)
	for _, v := range view {
		h = fnvWord(h, math.Float64bits(v))
	}
	return fnvWord(h, clock)
}

// fnvWord feeds the 8 little-endian bytes of b to the FNV-1a state h.
func fnvWord(h, b uint64) uint64 {
	for range 8 {
		h ^= b & 0xff
		h *= fnvPrime64
		b >>= 8
	}
	return h
}

// recordDigest hashes the committed view as row c when c is one of the
// clocks hashed, keeping the last digestKeep digests.
func (n *Node) recordDigest(c uint64) {
	if c == 0 || c%n.digestEvery != 0 {
		return
	}
	if len(n.digests) >= n.digestKeep {
		n.digests = slices.Delete(n.digests, 0, len(n.digests)-n.digestKeep+1)
	}
	n.digests = append(n.digests, ViewDigest{Clock: c, Sum: digestView(n.committedRows(), c)})
}

// LatestDigest returns the digest of the newest row the node hashed; its
// Clock is 0 when there is none yet.
func (n *Node) LatestDigest() ViewDigest {
	if len(n.digests) == 0 {
		return ViewDigest{}
	}
	return n.digests[len(n.digests)-1]
}

// DigestAt returns the node's digest of row c, if it hashed that row and
// still keeps it.
func (n *Node) DigestAt(c uint64) (uint64, bool) {
	i, ok := slices.BinarySearchFunc(n.digests, c, func(d ViewDigest, c uint64) int {
		switch {
		case d.Clock < c:
			return -1
		case d.Clock > c:
			return 1
		}
		return 0
	})
	if !ok {
		return 0, false
	}
	return n.digests[i].Sum, true
}
