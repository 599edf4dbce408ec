package node

import (
	"slices"
	"strings"
	"unsafe"
)

// VectorClock records, per origin, which of its updates are in the local
// view. Get(q) is the largest c such that every update of q with clock ≤ c
// has been added; updates that arrive ahead of a gap are remembered until the
// gap closes, so the entry only advances over contiguous clocks.
//
// It is plain data: no timers, no liveness. Liveness is the caller's input.
//
// Each origin is interned once to a slot, and the entries live in slices
// indexed by it: a node looks the same origin up several times for every
// update it receives, and a string-keyed map made those lookups the largest
// cost of a large simulation. The core finds an origin's slot once per
// update (slot) and reads by it (getAt, hasAt, addAt).
type VectorClock struct {
	table *SlotTable
	// interned[i] is whether this clock interned slot i: a shared table
	// (Config.Slots) holds other cores' origins too.
	interned []bool
	// high[i] is the entry of slot i; set[i] whether it was ever written
	// (Snapshot lists those, zeros included).
	high []uint64
	set  []bool
	// ahead[i] holds the clocks of slot i added above a gap, for the few
	// slots that have any: a slice of them by slot cost each simulated
	// core 8 bytes per member, nearly always nil.
	ahead map[int]map[uint64]struct{}
}

// SlotTable gives origins their slots. A vector clock has its own, unless
// the cores of one goroutine (a simulator's) share one (Config.Slots):
// origins are the same everywhere, and a map by id in each core cost each
// about 40 bytes per member. Not safe for concurrent use.
type SlotTable struct {
	slots map[string]int
	// names[i] is the origin of slot i.
	names []string
	// byName is every slot, in the order of the slots' names: the order
	// a node reads its pending rows in (Node.pendingRow).
	byName []int32
	// start is the last member list a node on this table started with, and
	// its slots (see startLists); startPeers and startPeerKnown the peers'
	// incarnations that list gives, once a node has worked them out (see
	// Node.initProtocol).
	start           []string
	startSlots      []int
	startPeers      []uint64
	startPeerKnown  []bool
	startPeersKnown bool
	// peers and peerKnown are the peers' incarnations a node on this
	// table started with (see sharePeers).
	peers     []uint64
	peerKnown []bool
	// cards are the members' cards of the cores on this table (see
	// memberstate.go), and timelines[i] the frames their logs keep of the
	// member of slot i (see framelog.go).
	cards     cardTable
	timelines []timeline
	// last is the name lookup found last, and lastSlot its slot.
	last     string
	lastSlot int
}

// lookup returns name's slot, if it has one. The name found last is
// remembered and known again by the address of its bytes, without hashing
// them: the handling of one message looks up the same string many times
// (a hello's member by every check it passes, in every core that reads
// the cached message), and last, held, keeps those bytes from being reused
// for another string.
func (t *SlotTable) lookup(name string) (int, bool) {
	if len(name) > 0 && len(name) == len(t.last) && unsafe.StringData(name) == unsafe.StringData(t.last) {
		return t.lastSlot, true
	}
	i, ok := t.slots[name]
	if ok {
		t.last, t.lastSlot = name, i
	}
	return i, ok
}

// startLists returns a member list equal to members, sorted, and its
// slots, to be shared by the nodes on this table that start with it: P
// simulated cores start with one list, and a copy of it and of its slots
// in each, for the members and again for the live ones, cost each core 48
// bytes per member. The slices are clipped, so an insertion copies them;
// a node rebuilds its own live list on the first change (Node.setLive).
//
// members must be sorted and without repeats; the table keeps a copy.
func (t *SlotTable) startLists(members []string) ([]string, []int) {
	if !slices.Equal(t.start, members) {
		t.start = slices.Clip(slices.Clone(members))
		t.startSlots = make([]int, len(members))
		for i, m := range members {
			t.startSlots[i] = t.intern(m)
		}
		t.startPeers, t.startPeerKnown, t.startPeersKnown = nil, nil, false
	}
	return t.start, t.startSlots
}

// isStart reports whether members is the table's start list itself (as
// startLists returned it, not a copy or a changed list).
func (t *SlotTable) isStart(members []string) bool {
	return len(members) == len(t.start) && (len(members) == 0 || &members[0] == &t.start[0])
}

// sharePeers returns the highest incarnations admitted on each peer name
// that a node on this table starts with (Node.initProtocol), peers and
// known, or equal ones the table holds already: P simulated cores start
// with the same, and a copy in each cost it 9 bytes per member. The
// slices are clipped and must not be written; a node copies them before
// it changes one (Node.setPeerInc).
func (t *SlotTable) sharePeers(peers []uint64, known []bool) ([]uint64, []bool) {
	if !slices.Equal(t.peers, peers) || !slices.Equal(t.peerKnown, known) {
		t.peers, t.peerKnown = slices.Clip(peers), slices.Clip(known)
	}
	return t.peers, t.peerKnown
}

// origin returns name as a string: the table's own when it has a slot
// for it, so that reading an update's origin allocates nothing.
func (t *SlotTable) origin(name []byte) string {
	s, _ := t.originSlot(name)
	return s
}

// originSlot is origin that also returns name's slot, -1 when it has none.
func (t *SlotTable) originSlot(name []byte) (string, int) {
	if i, ok := t.slots[string(name)]; ok {
		return t.names[i], i
	}
	return string(name), -1
}

// originReader reads the origins of an envelope's updates through a slot
// table (decodeEnvelopeInto): each as origin does, its slot appended to
// slots, so that a core finds its records of the origin without a second
// lookup by name.
type originReader struct {
	table *SlotTable
	slots []int
}

func (r *originReader) origin(name []byte) string {
	s, i := r.table.originSlot(name)
	r.slots = append(r.slots, i)
	return s
}

// NewSlotTable returns an empty table with room for n origins.
func NewSlotTable(n int) *SlotTable {
	return &SlotTable{slots: make(map[string]int, n), names: make([]string, 0, n)}
}

func (t *SlotTable) intern(q string) int {
	if i, ok := t.slots[q]; ok {
		return i
	}
	i := len(t.names)
	t.slots[q] = i
	t.names = append(t.names, q)
	// The members a node starts with are interned in name order, each
	// appended here after one comparison.
	at := len(t.byName)
	if at > 0 && t.names[t.byName[at-1]] > q {
		at, _ = slices.BinarySearchFunc(t.byName, q, func(s int32, name string) int { return strings.Compare(t.names[s], name) })
	}
	t.byName = slices.Insert(t.byName, at, int32(i))
	return i
}

// reach returns s grown with zero values to hold index i: the slices a
// node keeps by slot grow as slots are interned.
func reach[T any](s []T, i int) []T {
	if i < len(s) {
		return s
	}
	return append(s, make([]T, i+1-len(s))...)
}

// NewVectorClock returns an empty vector clock (every entry 0).
func NewVectorClock() *VectorClock { return newVectorClockOn(nil, 0) }

// newVectorClockOn returns an empty vector clock on table (its own when
// nil) with room for n origins: a simulated core interns P members at its
// start, and slices grown one origin at a time held up to twice that.
func newVectorClockOn(table *SlotTable, n int) *VectorClock {
	if table == nil {
		table = NewSlotTable(n)
	}
	return &VectorClock{table: table, interned: make([]bool, 0, n),
		high: make([]uint64, 0, n), set: make([]bool, 0, n)}
}

// slot returns q's slot, or -1 when q was never added.
func (v *VectorClock) slot(q string) int {
	if i, ok := v.table.lookup(q); ok {
		return v.slotAt(i)
	}
	return -1
}

// slotAt is slot for the origin the table gave slot i (-1 for none).
func (v *VectorClock) slotAt(i int) int {
	if i >= 0 && i < len(v.interned) && v.interned[i] {
		return i
	}
	return -1
}

// intern returns q's slot, making one when q has none.
func (v *VectorClock) intern(q string) int {
	i := v.table.intern(q)
	v.internSlot(i)
	return i
}

// internSlot is intern for an origin the table gave slot i.
func (v *VectorClock) internSlot(i int) {
	v.interned, v.high, v.set = reach(v.interned, i), reach(v.high, i), reach(v.set, i)
	v.interned[i] = true
}

// nameAt returns the origin of slot i.
func (v *VectorClock) nameAt(i int) string { return v.table.names[i] }

// Get returns the contiguous high-water mark of origin q.
func (v *VectorClock) Get(q string) uint64 { return v.getAt(v.slot(q)) }

// getAt is Get by slot; slot -1 (an origin never added) reads 0.
func (v *VectorClock) getAt(i int) uint64 {
	if i < 0 {
		return 0
	}
	return v.high[i]
}

// aheadOf returns the clocks of q held above a gap (nil for none); the
// caller must not modify it.
func (v *VectorClock) aheadOf(q string) map[uint64]struct{} {
	if i := v.slot(q); i >= 0 {
		return v.ahead[i]
	}
	return nil
}

// Has reports whether update (q, c) has been added.
func (v *VectorClock) Has(q string, c uint64) bool { return v.hasAt(v.slot(q), c) }

// hasAt is Has by slot.
func (v *VectorClock) hasAt(i int, c uint64) bool {
	if i < 0 {
		return c == 0
	}
	if c <= v.high[i] {
		return true
	}
	if len(v.ahead) == 0 {
		return false
	}
	_, ok := v.ahead[i][c]
	return ok
}

// Add records update (q, c) and reports whether it was new. Clock 0 is never
// an update (clocks count completed iterations from 1), so it is reported as
// already present.
func (v *VectorClock) Add(q string, c uint64) bool {
	if c == 0 {
		return false
	}
	return v.addAt(v.intern(q), c)
}

// addAt is Add by slot.
func (v *VectorClock) addAt(i int, c uint64) bool {
	if v.hasAt(i, c) {
		return false
	}
	h := v.high[i]
	if c != h+1 {
		set := v.ahead[i]
		if set == nil {
			if v.ahead == nil {
				v.ahead = map[int]map[uint64]struct{}{}
			}
			set = map[uint64]struct{}{}
			v.ahead[i] = set
		}
		set[c] = struct{}{}
		return true
	}
	h = c
	if set := v.ahead[i]; set != nil {
		for {
			if _, ok := set[h+1]; !ok {
				break
			}
			delete(set, h+1)
			h++
		}
		if len(set) == 0 {
			delete(v.ahead, i)
		}
	}
	v.high[i], v.set[i] = h, true
	return true
}

// Withdraw forgets update (q, c) held ahead of a gap (c above Get(q)); it
// reports whether it was held so.
func (v *VectorClock) Withdraw(q string, c uint64) bool {
	i := v.slot(q)
	if i < 0 {
		return false
	}
	set := v.ahead[i]
	if _, ok := set[c]; !ok {
		return false
	}
	delete(set, c)
	if len(set) == 0 {
		delete(v.ahead, i)
	}
	return true
}

// Set moves q's entry to c, forgetting what was buffered at or below it; a
// node that starts from a snapshot uses it.
func (v *VectorClock) Set(q string, c uint64) {
	i := v.intern(q)
	v.high[i], v.set[i] = c, true
	set := v.ahead[i]
	for k := range set {
		if k <= c {
			delete(set, k)
		}
	}
	if len(set) == 0 {
		delete(v.ahead, i)
	}
}

// Min returns the smallest entry over members, and 0 for no members.
func (v *VectorClock) Min(members []string) uint64 {
	if len(members) == 0 {
		return 0
	}
	m := v.Get(members[0])
	for _, q := range members[1:] {
		m = min(m, v.Get(q))
	}
	return m
}

// Snapshot returns a copy of the contiguous entries, keyed by origin.
func (v *VectorClock) Snapshot() map[string]uint64 {
	out := make(map[string]uint64, len(v.high))
	for i, ok := range v.interned {
		if ok && v.set[i] {
			out[v.nameAt(i)] = v.high[i]
		}
	}
	return out
}

// Origins returns the origins with a non-zero entry, sorted.
func (v *VectorClock) Origins() []string {
	out := make([]string, 0, len(v.high))
	for i, ok := range v.interned {
		if ok && v.high[i] > 0 {
			out = append(out, v.nameAt(i))
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
