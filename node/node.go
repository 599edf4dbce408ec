package node

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/sketchmesh/sketchmesh/codec"
	"github.com/sketchmesh/sketchmesh/dataset"
	"github.com/sketchmesh/sketchmesh/model"
	"github.com/sketchmesh/sketchmesh/sfb"
)

// Router decides the overlay: to which next hops a node forwards an update.
// Forward(origin, origin) lists where the origin sends its own update.
type Router interface {
	Forward(origin, at string) []string
}

// FullMesh is the Router in which every origin sends its update to every
// other member directly and nobody relays.
type FullMesh struct{ members []string }

// NewFullMesh returns the full-mesh router over members.
func NewFullMesh(members []string) FullMesh {
	m := slices.Clone(members)
	slices.Sort(m)
	return FullMesh{members: slices.Compact(m)}
}

// Forward implements Router.
func (f FullMesh) Forward(origin, at string) []string {
	if origin != at {
		return nil
	}
	out := make([]string, 0, len(f.members))
	for _, m := range f.members {
		if m != at {
			out = append(out, m)
		}
	}
	return out
}

// Config configures one node core.
type Config struct {
	// ID is this node's member id (a libp2p peer id in a real mesh).
	ID string
	// Members is every member of the mesh, this node included.
	Members []string
	// Model, Optimizer and Codec define what is trained and how updates
	// are encoded. Every member must use the same Model configuration.
	Model     *model.Model
	Optimizer model.Optimizer
	Codec     codec.Codec
	// Tracer, when set, is told of every update the view takes and every
	// input the node refuses, as it happens (see Tracer).
	Tracer Tracer
	// ErrorFeedback carries what the codec lost into the next update.
	ErrorFeedback bool
	// Staleness is the SSP bound s; 0 is bulk-synchronous.
	Staleness int
	// Iterations is how many optimizer steps this node takes.
	Iterations uint64
	// LocalSteps is H, the optimizer steps the node takes on its own data
	// between two exchanges (see localsteps.go); 0 means 1. The clock counts
	// exchanges.
	LocalSteps int
	// Outer is the outer step applied to an exchange's accumulated change
	// (OuterSGD when empty) and OuterRate its rate (0 means 1).
	Outer     OuterKind
	OuterRate float64
	// BudgetBytes bounds the frame of one update; a larger one is cut to
	// its keys of highest Priority (see priority.go). 0 is no bound.
	BudgetBytes int
	Priority    PriorityMode
	// BatchSize is the number of rows in one mini-batch.
	BatchSize int
	// Seed makes mini-batch sampling reproducible.
	Seed uint64
	// Shard is this node's training data.
	Shard []dataset.Row
	// Batches, when set, gives the mini-batches instead of sampling Shard
	// (data larger than memory, such as a dataset.Stream); Shard may then
	// be empty. It must be deterministic for runs to replay.
	Batches BatchSource
	// Router decides relaying; nil means a full mesh over Members.
	Router Router
	// Factors selects sufficient factor broadcasting (package sfb) for
	// softmax models: FactorsOff sends the matrix delta, FactorsAlways the
	// factors, FactorsAuto whichever encodes smaller, frame by frame.
	Factors FactorMode
	// MaxUpdateNorm bounds the norm of an incoming factor update (Σ‖b‖·‖c‖);
	// 0 means no bound. Updates above it are rejected.
	MaxUpdateNorm float64
	// DecodeCache, when set, shares decoded frames between nodes driven by
	// one goroutine, such as a simulator's: every receiver decodes the same
	// bytes to the same update, so P receivers need one decode, not P.
	DecodeCache *DecodeCache
	// Start, when set, starts the node from a member's snapshot instead of
	// a zero view at clock 0 (see Snapshot); Members may then be empty.
	Start *Snapshot
	// Auth, when set, signs this node's updates and verifies every other
	// update before its frame is decoded (see Authenticator); nil is an
	// unsigned mesh.
	Auth Authenticator
	// Robust screens incoming updates for poisoned values (see Robust);
	// nil gets the defaults on first use. It holds state: one per node.
	Robust *Robust
	// Admission is a joiner's signed admission, which its hellos carry
	// (see Node.Admit); nil for a founding member.
	Admission *Admission
	// Sync tunes retransmission and the membership protocol's timing
	// (see SyncConfig); zero values take the defaults.
	Sync SyncConfig
	// Overlay, when set, builds the router over the live members after
	// the membership protocol changed them or a member announced another
	// site label (see Node.SetSite), from the labels the members announced
	// in their hellos (Node.Sites): once per change that the node routes
	// after, when it next routes. It must be a pure function of its
	// inputs, such as halton.BuildSites, so that members with the same view
	// of the membership relay along the same trees, and a late build
	// builds the same router.
	Overlay func(live []string, site map[string]string) Router
	// OverlayByKey, when set, is asked for the router before Overlay is,
	// with digests of the overlay's input (see OverlayKey) kept up to date
	// as the membership changes, in O(1) for a label. A driver whose cores
	// share overlays (the simulator) returns the router it built for an
	// equal input, or nil to have Overlay build it. Nil in production.
	OverlayByKey func(key OverlayKey) Router
	// OverlayBuilt, when set, is told each router Overlay built, with its
	// key.
	OverlayBuilt func(key OverlayKey, r Router)
}

// OverlayKey digests what Config.Overlay builds from: the live members
// that are not leaving (Members), the same with each one's label
// (Labelled), and how many of them have none (Unlabelled). A builder that
// reads no labels unless every member has one (halton.BuildSites) builds
// the same router for the same Members while Unlabelled > 0, as a mesh
// starting does until each member's first hello is in.
type OverlayKey struct {
	Members, Labelled uint64
	Unlabelled        int
}

// DecodeCache remembers what recent frames decode to. Decoding is a pure
// function of the frame and of the model's shape, so a cache may be shared
// by nodes with the same Model and MaxUpdateNorm. It is not safe for
// concurrent use, and the updates it returns are shared: nodes only read
// them.
type DecodeCache struct {
	entries map[string]decoded
	fifo    []string
	limit   int
}

type decoded struct {
	u      codec.Sparse
	reason RejectReason
	// frame is a copy of the frame that the nodes keeping it for
	// retransmission share, instead of a copy each (keepFrame).
	frame []byte
}

// NewDecodeCache returns a cache of the last limit distinct frames.
func NewDecodeCache(limit int) *DecodeCache {
	return &DecodeCache{entries: make(map[string]decoded, limit), limit: max(limit, 1)}
}

func (c *DecodeCache) get(frame []byte) (decoded, bool) {
	d, ok := c.entries[string(frame)]
	return d, ok
}

func (c *DecodeCache) put(frame []byte, d decoded) {
	if len(c.fifo) >= c.limit {
		delete(c.entries, c.fifo[0])
		c.fifo = c.fifo[1:]
	}
	key := string(frame)
	d.frame = slices.Clone(frame)
	c.entries[key] = d
	c.fifo = append(c.fifo, key)
}

// FactorMode selects how a softmax node sends its updates.
type FactorMode string

// The factor modes.
const (
	FactorsOff    FactorMode = "off"
	FactorsAuto   FactorMode = "auto"
	FactorsAlways FactorMode = "always"
)

// ErrFactorConfig is returned by New for a factor mode the model or the
// optimizer cannot honour.
var ErrFactorConfig = errors.New("sufficient factors need softmax, plain SGD, no L2 and no error feedback")

// Rejection reasons, as counted in Stats.Rejected and told to a Tracer.
const (
	RejectBadEnvelope RejectReason = "bad_envelope"
	RejectNotMember   RejectReason = "not_member"
	RejectDuplicate   RejectReason = "duplicate"
	RejectBadClock    RejectReason = "bad_clock"
	RejectClockAhead  RejectReason = "clock_ahead"
	RejectBadFrame    RejectReason = "bad_frame"
	RejectBadShape    RejectReason = "bad_shape"
	RejectBadFactors  RejectReason = "bad_factors"
	RejectNorm        RejectReason = "norm"
	// RejectAfterLeave counts updates of a member above the last clock it
	// announced when it left: nobody asks for those, so applying them
	// would make views differ.
	RejectAfterLeave RejectReason = "after_leave"
	// RejectLateGap counts updates for rows already committed that do not
	// continue their origin's contiguous updates: the rows take them only
	// in order (see commit), so they are asked for again once the gap
	// below them closes.
	RejectLateGap RejectReason = "late_gap"
	// RejectLateRelayed counts updates of a live member for rows already
	// committed that another member passed on before the origin itself
	// showed it still keeps them (see catchup.go): they may be updates its
	// origin already answers "gone" for.
	RejectLateRelayed RejectReason = "late_relayed"
	// RejectBadSignature and RejectNaN are defined with the checks that
	// count them (sign.go, robust.go).
)

// RejectReasons lists every reason Stats.Rejected counts, so that a
// monitor can show each at zero before the first rejection.
func RejectReasons() []RejectReason {
	return []RejectReason{RejectBadEnvelope, RejectNotMember, RejectDuplicate, RejectBadClock, RejectClockAhead,
		RejectBadFrame, RejectBadShape, RejectBadFactors, RejectNorm, RejectAfterLeave, RejectBadSignature,
		RejectNaN, RejectBadSync, RejectSyncBudget, RejectMarkedRefused,
		RejectBadAnnouncement, RejectForgedAnnouncement, RejectStaleIncarnation, RejectStaleHello,
		RejectNotAdmitted, RejectReadmit, RejectAdmitLimit, RejectSignFailed, RejectBadGone, RejectLateGap, RejectLateRelayed, RejectAcrossGap}
}

// Stats are a node's counters. All byte counts are envelope bytes as handed
// to the driver (without the driver's own framing).
type Stats struct {
	Clock          uint64
	UpdatesApplied uint64 // updates in the view, this node's own included
	UpdatesRelayed uint64 // updates forwarded on behalf of other origins
	MessagesSent   uint64
	BytesSent      uint64
	FrameBytes     uint64 // bytes of this node's own codec frames
	PairsEncoded   uint64 // key/value pairs in this node's own frames
	// Frames of this node's own updates, by form.
	FactorFramesSent uint64
	DeltaFramesSent  uint64
	Rejected         map[RejectReason]uint64
	LastLoss         float64 // mean training loss of the last mini-batch
	// Staleness observed at each read (the start of an iteration).
	StalenessMax uint64
	StalenessSum uint64
	Reads        uint64
	// BudgetCuts counts own updates cut to fit the budget.
	BudgetCuts uint64
}

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

type pendingUpdate struct {
	origin string
	u      codec.Sparse
}

// Node is one member's core state machine. It is not safe for concurrent use:
// one goroutine (the driver's loop) owns it.
type Node struct {
	cfg Config
	// tracer is cfg.Tracer, or one that ignores every event.
	tracer  Tracer
	members []string
	live    map[string]bool
	// liveList is the live members, sorted; lagHint indexes the member that
	// last held a check back, where the next check starts, which makes the
	// gate and commit checks O(1) per message in the common case instead of
	// a scan of every member.
	liveList []string
	lagHint  int
	router   Router

	clock     uint64
	vc        *VectorClock
	committed []float64
	// committedClock is the last row applied to committed.
	committedClock uint64
	// rowHolds are clocks the rows stop at for joiners (HoldRows).
	rowHolds []uint64
	// pending holds applied-but-uncommitted updates by clock, sorted by origin.
	pending map[uint64][]pendingUpdate
	// work is the view with the pending updates overlaid: equal to
	// committed except at workKeys, or anywhere when workDense.
	work      []float64
	workKeys  []uint64
	workDense bool

	sampler  sampler
	scratch  model.Scratch
	residual []float64
	// factorAcc is reused by every factor frame this node rebuilds.
	factorAcc sfb.Accumulator
	outbox    map[string][]Update
	// refused holds the updates above the committed rows whose content
	// this node refused, or its donor did (see sign.go).
	refused map[UpdateID]bool
	// lastOwn is the update the last Train made, frame and signature, as
	// its next hops receive it, kept for retransmission.
	lastOwn Update
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
	// logs[i] holds the frames kept of members[i], sorted by clock; index
	// maps a member to i.
	logs  [][]retained
	index map[string]int
	bytes int
	count int
	// Cursors rotate requests over laggards and anti-entropy peers, so
	// repeated calls cover everyone deterministically.
	lagCursor, peerCursor int
	// degraded is set while some member is down in this node's view.
	degraded  bool
	syncStats SyncStats
	fresh     []int
	proto     protocol
	// gone holds, per origin, the clock up to which it said its updates
	// are gone (see catchup.go).
	gone map[string]uint64
	// goneSince is one more than the tick of the first gone notice (0:
	// none); behind holds the members that lack updates of this node's
	// side that it cannot resend.
	goneSince uint64
	behind    map[string]bool
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
	members := slices.Clone(cfg.Members)
	slices.Sort(members)
	members = slices.Compact(members)
	if _, ok := slices.BinarySearch(members, cfg.ID); !ok && cfg.Start == nil {
		return nil, fmt.Errorf("node: id %s is not among the members", cfg.ID)
	}
	live := make(map[string]bool, len(members))
	for _, m := range members {
		live[m] = true
	}
	router := cfg.Router
	if router == nil {
		router = NewFullMesh(members)
	}
	n := &Node{
		cfg:           cfg,
		sc:            sc,
		replied:       map[string]int{},
		digestChecked: map[string]uint64{},
		members:       members,
		live:          live,
		liveList:      slices.Clone(members),
		router:        router,
		vc:            NewVectorClock(),
		committed:     make([]float64, cfg.Model.NumParams()),
		pending:       map[uint64][]pendingUpdate{},
		outbox:        map[string][]Update{},
		sampler:       newSampler(len(cfg.Shard), cfg.BatchSize, cfg.Seed, cfg.ID),
		stats:         Stats{Rejected: map[RejectReason]uint64{}},
		digestEvery:   DigestEvery(cfg.Model.NumParams()),
		tracer:        cfg.Tracer,
	}
	if n.tracer == nil {
		n.tracer = NoTracer{}
	}
	if cfg.ErrorFeedback {
		n.residual = make([]float64, cfg.Model.NumParams())
	}
	if cfg.Start != nil {
		if err := n.start(cfg.Start); err != nil {
			return nil, fmt.Errorf("node %s: %w", cfg.ID, err)
		}
		for _, id := range cfg.Start.Refused {
			n.markRefused(id)
		}
	}
	n.index = make(map[string]int, len(n.members))
	for i, m := range n.members {
		n.index[m] = i
	}
	n.logs = make([][]retained, len(n.members))
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
	n.live[id] = up
	n.proto.overlayKeyStale = true
	n.liveList = n.liveList[:0]
	for _, m := range n.members {
		if n.live[m] {
			n.liveList = append(n.liveList, m)
		}
	}
	n.lagHint = 0
}

// allAtLeast reports whether every live member's vector clock entry is at
// least c. It starts from the member that failed the last check, since that
// one is the likeliest to fail again.
func (n *Node) allAtLeast(c uint64) bool {
	k := len(n.liveList)
	for i := 0; i < k; i++ {
		j := (n.lagHint + i) % k
		if n.vc.Get(n.liveList[j]) < c {
			n.lagHint = j
			return false
		}
	}
	return true
}

// Stats returns a copy of the node's counters.
func (n *Node) Stats() Stats {
	s := n.stats
	s.Clock = n.clock
	s.Rejected = make(map[RejectReason]uint64, len(n.stats.Rejected))
	for k, v := range n.stats.Rejected {
		s.Rejected[k] = v
	}
	return s
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
	if id == n.cfg.ID || !n.live[id] {
		return
	}
	n.setLive(id, false)
	delete(n.leaving, id)
	n.proto.overlayKeyStale = true
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
		return n.committed
	}
	n.resetWork()
	for _, c := range clocks {
		if c > n.clock {
			break
		}
		for _, p := range n.pending[c] {
			applySparse(n.work, p.u)
			n.markWork(p.u)
		}
	}
	return n.work
}

// resetWork makes work equal to the committed rows again. Only the keys the
// last overlay touched are restored: copying the whole committed view at
// every read touched every page of a large model, so each node of a testnet
// held two dense copies of it resident (1.4 GB for four nodes and one
// feature id of 20 million) and spent its iterations copying them.
func (n *Node) resetWork() {
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
	case n.workDense:
		copy(n.work, n.committed)
	default:
		for _, k := range n.workKeys {
			n.work[k] = n.committed[k]
		}
	}
	n.workKeys, n.workDense = n.workKeys[:0], false
}

// markWork records where u made work differ from the committed rows.
func (n *Node) markWork(u codec.Sparse) {
	if u.Dense() {
		n.workDense = true
		return
	}
	if !n.workDense {
		n.workKeys = append(n.workKeys, u.Keys...)
	}
}

// applyCommitted adds u to the committed rows, and keeps work equal to them
// outside the keys an overlay marked.
func (n *Node) applyCommitted(u codec.Sparse) {
	applySparse(n.committed, u)
	if n.work == nil {
		return
	}
	if u.Dense() {
		n.workDense = true
		return
	}
	for _, k := range u.Keys {
		n.work[k] = n.committed[k]
	}
}

// Evaluate returns the model's metrics on rows at the current view.
func (n *Node) Evaluate(rows []dataset.Row) model.Metrics {
	return n.cfg.Model.Evaluate(n.View(), rows)
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
	view := n.View()
	batch, err := n.nextBatch()
	if err != nil {
		return fmt.Errorf("node %s: mini-batch %d: %w", n.cfg.ID, n.local.steps+1, err)
	}
	g, loss := n.cfg.Model.Gradient(view, batch, &n.scratch)
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
			d += n.residual[keys[i]]
		}
		u.Values[i] = float32(d)
	}
	return u
}

// receive handles one message for the view: updates are checked, applied
// and relayed; bad content is counted and dropped.
func (n *Node) receive(from string, data []byte) {
	updates, err := DecodeEnvelope(data)
	if err != nil {
		n.reject(RejectBadEnvelope)
		return
	}
	for _, u := range updates {
		if reason := n.acceptFrom(from, u); reason != "" {
			n.reject(reason)
			continue
		}
		n.route(u)
	}
	n.retireLeavers()
	n.commit()
}

// accept validates u and adds it to the view; it returns the rejection
// reason, or "" when u was applied.
func (n *Node) accept(u Update) RejectReason {
	if _, ok := slices.BinarySearch(n.members, u.Origin); !ok {
		return RejectNotMember
	}
	if u.Clock == 0 {
		return RejectBadClock
	}
	if n.vc.Has(u.Origin, u.Clock) {
		return RejectDuplicate
	}
	if last, gone := n.left[u.Origin]; gone && u.Clock > last {
		return RejectAfterLeave
	}
	// The rows hold only contiguous updates of each origin (see commit).
	if u.Clock <= n.committedClock && u.Clock != n.vc.Get(u.Origin)+1 {
		return RejectLateGap
	}
	// An honest origin at clock c passed a gate that needed our entry to be
	// at least c − s − 1, and our entry is at most our own clock.
	if u.Clock > n.acceptBound() {
		return RejectClockAhead
	}
	if reason := n.verify(u); reason != "" {
		return reason
	}
	if n.refused[UpdateID{Origin: u.Origin, Clock: u.Clock}] {
		n.skip(u)
		return RejectMarkedRefused
	}
	decoded, reason := n.decode(u.Frame)
	if reason == "" {
		decoded, reason = n.screen().check(decoded, len(n.committed), n.cfg.Auth != nil)
	}
	if reason != "" {
		n.skip(u)
		return reason
	}
	n.add(u.Origin, u.Clock, decoded)
	return ""
}

// decode turns a frame into the update it stands for, or names why it is
// refused: a codec frame is decoded as is, a factor frame is checked against
// the model's shape and the norm bound and then rebuilt into the delta.
func (n *Node) decode(frame []byte) (codec.Sparse, RejectReason) {
	c := n.cfg.DecodeCache
	if c == nil {
		return n.decodeFrame(frame)
	}
	if d, ok := c.get(frame); ok {
		return d.u, d.reason
	}
	u, reason := n.decodeFrame(frame)
	c.put(frame, decoded{u: u, reason: reason})
	return u, reason
}

func (n *Node) decodeFrame(frame []byte) (codec.Sparse, RejectReason) {
	if sfb.IsFrame(frame) {
		m := n.cfg.Model
		f, err := sfb.Decode(frame, m.Blocks(), m.Stride())
		if err != nil {
			return codec.Sparse{}, RejectBadFactors
		}
		norm := f.Norm()
		if math.IsNaN(norm) || math.IsInf(norm, 0) {
			return codec.Sparse{}, RejectNaN
		}
		if n.cfg.MaxUpdateNorm > 0 && norm > n.cfg.MaxUpdateNorm {
			return codec.Sparse{}, RejectNorm
		}
		u := f.Reconstruct(&n.factorAcc)
		if !n.fits(u) {
			return codec.Sparse{}, RejectBadShape
		}
		if !finite(u) {
			return codec.Sparse{}, RejectNaN
		}
		return u, ""
	}
	u, err := codec.Decode(frame)
	if err != nil {
		return codec.Sparse{}, frameReason(err)
	}
	if !n.fits(u) {
		return codec.Sparse{}, RejectBadShape
	}
	if !finite(u) {
		return codec.Sparse{}, RejectNaN
	}
	return u, ""
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

func (n *Node) fits(u codec.Sparse) bool {
	size := len(n.committed)
	if u.Dense() {
		return len(u.Values) == size || len(u.Values) == 0
	}
	return len(u.Keys) == 0 || u.Keys[len(u.Keys)-1] < uint64(size)
}

// acceptBound is the highest clock an honest member can send this node. A
// node that started from a snapshot at clock j may hear, while it catches
// up, from members that ran on before they knew of it: they are at most
// 2s+2 past j (the donor at most s+1 past its rows, the others at most s+1
// past the donor).
func (n *Node) acceptBound() uint64 {
	s := uint64(n.cfg.Staleness)
	if n.cfg.Start != nil {
		return max(n.clock, n.joinedAt+2*s+2) + s + 1
	}
	return n.clock + s + 1
}

func (n *Node) add(origin string, clock uint64, u codec.Sparse) {
	n.vc.Add(origin, clock)
	n.stats.UpdatesApplied++
	n.tracer.Apply(origin, clock)
	if clock <= n.committedClock {
		// A late update of a row already committed without its origin (a
		// member that was down, or that joined after the row): it joins
		// the rows directly.
		n.applyCommitted(u)
		return
	}
	list := n.pending[clock]
	i, _ := slices.BinarySearchFunc(list, origin, func(p pendingUpdate, o string) int { return strings.Compare(p.origin, o) })
	n.pending[clock] = slices.Insert(list, i, pendingUpdate{origin: origin, u: u})
}

// route queues u for the next hops the router gives for this node.
func (n *Node) route(u Update) {
	for _, hop := range n.currentRouter().Forward(u.Origin, n.cfg.ID) {
		if hop == n.cfg.ID || hop == u.Origin || !n.live[hop] || n.Leaving(hop) {
			continue
		}
		n.outbox[hop] = append(n.outbox[hop], u)
		if u.Origin != n.cfg.ID {
			n.stats.UpdatesRelayed++
		}
	}
}

// commit folds every complete row into the committed view, in canonical
// order. The rows hold of each origin only updates contiguous from its
// entry: one held ahead of a gap (possible only for a member out of the
// live set, since the row waits for every live one) is withdrawn, and comes
// again in order, through anti-entropy, if the gap closes. So what lies
// above a gap nobody can close (updates that are gone, see catchup.go)
// does not enter the rows of whichever member it happened to reach.
func (n *Node) commit() {
	for {
		next := n.committedClock + 1
		if n.heldAt() || !n.allAtLeast(next) {
			return
		}
		for _, p := range n.pending[next] {
			if n.vc.Get(p.origin) < next {
				n.vc.Withdraw(p.origin, next)
				n.stats.UpdatesApplied--
				continue
			}
			n.applyCommitted(p.u)
		}
		delete(n.pending, next)
		n.committedClock = next
		n.recordDigest(next)
	}
}

func (n *Node) pendingClocks() []uint64 {
	clocks := make([]uint64, 0, len(n.pending))
	for c := range n.pending {
		clocks = append(clocks, c)
	}
	slices.Sort(clocks)
	return clocks
}

func (n *Node) observeStaleness() {
	s := n.clock - min(n.clock, n.vc.Min(n.liveList))
	n.stats.StalenessMax = max(n.stats.StalenessMax, s)
	n.stats.StalenessSum += s
	n.stats.Reads++
}

func (n *Node) reject(reason RejectReason) {
	n.stats.Rejected[reason]++
	n.rejections++
	n.tracer.Reject(reason)
}

// Rejections returns how many messages and updates the node has refused
// so far, all reasons together (see Stats.Rejected).
func (n *Node) Rejections() uint64 { return n.rejections }

// Relays returns the members this node forwards origin's broadcasts to: the
// next hops of origin's tree in the overlay, as for its updates.
func (n *Node) Relays(origin string) []string {
	var out []string
	for _, hop := range n.currentRouter().Forward(origin, n.cfg.ID) {
		if hop != n.cfg.ID && hop != origin && n.live[hop] {
			out = append(out, hop)
		}
	}
	return out
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
		for _, data := range encodeEnvelopes(n.outbox[h], MaxEnvelopeBytes) {
			rd.Messages = append(rd.Messages, Message{To: h, Data: data})
			n.stats.MessagesSent++
			n.stats.BytesSent += uint64(len(data))
		}
	}
	clear(n.outbox)
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

// BatchSource gives a node its mini-batches; the rows are read during the
// node's Train and may be reused after it.
type BatchSource interface {
	Next() ([]dataset.Row, error)
}

func (n *Node) nextBatch() ([]dataset.Row, error) {
	if n.cfg.Batches != nil {
		return n.cfg.Batches.Next()
	}
	return n.sampler.next(n.cfg.Shard), nil
}

// sampler draws mini-batches without replacement, epoch by epoch, from a
// seeded permutation: the same seed and id give the same batches.
type sampler struct {
	rng   *rand.Rand
	perm  []int
	pos   int
	size  int
	batch []dataset.Row
}

func newSampler(rows, size int, seed uint64, id string) sampler {
	h := fnv.New64a()
	h.Write([]byte(id))
	s := sampler{rng: rand.New(rand.NewPCG(seed, h.Sum64())), perm: make([]int, rows), size: min(size, rows)}
	for i := range s.perm {
		s.perm[i] = i
	}
	s.pos = rows
	return s
}

func (s *sampler) next(shard []dataset.Row) []dataset.Row {
	s.batch = s.batch[:0]
	for len(s.batch) < s.size {
		if s.pos == len(s.perm) {
			s.rng.Shuffle(len(s.perm), func(i, j int) { s.perm[i], s.perm[j] = s.perm[j], s.perm[i] })
			s.pos = 0
		}
		s.batch = append(s.batch, shard[s.perm[s.pos]])
		s.pos++
	}
	return s.batch
}

// Config returns the node's configuration.
func (n *Node) Config() Config { return n.cfg }
