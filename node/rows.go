package node

import (
	"github.com/sketchmesh/sketchmesh/dataset"
	"math"
	"slices"

	"github.com/sketchmesh/sketchmesh/codec"
)

// Committed rows shared between cores.
//
// The committed view is a function of the rows it started from and of the
// updates added to it, in order (see digest.go): two cores that added the
// same updates to the same start hold it bit for bit. A simulator runs a
// core per member, and each held a dense copy of it (512 KiB at 2^16
// weights) that, at staleness 0 or between the commits of a few rows, was
// the same as most others'. With a RowStore (Config.SharedRows) cores keep
// one copy per distinct committed view: a core names its view by a key
// chained over the digests of the updates it added, adds an update to its
// key at once and to its vector only when it next reads it, and then takes
// the vector another core already computed for the same key, or computes
// it on a copy of its old one. Of P cores that commit the same row, one
// does the additions and the others take its result; a view no core holds
// any more is kept a while for the cores behind (RowStore.idle): computed
// in place, the first core's view was gone by the time the next came, and
// at P = 512 nearly every core computed every view itself.

// foldEvery bounds the updates a core holds unadded: a core that has not
// read its view adds them (or takes the sum) at every foldEvery-th update
// since its start, a point the same for every core of the same rows, so
// that these folds are shared too. Unbounded, a core that waits at its
// gate held a row of P updates, and the cores O(P²).
const foldEvery = 64

// RowStore holds the committed views that cores share, by key. It is not
// safe for concurrent use: the cores sharing it run in one goroutine, as a
// simulator's do.
type RowStore struct {
	size  int
	byKey map[rowKey]*sharedRows
	// digests remembers the digests of recent updates by the address of
	// their values, so that the P cores adding one decoded update (shared
	// through a DecodeCache) hash its content once. An entry keeps its
	// update alive, so the address is not reused while it is remembered.
	digests map[*float32]updateDigest
	fifo    []*float32
	limit   int
	// idle keeps the views no core holds any more, newest last, up to
	// idleLimit, for the cores behind: the first core to reach a view
	// moves on before the last, and each core after it would compute the
	// view again (P times per fold point, not once). spare is the values
	// of the last view idle dropped, for the next view computed.
	idle      []*sharedRows
	idleLimit int
	releases  uint64
	spare     []float64
	// work is the working view of the core that read last (Node.view).
	work workScratch
	// sums are the sums of pending rows by clock (rowsums.go), lastSum
	// the one found last; differ is overlaySum's scratch.
	sums    []*rowSum
	lastSum *rowSum
	differ  []int32
	// Computed counts the views a core computed by adding updates, Taken
	// those it took from another core; SumReads the pending rows a core
	// read through their shared sum.
	Computed, Taken, SumReads uint64
}

// rowKey names a committed view: 128 bits, so that a collision between the
// views of a run is out of reach.
type rowKey struct{ a, b uint64 }

type sharedRows struct {
	key  rowKey
	vals []float64
	// refs counts the cores holding vals; stored is whether byKey holds
	// it under key.
	refs   int
	stored bool
	// listed is whether RowStore.idle lists it, since the release count
	// listedAt; released is the count at its last release.
	listed             bool
	listedAt, released uint64
}

type updateDigest struct {
	keys       *uint64
	nKeys, nVs int
	sum        rowKey
}

// NewRowStore returns a store for cores of a model of size parameters that
// remembers the digests of the last limit distinct updates, and keeps the
// views of as many updates' fold points (foldEvery) after their last core
// moved on.
func NewRowStore(size, limit int) *RowStore {
	limit = max(limit, 1)
	return &RowStore{size: size, byKey: map[rowKey]*sharedRows{}, digests: map[*float32]updateDigest{}, limit: limit,
		idleLimit: limit/foldEvery + 2}
}

// Hash lanes: the words are mixed into two 64-bit states with different
// constants (after MurmurHash3's fmix64, dataset.Mix64), each word after its position.
func (k rowKey) then(w uint64) rowKey {
	return rowKey{dataset.Mix64(k.a^w) * 0x9e3779b97f4a7c15, dataset.Mix64(k.b+w) * 0xc2b2ae3d27d4eb4f}
}

// with chains the digest d after k.
func (k rowKey) with(d rowKey) rowKey { return k.then(d.a).then(d.b) }

// Domains keep the keys of views started from zero, views started from a
// snapshot and the digests of updates apart.
const (
	domainZero uint64 = iota + 1
	domainSnapshot
	domainUpdate
)

// zero returns the shared zero view, which the caller now holds.
func (s *RowStore) zero() *sharedRows {
	key := rowKey{}.then(domainZero).then(uint64(s.size))
	if r, ok := s.byKey[key]; ok {
		r.refs++
		return r
	}
	r := &sharedRows{key: key, vals: make([]float64, s.size), refs: 1, stored: true}
	s.byKey[key] = r
	return r
}

// adopt names vals, a view of a snapshot at clock, by its content, and
// returns the shared view of that name, which the caller now holds.
func (s *RowStore) adopt(vals []float64, clock uint64) *sharedRows {
	key := rowKey{}.then(domainSnapshot).then(clock).then(uint64(len(vals)))
	for _, v := range vals {
		key = key.then(math.Float64bits(v))
	}
	if r, ok := s.byKey[key]; ok {
		r.refs++
		return r
	}
	r := &sharedRows{key: key, vals: vals, refs: 1, stored: true}
	s.byKey[key] = r
	return r
}

func (s *RowStore) release(r *sharedRows) {
	r.refs--
	if r.refs > 0 || !r.stored {
		return
	}
	// Most views are released many times (each core that passes through
	// a fold point holds it only for a moment): listed once, a view goes
	// when it is the least recently released, not when it was first.
	s.releases++
	r.released = s.releases
	if r.listed {
		return
	}
	r.listed, r.listedAt = true, s.releases
	s.idle = append(s.idle, r)
	for len(s.idle) > s.idleLimit {
		old := s.idle[0]
		s.idle[0] = nil
		s.idle = s.idle[1:]
		switch {
		case old.refs > 0:
			// Held again: listed anew at its next release.
			old.listed = false
		case old.released > old.listedAt:
			old.listedAt = s.releases
			s.idle = append(s.idle, old)
		default:
			old.listed = false
			delete(s.byKey, old.key)
			old.stored = false
			s.spare, old.vals = old.vals, nil
		}
	}
}

// copyOf returns a copy of vals, in the spare values when there are.
func (s *RowStore) copyOf(vals []float64) []float64 {
	if len(s.spare) != len(vals) {
		return slices.Clone(vals)
	}
	out := s.spare
	s.spare = nil
	copy(out, vals)
	return out
}

// digest returns the digest of u's content.
func (s *RowStore) digest(u codec.Sparse) rowKey {
	if len(u.Values) == 0 {
		return rowKey{}.then(domainUpdate).then(uint64(len(u.Keys)))
	}
	var keys *uint64
	if len(u.Keys) > 0 {
		keys = &u.Keys[0]
	}
	at := &u.Values[0]
	if d, ok := s.digests[at]; ok && d.keys == keys && d.nKeys == len(u.Keys) && d.nVs == len(u.Values) {
		return d.sum
	}
	sum := rowKey{}.then(domainUpdate).then(uint64(len(u.Keys)))
	for _, k := range u.Keys {
		sum = sum.then(k)
	}
	sum = sum.then(uint64(len(u.Values)))
	for _, v := range u.Values {
		sum = sum.then(uint64(math.Float32bits(v)))
	}
	if _, ok := s.digests[at]; !ok {
		if len(s.fifo) >= s.limit {
			delete(s.digests, s.fifo[0])
			s.fifo = s.fifo[1:]
		}
		s.fifo = append(s.fifo, at)
	}
	s.digests[at] = updateDigest{keys: keys, nKeys: len(u.Keys), nVs: len(u.Values), sum: sum}
	return sum
}

// shareRows puts the node's committed view, fresh from New or a snapshot,
// in the store.
func (n *Node) shareRows(s *RowStore) {
	if n.cfg.Start == nil {
		n.rows = s.zero()
	} else {
		n.rows = s.adopt(n.committed, n.committedClock)
	}
	n.committed, n.foldKey = n.rows.vals, n.rows.key
}

// foldRows brings the committed view up to the updates added since it was
// last read: by taking the view another core computed for the same key,
// or by adding them.
func (n *Node) foldRows() {
	if len(n.fold) == 0 {
		return
	}
	s := n.cfg.SharedRows
	old := n.rows
	r, ok := s.byKey[n.foldKey]
	if ok {
		r.refs++
		s.Taken++
	} else {
		// Not in place, though no other core holds old: the cores behind
		// may still need it (RowStore.idle).
		r = &sharedRows{key: n.foldKey, vals: s.copyOf(old.vals), refs: 1, stored: true}
		n.addFold(r.vals)
		s.byKey[r.key] = r
		s.Computed++
	}
	n.rows = r
	s.release(old)
	n.committed = n.rows.vals
	clear(n.fold)
	n.fold = n.fold[:0]
}

func (n *Node) addFold(vals []float64) {
	for _, u := range n.fold {
		applySparse(vals, u)
	}
}

// DropSharedRows gives back the node's hold on the committed view it shares
// (Config.SharedRows), for a driver that drops the node: else the store
// keeps the view for it. The node must not be used afterwards.
func (n *Node) DropSharedRows() {
	if n.rows == nil {
		return
	}
	n.cfg.SharedRows.release(n.rows)
	n.rows, n.committed = nil, nil
	clear(n.fold)
	n.fold = nil
}

// committedRows returns the committed view, brought up to date.
func (n *Node) committedRows() []float64 {
	if n.rows != nil {
		n.foldRows()
	}
	return n.committed
}

// workScratch is a working view: base's values with pending updates added
// on the pages marked (or anywhere, when dense).
type workScratch struct {
	vals    []float64
	base    *sharedRows
	baseKey rowKey
	marks   overlayMarks
}

// workOn returns the scratch set to committed, the values of rows: only
// the pages the last overlay marked are restored when the last read was of
// the same rows, as it is for the cores of a mesh in step.
func (s *RowStore) workOn(committed []float64, rows *sharedRows) *workScratch {
	w := &s.work
	switch {
	case w.vals == nil:
		w.vals = slices.Clone(committed)
		w.marks = newOverlayMarks(len(committed))
	case w.base != rows || w.baseKey != rows.key:
		copy(w.vals, committed)
		w.marks.reset()
	default:
		w.marks.restore(w.vals, committed)
	}
	w.base, w.baseKey = rows, rows.key
	return w
}
