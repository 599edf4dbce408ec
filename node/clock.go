package node

import "slices"

// VectorClock records, per origin, which of its updates are in the local
// view. Get(q) is the largest c such that every update of q with clock ≤ c
// has been added; updates that arrive ahead of a gap are remembered until the
// gap closes, so the entry only advances over contiguous clocks.
//
// It is plain data: no timers, no liveness. Liveness is the caller's input.
type VectorClock struct {
	high  map[string]uint64
	ahead map[string]map[uint64]struct{}
}

// NewVectorClock returns an empty vector clock (every entry 0).
func NewVectorClock() *VectorClock {
	return &VectorClock{high: map[string]uint64{}, ahead: map[string]map[uint64]struct{}{}}
}

// Get returns the contiguous high-water mark of origin q.
func (v *VectorClock) Get(q string) uint64 { return v.high[q] }

// Has reports whether update (q, c) has been added.
func (v *VectorClock) Has(q string, c uint64) bool {
	if c <= v.high[q] {
		return true
	}
	_, ok := v.ahead[q][c]
	return ok
}

// Add records update (q, c) and reports whether it was new. Clock 0 is never
// an update (clocks count completed iterations from 1), so it is reported as
// already present.
func (v *VectorClock) Add(q string, c uint64) bool {
	if v.Has(q, c) {
		return false
	}
	h := v.high[q]
	if c != h+1 {
		set := v.ahead[q]
		if set == nil {
			set = map[uint64]struct{}{}
			v.ahead[q] = set
		}
		set[c] = struct{}{}
		return true
	}
	h = c
	set := v.ahead[q]
	for {
		if _, ok := set[h+1]; !ok {
			break
		}
		delete(set, h+1)
		h++
	}
	if len(set) == 0 {
		delete(v.ahead, q)
	}
	v.high[q] = h
	return true
}

// Withdraw forgets update (q, c) held ahead of a gap (c above Get(q)); it
// reports whether it was held so.
func (v *VectorClock) Withdraw(q string, c uint64) bool {
	set := v.ahead[q]
	if _, ok := set[c]; !ok {
		return false
	}
	delete(set, c)
	if len(set) == 0 {
		delete(v.ahead, q)
	}
	return true
}

// Set moves q's entry to c, forgetting what was buffered at or below it; a
// node that starts from a snapshot uses it.
func (v *VectorClock) Set(q string, c uint64) {
	v.high[q] = c
	for k := range v.ahead[q] {
		if k <= c {
			delete(v.ahead[q], k)
		}
	}
}

// Min returns the smallest entry over members, and 0 for no members.
func (v *VectorClock) Min(members []string) uint64 {
	if len(members) == 0 {
		return 0
	}
	m := v.high[members[0]]
	for _, q := range members[1:] {
		m = min(m, v.high[q])
	}
	return m
}

// Snapshot returns a copy of the contiguous entries, keyed by origin.
func (v *VectorClock) Snapshot() map[string]uint64 {
	out := make(map[string]uint64, len(v.high))
	for q, c := range v.high {
		out[q] = c
	}
	return out
}

// Origins returns the origins with a non-zero entry, sorted.
func (v *VectorClock) Origins() []string {
	out := make([]string, 0, len(v.high))
	for q, c := range v.high {
		if c > 0 {
			out = append(out, q)
		}
	}
	slices.Sort(out)
	return out
}

// GateOpen reports whether a node whose clock is t (t completed iterations)
// may start iteration t+1 under staleness s: every live member's entry must
// be at least (t+1) − s − 1 = t − s.
func GateOpen(v *VectorClock, live []string, t uint64, s int) bool {
	need := int64(t) - int64(s)
	if need <= 0 {
		return true
	}
	return int64(v.Min(live)) >= need
}
