package node

import (
	"errors"
	"fmt"
	"iter"
	"math"
	"math/bits"
	"slices"

	"github.com/sketchmesh/sketchmesh/codec"
	"github.com/sketchmesh/sketchmesh/dataset"
	"github.com/sketchmesh/sketchmesh/model"
	"github.com/sketchmesh/sketchmesh/sfb"
)

// Message is an envelope for one next hop.
type Message struct {
	To   string
	Data []byte
}

// Ready is what the driver must do after feeding events.
type Ready struct {
	// Messages go to one member each, on the update protocol.
	Messages []Message
	// Broadcast are membership announcements for every member (the
	// daemon publishes them on the mesh's membership topic).
	Broadcast [][]byte
	// Events are the membership changes the protocol decided, and the
	// view divergences anti-entropy found.
	Events []Event
}

// ErrGateClosed is returned by Train when the staleness gate is closed.
var ErrGateClosed = errors.New("staleness gate closed")

// A pending row holds the updates of one clock that are applied but not
// committed, by their origins' vector clock slots (nil for none): a row
// fills with every live member's update, and a simulated core holds a few
// rows of P, so an entry is one pointer (to the update shared with the
// other cores that decoded the same frame, DecodeCache). Rows are read in
// the order of the origins' names (pendingRow), which makes the view and
// the committed rows independent of the order updates arrived in, without
// a sort: a list of (update, slot) pairs sorted on each read was twice the
// size.

// pendingRow yields the slot and update of each of row c's pending
// updates, in canonical order: by origin.
func (n *Node) pendingRow(c uint64) iter.Seq2[int, *codec.Sparse] {
	row := n.pending[c]
	return func(yield func(int, *codec.Sparse) bool) {
		for _, q := range n.vc.table.byName {
			if int(q) < len(row) && row[q] != nil && !yield(int(q), row[q]) {
				return
			}
		}
	}
}

// Node is one member's core state machine. It is not safe for concurrent use:
// one goroutine (the driver's loop) owns it.
type Node struct {
	cfg Config
	// tracer is cfg.Tracer, or one that ignores every event.
	tracer  Tracer
	members []string
	// memberSlots are members' vector clock slots, in the same order.
	memberSlots []int
	live        liveSet
	// liveList is the live members, sorted; lagHint indexes the member that
	// last held a check back, where the next check starts, which makes the
	// gate and commit checks O(1) per message in the common case instead of
	// a scan of every member.
	liveList []string
	// liveSlots are liveList's vector clock slots, in the same order.
	// liveShared says both are still the shared start lists (New), which
	// setLive must not write.
	liveSlots  []int
	liveShared bool
	lagHint    int
	router     Router

	clock     uint64
	vc        *VectorClock
	committed []float64
	// rows, with Config.SharedRows, is the shared view committed is;
	// fold holds the updates added to the committed view since it was
	// last read, not yet in committed, and foldKey names the view with
	// them (see rows.go).
	rows    *sharedRows
	fold    []codec.Sparse
	foldKey rowKey
	// folded counts the updates added to the committed view since its
	// start (zero or a snapshot).
	folded uint64
	// committedClock is the last row applied to committed.
	committedClock uint64
	// rowHolds are clocks the rows stop at for joiners (HoldRows).
	rowHolds []uint64
	// pending holds the rows of applied-but-uncommitted updates by clock,
	// each by origin slot (see pendingRow).
	pending map[uint64][]*codec.Sparse
	// work is the view with the pending updates overlaid: equal to
	// committed except where workMarks says.
	work      []float64
	workMarks overlayMarks

	sampler sampler
	// scratch is Config.Scratch, or the node's own.
	scratch *model.Scratch
	// residual is what error feedback carries (nil when it is off),
	// paged: it is nonzero only at the keys the node's own updates
	// carried, a few pages of a large model, and dense it cost 512 KiB
	// per node at 2^16 weights.
	residual *model.PagedVec
	// factorAcc is reused by every factor frame this node rebuilds.
	factorAcc sfb.Accumulator
	// outbox holds what goes to each next hop with the next Ready: kept
	// entries, not copies of the updates, since a simulated core queues
	// about P relays at a time (72 bytes each as Updates, 16 as queued).
	outbox map[string][]queued
	// hops holds the next hops route found last (ForwardAppender).
	hops []string
	// spares holds emptied outbox queues, kept for their capacity
	// (Config.Queues, or the node's own).
	spares *QueuePool
	// refused holds the updates above the committed rows whose content
	// this node refused, or its donor did (see sign.go).
	refused map[UpdateID]bool
	// lastOwn is the update the last Train made, frame and signature, as
	// its next hops receive it, kept for retransmission.
	lastOwn *keptUpdate
	stats   Stats
	// joinedAt is the clock a node started from a snapshot began at; left
	// holds the last clock of members that left (see Leave), and leaving
	// those of them still waited for.
	joinedAt uint64
	left     map[string]uint64
	leaving  map[string]uint64
	// fromSnapshot counts the updates the starting rows held; entries sums
	// the vector clock entries set without updates (members' entry clocks).
	fromSnapshot, entries uint64
	// entryOf is each member's entry clock when it joined after clock 0:
	// it has no updates at or below it.
	entryOf map[string]uint64
	// rejections counts every refusal (Rejections).
	rejections uint64
	// digests are the digests of the last digestKeep rows hashed, oldest
	// first; rows are hashed every digestEvery clocks (see digest.go).
	digests     []ViewDigest
	digestEvery uint64
	digestKeep  int

	// Retransmission and membership (see sync.go, liveness.go, catchup.go).
	sc SyncConfig
	// logs[i] holds the frames kept of the member of slot i, sorted by
	// clock, a run of the slot table's timeline or, when it is not one,
	// ownLogs[i] (see framelog.go); logBuf is logOf's. memberAt[i] is
	// whether slot i is a member's (memberSlot), set by New: a map from
	// each member to its slot cost each simulated core about 50 bytes per
	// member, beside the vector clock's.
	logs     []frameLog
	ownLogs  map[int][]retained
	logBuf   []retained
	memberAt []bool
	bytes    int
	count    int
	// warmed keeps what warm read, so that its loads are not elided.
	warmed uint64
	// Cursors rotate requests over laggards and anti-entropy peers, so
	// repeated calls cover everyone deterministically.
	lagCursor, peerCursor int
	// degraded is set while some member is down in this node's view.
	degraded  bool
	syncStats SyncStats
	// duplicates is whether an update of the envelope Receive is handling
	// was refused as one held (see receiveUpdates).
	duplicates bool
	// decoded is the decode cache's entry for decodedFrame, the frame
	// decode saw last (see keepDecoded).
	decoded      *decoded
	decodedFrame []byte
	proto        protocol
	// gone holds, per origin, the clock up to which it said its updates
	// are gone (see catchup.go).
	gone map[string]uint64
	// goneSince is one more than the tick of the first gone notice (0:
	// none); behind holds the members that lack updates of another
	// origin of this node's side that it cannot resend; toldGone those
	// that this node told its own updates they lack are gone, until one
	// shows it holds them after all (see lacksOurs).
	goneSince uint64
	behind    map[string]bool
	toldGone  map[string]bool
	cutOff    map[string]uint64
	// lateShown holds, per live origin whose updates for committed rows
	// this node is taking, the first of them the origin sent itself.
	lateShown map[string]uint64
	// replied holds, per requester, the bytes of the answers queued for it
	// since the last Tick; MaxReplyBytes means its budget is spent.
	replied map[string]int
	// digestOffered is the latest digest's clock and the anti-entropy
	// requests it went out with; digestChecked the newest row compared,
	// per requester, so that a digest repeated is compared once.
	digestOffered, digestOffers uint64
	digestChecked               map[string]uint64
	// local is the exchange in progress with local steps (localsteps.go).
	local localPhase
}

// New validates cfg and returns a node at clock 0 with a zero view.
func New(cfg Config) (*Node, error) {
	if cfg.ID == "" {
		return nil, errors.New("node: empty id")
	}
	if cfg.Model == nil || cfg.Optimizer == nil || cfg.Codec == nil {
		return nil, errors.New("node: model, optimizer and codec are required")
	}
	if cfg.Staleness < 0 {
		return nil, fmt.Errorf("node: staleness must be >= 0, got %d", cfg.Staleness)
	}
	sc := cfg.Sync
	if err := sc.fill(cfg.Staleness); err != nil {
		return nil, err
	}
	if cfg.BatchSize < 1 {
		return nil, fmt.Errorf("node: batch size must be >= 1, got %d", cfg.BatchSize)
	}
	if len(cfg.Shard) == 0 && cfg.Batches == nil {
		return nil, fmt.Errorf("node %s: empty training shard", cfg.ID)
	}
	if cfg.Factors == "" {
		cfg.Factors = FactorsOff
	}
	mc := cfg.Model.Config()
	if err := checkFactors(cfg.Factors, mc.Kind, cfg.Optimizer.Kind(), mc.L2, cfg.ErrorFeedback, max(cfg.LocalSteps, 1)); err != nil {
		return nil, fmt.Errorf("node %s: %w", cfg.ID, err)
	}
	if err := checkLocalSteps(&cfg); err != nil {
		return nil, fmt.Errorf("node %s: %w", cfg.ID, err)
	}
	if err := checkBudget(&cfg); err != nil {
		return nil, fmt.Errorf("node %s: %w", cfg.ID, err)
	}
	// A sorted list is read as it is: P simulated cores start with one
	// list of P members, and a sorted copy in each cost it O(P) time and
	// garbage.
	members := cfg.Members
	if !sortedUnique(members) {
		members = slices.Compact(slices.Sorted(slices.Values(members)))
	}
	if _, ok := slices.BinarySearch(members, cfg.ID); !ok && cfg.Start == nil {
		return nil, fmt.Errorf("node: id %s is not among the members", cfg.ID)
	}
	n := &Node{
		cfg:           cfg,
		sc:            sc,
		replied:       map[string]int{},
		digestChecked: map[string]uint64{},
		vc:            newVectorClockOn(cfg.Slots, len(members)),
		pending:       map[uint64][]*codec.Sparse{},
		outbox:        map[string][]queued{},
		sampler:       newSampler(len(cfg.Shard), cfg.BatchSize, cfg.Seed, cfg.ID),
		stats:         Stats{Rejected: map[RejectReason]uint64{}},
		digestEvery:   DigestEvery(cfg.Model.NumParams()),
		tracer:        cfg.Tracer,
	}
	if n.tracer == nil {
		n.tracer = NoTracer{}
	}
	// Every member starts live: the live list is the member list until it
	// changes, and both are shared with the nodes on the same slot table
	// that start with the same members.
	n.members, n.memberSlots = n.vc.table.startLists(members)
	if n.router = cfg.Router; n.router == nil {
		n.router = FullMesh{members: n.members} // shared: a FullMesh writes nothing
	}
	n.liveList, n.liveSlots, n.liveShared = n.members, n.memberSlots, true
	// By slot, in slices sized once: the table has interned the members.
	top := -1
	for _, i := range n.memberSlots {
		top = max(top, i)
	}
	n.live = liveSet{vc: n.vc, state: reach(make([]uint8, 0, len(members)), top)}
	for _, i := range n.memberSlots {
		n.live.setAt(i, true)
		n.vc.internSlot(i)
	}
	if n.scratch = cfg.Scratch; n.scratch == nil {
		n.scratch = new(model.Scratch)
	}
	if n.spares = cfg.Queues; n.spares == nil {
		n.spares = new(QueuePool)
	}
	if cfg.SharedRows == nil || cfg.Start != nil {
		// With shared rows and no snapshot, the store's zero view is the
		// committed one (shareRows, below).
		n.committed = make([]float64, cfg.Model.NumParams())
	}
	if cfg.ErrorFeedback {
		n.residual = model.NewPagedVec(cfg.Model.NumParams())
	}
	if cfg.Start != nil {
		if err := n.start(cfg.Start); err != nil {
			return nil, fmt.Errorf("node %s: %w", cfg.ID, err)
		}
		for _, id := range cfg.Start.Refused {
			n.markRefused(id)
		}
	}
	if cfg.SharedRows != nil {
		n.shareRows(cfg.SharedRows)
	}
	n.memberAt = make([]bool, 0, len(n.members))
	for _, i := range n.memberSlots {
		n.memberAt = reach(n.memberAt, i)
		n.memberAt[i] = true
	}
	n.logs = make([]frameLog, len(n.vc.high))
	n.initLocal()
	// Members' clocks differ by up to about a window, so a requester's
	// latest digest is one the answerer still keeps.
	n.digestKeep = 2 * n.sc.Window
	n.initProtocol()
	// A driver that builds the overlay (Config.Overlay) has it from the
	// start, not only after the first change of membership.
	n.proto.membershipChanged = true
	n.rebuildIfChanged()
	return n, nil
}

// sortedUnique reports whether ids are in increasing order, each once.
func sortedUnique(ids []string) bool {
	for i := 1; i < len(ids); i++ {
		if ids[i-1] >= ids[i] {
			return false
		}
	}
	return true
}

// ID returns the node's member id.
func (n *Node) ID() string { return n.cfg.ID }

// Clock returns the number of completed exchanges (with one local step,
// of optimizer steps).
func (n *Node) Clock() uint64 { return n.clock }

// VectorClock returns the node's vector clock (read only).
func (n *Node) VectorClock() *VectorClock { return n.vc }

// Live returns the live members, sorted.
func (n *Node) Live() []string { return slices.Clone(n.liveList) }

// setLive marks a member up or down and rebuilds the live list.
func (n *Node) setLive(id string, up bool) {
	n.live.set(id, up)
	n.overlayChanged(id)
	if n.liveShared {
		n.liveList, n.liveSlots = make([]string, 0, len(n.members)), make([]int, 0, len(n.members))
		n.liveShared = false
	}
	n.liveList, n.liveSlots = n.liveList[:0], n.liveSlots[:0]
	for _, m := range n.members {
		if n.live.up(m) {
			n.liveList = append(n.liveList, m)
			n.liveSlots = append(n.liveSlots, n.vc.intern(m))
		}
	}
	n.lagHint = 0
}

// allAtLeast reports whether every live member's vector clock entry is at
// least c. It starts from the member that failed the last check, since that
// one is the likeliest to fail again.
func (n *Node) allAtLeast(c uint64) bool {
	k := len(n.liveSlots)
	for i := 0; i < k; i++ {
		j := (n.lagHint + i) % k
		if n.vc.getAt(n.liveSlots[j]) < c {
			n.lagHint = j
			return false
		}
	}
	return true
}

// canTrain reports whether steps are left and the staleness gate is open;
// within an exchange it stays open (it was passed at the exchange's first
// step).
func (n *Node) canTrain() bool {
	if n.local.steps >= n.cfg.Iterations {
		return false
	}
	if n.midExchange() {
		return true
	}
	// The gate of GateOpen: every live entry at least clock − s.
	need := int64(n.clock) - int64(n.cfg.Staleness)
	return need <= 0 || n.allAtLeast(uint64(need))
}

// Done reports whether the node has run all its iterations and holds every
// live member's updates up to the last iteration.
func (n *Node) Done() bool {
	last := n.lastClock()
	return n.clock >= last && n.allAtLeast(last)
}

// peerDown is the view part of PeerDown: the live set, the gate and the
// commit.
func (n *Node) peerDown(id string) {
	if id == n.cfg.ID || !n.live.up(id) {
		return
	}
	n.setLive(id, false)
	delete(n.leaving, id)
	// What was queued for it would go nowhere; should it come back, it
	// pulls what it missed.
	delete(n.outbox, id)
	n.commit()
}

// View returns the node's current view: the committed rows plus the pending
// updates with clock at most the node's own, in canonical order. Updates from
// peers that are ahead wait until the node reaches their clock, which is what
// makes staleness 0 read exactly the committed rows. The slice must not be
// modified and is valid until the next event.
func (n *Node) View() []float64 {
	clocks := n.pendingClocks()
	if len(clocks) == 0 || clocks[0] > n.clock {
		return n.committedRows()
	}
	n.resetWork()
	for _, c := range clocks {
		if c > n.clock {
			break
		}
		for _, u := range n.pendingRow(c) {
			applySparse(n.work, *u)
			n.workMarks.mark(*u)
		}
	}
	return n.work
}

// view is View for the node's own reads (a training step, an evaluation),
// done with before any other node runs. With shared rows, the pending
// updates are overlaid on a scratch the nodes share (RowStore.workOn):
// a dense working view per node cost as much as its committed one.
func (n *Node) view() []float64 {
	if n.rows == nil {
		return n.View()
	}
	clocks := n.pendingClocks()
	if len(clocks) == 0 || clocks[0] > n.clock {
		return n.committedRows()
	}
	s := n.cfg.SharedRows
	w := s.workOn(n.committedRows(), n.rows)
	for _, c := range clocks {
		if c > n.clock {
			break
		}
		if r := s.findSum(n.vc.table, c); r != nil && s.overlaySum(w, n.pending[c], r) {
			continue
		}
		for _, u := range n.pendingRow(c) {
			applySparse(w.vals, *u)
			w.marks.mark(*u)
		}
	}
	return w.vals
}

// resetWork makes work equal to the committed rows again. Only the pages
// the last overlay touched are restored: copying the whole committed view at
// every read touched every page of a large model, so each node of a testnet
// held two dense copies of it resident (1.4 GB for four nodes and one
// feature id of 20 million) and spent its iterations copying them.
func (n *Node) resetWork() {
	n.committedRows()
	switch {
	case n.work == nil:
		// Fresh memory is zero and stays off the resident set until
		// written: copy only what is not.
		n.work = make([]float64, len(n.committed))
		for k, v := range n.committed {
			if math.Float64bits(v) != 0 {
				n.work[k] = v
			}
		}
		n.workMarks = newOverlayMarks(len(n.committed))
	default:
		n.workMarks.restore(n.work, n.committed)
	}
}

// applyCommitted adds u to the committed rows, and keeps work equal to them
// outside the keys an overlay marked.
func (n *Node) applyCommitted(u codec.Sparse) {
	if n.rows != nil {
		// Added when the view is next read (foldRows); work is restored
		// from it then, at the pages marked.
		n.fold = append(n.fold, u)
		n.foldKey = n.foldKey.with(n.cfg.SharedRows.digest(u))
		n.folded++
		if n.work != nil {
			n.workMarks.mark(u)
		}
		if n.folded%foldEvery == 0 {
			n.foldRows()
		}
		return
	}
	applySparse(n.committed, u)
	if n.work == nil {
		return
	}
	if u.Dense() {
		n.workMarks.dense = true
		return
	}
	for _, k := range u.Keys {
		n.work[k] = n.committed[k]
	}
}

// Evaluate returns the model's metrics on rows at the current view.
func (n *Node) Evaluate(rows []dataset.Row) model.Metrics {
	return n.cfg.Model.Evaluate(n.view(), rows)
}

// train is the step part of Train (see there).
func (n *Node) train() error {
	if !n.canTrain() {
		return ErrGateClosed
	}
	if n.local.h > 1 {
		return n.localStep()
	}
	n.observeStaleness()
	view := n.view()
	batch, err := n.nextBatch()
	if err != nil {
		return fmt.Errorf("node %s: mini-batch %d: %w", n.cfg.ID, n.local.steps+1, err)
	}
	g, loss := n.cfg.Model.Gradient(view, batch, n.scratch)
	delta := n.cfg.Optimizer.Update(g, n.stepScale())
	if n.local.momentum != nil || n.local.rate != 1 {
		delta = n.outerStep(g.Keys, slices.Clone(delta))
	}
	n.local.steps++
	n.stats.LastLoss = loss
	return n.exchange(view, batch, n.withResidual(g.Keys, delta))
}

// withResidual turns the optimizer's update into float32 pairs, adding the
// residual the codec left at the same keys when error feedback is on. The
// residual rides only on keys the update already carries: carrying all of it
// would grow every update to the union of all keys ever touched and undo the
// compression; a key's residual waits until the key is updated again.
func (n *Node) withResidual(keys []uint64, delta []float64) codec.Sparse {
	u := codec.Sparse{Keys: slices.Clone(keys), Values: make([]float32, len(delta))}
	if u.Keys == nil {
		u.Keys = []uint64{}
	}
	for i, d := range delta {
		if n.residual != nil {
			d += n.residual.Get(keys[i])
		}
		u.Values[i] = float32(d)
	}
	return u
}

// encode produces the frame of this iteration's update: the codec frame of
// the delta, or the factor frame, whichever the factor mode asks for.
func (n *Node) encode(view []float64, batch []dataset.Row, delta codec.Sparse) ([]byte, error) {
	var deltaFrame []byte
	if n.cfg.Factors != FactorsAlways {
		var err error
		if deltaFrame, err = n.cfg.Codec.Encode(nil, delta); err != nil {
			return nil, err
		}
		if n.cfg.Factors == FactorsOff {
			n.stats.DeltaFramesSent++
			return deltaFrame, nil
		}
	}
	factorFrame, err := sfb.Encode(n.cfg.Codec, n.factors(view, batch))
	if err != nil {
		return nil, err
	}
	if deltaFrame != nil && len(deltaFrame) <= len(factorFrame) {
		n.stats.DeltaFramesSent++
		return deltaFrame, nil
	}
	n.stats.FactorFramesSent++
	return factorFrame, nil
}

// factors returns the sufficient factors of this node's plain-SGD update on
// batch.
func (n *Node) factors(view []float64, batch []dataset.Row) sfb.Factors {
	return SGDFactors(n.cfg.Model, view, batch, n.cfg.Optimizer.Rate()*n.stepScale())
}

// SGDFactors returns the sufficient factors of the plain-SGD update with
// step rate on batch at view: b_i = −(rate/S)·dz_i and c_i = (1, x_i).
func SGDFactors(m *model.Model, view []float64, batch []dataset.Row, rate float64) sfb.Factors {
	dz, _ := m.ScoreGradients(view, batch)
	coef := -rate / float64(len(batch))
	f := sfb.Factors{K: m.Blocks(), Stride: m.Stride(), B: make([][]float32, len(batch)), C: make([]codec.Sparse, len(batch))}
	maxFeature := m.Config().MaxFeature
	for i, r := range batch {
		f.B[i] = make([]float32, len(dz[i]))
		for c, d := range dz[i] {
			f.B[i][c] = float32(coef * d)
		}
		c := codec.Sparse{Keys: []uint64{0}, Values: []float32{1}}
		for j, k := range r.Keys {
			if k > maxFeature {
				break
			}
			c.Keys = append(c.Keys, k)
			c.Values = append(c.Values, r.Values[j])
		}
		f.C[i] = c
	}
	return f
}

// maxSpareQueues bounds a QueuePool, well above the next hops a relay has
// in an overlay (about log2 P): answers to sync requests queue for hops
// that route never takes a spare for.
const maxSpareQueues = 64

// QueuePool holds emptied outbox queues, kept for their capacity: relays go
// to the same few next hops every time, and growing fresh queues for each
// was a large part of routing. Nodes driven by one goroutine, such as a
// simulator's, may share one (Config.Queues): each kept up to
// maxSpareQueues of its own, grown to the largest batch it had sent, and at
// P = 1024 those were 193 MB of a 1.3 GB heap. It also holds the updates an
// envelope is written from (see ready) and those one is read into (see
// Receive), and Receive's lists for that envelope: fresh (the updates the
// core did not hold), origins (their origins' member slots) and kept (the
// entries kept for those it applied, nil for the others). Each core kept
// its own of those, grown to the largest envelope it had read, which in
// a simulator of thousands, where a batch of relays holds thousands of
// updates, made them P² in all. Not safe for concurrent use.
type QueuePool struct {
	queues  [][]queued
	batch   []Update
	read    []Update
	fresh   []int
	origins originReader // its slots: the updates' member slots
	kept    []*keptUpdate
	// free[k] holds idle envelope buffers of capacity in [2^k, 2^(k+1)),
	// idle their bytes (see Recycle).
	free   [envelopeClasses][][]byte
	idle   int
	reused uint64
}

// Envelope buffers.
//
// A relay writes every update it forwards into an envelope of its own, so
// in a simulator the envelopes are most of what is allocated: two thirds
// at P = 2048, hundreds of gigabytes at P = 10,000, where the heap is held
// near its limit and the collector ran for a third of the time. A driver
// that is done with an envelope it delivered (Node.Receive returned, and it
// holds the bytes nowhere else) hands the buffer back with Recycle, and
// the cores sharing the pool write their next envelopes into it. A core
// keeps nothing of an envelope it read: what it keeps of a frame or a
// signature it copies (Node.keep, DecodeCache.put).
const (
	envelopeClasses = 28 // up to 2^27 bytes, above MaxEnvelopeBytes
	// minPooledEnvelope is the smallest buffer kept: below it an
	// allocation costs about what a list entry does.
	minPooledEnvelope = 1 << 10
	// maxIdleEnvelopeBytes bounds the bytes a pool holds idle.
	maxIdleEnvelopeBytes = 64 << 20
)

// Recycle takes back the buffer of data, an update envelope whose delivery
// is over, for the envelopes the pool's cores write next. Membership and
// sync messages, which a driver may deliver to several members, are left
// alone. The caller must hold no other reference to data.
func (p *QueuePool) Recycle(data []byte) {
	c := cap(data)
	if p == nil || c < minPooledEnvelope || p.idle+c > maxIdleEnvelopeBytes || IsAnnouncement(data) || IsSyncMessage(data) {
		return
	}
	k := bits.Len(uint(c)) - 1
	if k >= envelopeClasses {
		return
	}
	p.free[k] = append(p.free[k], data[:0])
	p.idle += c
}

// Reused counts the envelopes written into a recycled buffer.
func (p *QueuePool) Reused() uint64 { return p.reused }

// envelope writes the envelope of updates into a recycled buffer that
// holds it, or a new one.
func (p *QueuePool) envelope(updates []Update) []byte {
	size := envelopeBytes(updates)
	if p == nil || size < minPooledEnvelope {
		return writeEnvelope(nil, size, updates)
	}
	// The buffers of size's own class may be too small; any of the next
	// class holds it.
	k := bits.Len(uint(size)) - 1
	for _, c := range []int{k, k + 1} {
		if c >= envelopeClasses {
			break
		}
		if list := p.free[c]; len(list) > 0 && cap(list[len(list)-1]) >= size {
			buf := list[len(list)-1]
			list[len(list)-1] = nil
			p.free[c] = list[:len(list)-1]
			p.idle -= cap(buf)
			p.reused++
			return writeEnvelope(buf, size, updates)
		}
	}
	return writeEnvelope(nil, size, updates)
}

// queued is an update waiting in an outbox: the entry kept for it (origin,
// clock, frame and signature), which the node's log of kept frames and, in
// a simulator, the other cores share. It is a pointer alone: an outbox
// holds about P of them at the end of an iteration, P² in a simulator, and
// the origin's slot beside it made each twice the size.
type queued struct {
	*keptUpdate
}

// get returns a spare queue, empty, or nil.
func (p *QueuePool) get() []queued {
	if len(p.queues) == 0 {
		return nil
	}
	q := p.queues[len(p.queues)-1]
	p.queues[len(p.queues)-1] = nil
	p.queues = p.queues[:len(p.queues)-1]
	return q
}

// put keeps q, emptied, unless the pool is full.
func (p *QueuePool) put(q []queued) {
	if len(p.queues) == maxSpareQueues {
		return
	}
	clear(q)
	p.queues = append(p.queues, q[:0])
}

// updates returns q as Updates, in a slice that is valid until the next
// call.
func (p *QueuePool) updates(q []queued) []Update {
	p.batch = p.batch[:0]
	for _, e := range q {
		p.batch = append(p.batch, e.update())
	}
	return p.batch
}

// hasReady reports whether updates are queued for ready.
func (n *Node) hasReady() bool { return len(n.outbox) > 0 }

// ready hands out the queued updates per next hop, batched in as few
// envelopes as hold them within MaxEnvelopeBytes.
func (n *Node) ready() Ready {
	if len(n.outbox) == 0 {
		return Ready{}
	}
	hops := make([]string, 0, len(n.outbox))
	for h := range n.outbox {
		hops = append(hops, h)
	}
	slices.Sort(hops)
	rd := Ready{Messages: make([]Message, 0, len(hops))}
	for _, h := range hops {
		for _, data := range encodeEnvelopes(n.spares.updates(n.outbox[h]), MaxEnvelopeBytes, n.spares) {
			rd.Messages = append(rd.Messages, Message{To: h, Data: data})
			n.stats.MessagesSent++
			n.stats.BytesSent += uint64(len(data))
		}
	}
	for _, q := range n.outbox {
		n.spares.put(q)
	}
	clear(n.outbox)
	clear(n.spares.batch)
	return rd
}

func applySparse(view []float64, u codec.Sparse) {
	if u.Dense() {
		for i, v := range u.Values {
			view[i] += float64(v)
		}
		return
	}
	for i, k := range u.Keys {
		view[k] += float64(u.Values[i])
	}
}
