package testnet

// The simulator runs the node core (package node, the same code a real mesh
// runs) at hundreds or thousands of nodes in one goroutine, over modelled
// links instead of libp2p, on a virtual clock. See Simulate.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/sketchmesh/sketchmesh/codec"
	"github.com/sketchmesh/sketchmesh/dataset"
	"github.com/sketchmesh/sketchmesh/model"
	"github.com/sketchmesh/sketchmesh/node"
)

// SimConfig describes one simulated run. Zero durations pick the defaults
// given with each field.
type SimConfig struct {
	// Nodes is the number of node cores at the start, 1 to MaxSimNodes
	// (with the members the scenario adds by join).
	Nodes int
	// Train is shuffled by Seed and dealt round robin, one shard per node,
	// members that join later included: node i of n (the run's nodes plus
	// the scenario's joins) gets every n-th row from row i, so a new member
	// brings rows nobody has trained on. With more nodes than rows, node i
	// gets row i mod rows alone: some rows then sit on two nodes.
	Train, Test *dataset.Dataset
	Model       model.Kind
	Optimizer   model.OptimizerKind
	LR, L2      float64
	// Batch is the mini-batch per node: a fraction of the node's shard when
	// below 1, a row count otherwise.
	Batch         float64
	Iterations    int
	Seed          uint64
	Codec         string
	ErrorFeedback bool
	Staleness     int
	// Topology is "halton" (the default) or "full".
	Topology string
	// WAN is the network; the zero value is ParseLinkProfile("lan").
	WAN LinkProfile
	// ComputeTime is the virtual time one iteration takes (default 10 ms).
	// Each iteration draws its own time uniformly within ±10 % of it, so
	// nodes do not move in artificial lockstep; a "slow" step multiplies it.
	ComputeTime time.Duration
	// SyncTimeout is how long a node waits at its gate before it asks for
	// what it lacks, and then between asks. The default is one ComputeTime
	// (the spread of the nodes' finishing times is within it) plus one round
	// trip over the slowest link (two largest one-way latencies and two
	// jitters) plus FlushDelay. Over a multi-hop overlay an update can take
	// longer than that, so some requests are spurious and cost a duplicate
	// frame; waiting for the longest overlay path instead makes every lost
	// message stall the mesh for that long (on geo3 with 1% loss and 64
	// nodes: 1.8× the simulated time for 0.8× the bytes).
	SyncTimeout time.Duration
	// SyncInterval is the period of every node's anti-entropy request
	// (default 100 ms).
	SyncInterval time.Duration
	// DetectionDelay is how long after a kill, restart, partition or heal
	// the nodes' liveness views follow (default three largest one-way
	// latencies plus three jitters).
	DetectionDelay time.Duration
	// FlushDelay lets a node collect relays for this long before it sends
	// them, batching updates per next hop; 0 sends after every message. A
	// node's own update always leaves as soon as it is computed.
	FlushDelay time.Duration
	// Sync tunes the nodes' retransmission (node.SyncConfig defaults).
	Sync node.SyncConfig
	// Faults is an optional fault script.
	Faults *Scenario
	// Progress, when set, receives a report every EvalEvery iterations
	// (0: about ten per run) and one per scenario step.
	Progress  func(SimProgress)
	EvalEvery int
}

// MaxSimNodes bounds SimConfig.Nodes: link state is a dense P×P table.
const MaxSimNodes = 4096

// SimProgress is one progress report of a simulated run.
type SimProgress struct {
	// Iteration is the slowest live node's clock.
	Iteration        uint64
	SimulatedSeconds float64
	Live             int
	// TestLoss and TestAccuracy are the lowest-numbered live node's (NaN
	// accuracy for regression).
	TestLoss, TestAccuracy float64
	MessagesSent           uint64
	BytesSent              uint64
	// Step is the scenario step that just fired ("at 20: kill 0-3"), or "".
	Step string
}

// Simulate runs cfg as a discrete-event simulation and reports on it.
//
// # Event model
//
// Nodes are node.Syncer cores (node.Node plus retransmission), built exactly
// as a real mesh builds them. One goroutine pops events from a heap ordered
// by (virtual time, sequence number), so simultaneous events keep the order
// in which they were scheduled. Events are: a message arriving, an iteration
// finishing, a node's stall timer or anti-entropy timer firing, a delayed
// flush, the liveness views catching up, and a periodic check. A node whose
// gate is open starts an iteration; its Train runs when the iteration's
// compute time has elapsed (so the view it reads includes what arrived
// meanwhile), and its messages leave at once. Receiving costs no virtual
// time: the core is fast next to the network.
//
// # What is modelled
//
// Links are directed and per node pair: a message waits for the messages
// before it on its link (FIFO), takes bytes/bandwidth to transmit, then the
// one-way latency plus exponential jitter to arrive; it may be lost,
// duplicated or held back (reordered) as the LinkProfile and the scenario
// say. A node's total uplink is not shared between its links. Partitions
// drop messages between groups at send and at arrival; a killed node drops
// what arrives and does nothing until restarted, with the state it had.
// Liveness is the driver's decision: DetectionDelay after any change, every
// live node's view is set to the truth. A member that is alive and
// reachable is live (PeerUp); one that is alive but on the other side of a
// partition is suspected (node.Syncer.Suspect): the gate does not wait for
// it, but it keeps its share of the step, since its updates of the rows the
// partition lasts will join them after the heal; a killed member is dead
// (PeerDown, node.Syncer.DeclareDead) and its share goes to the others (see
// node/scale.go). The simulator knows which is which; a real failure
// detector has to tell them apart from what it hears. Each node's overlay
// is rebuilt over the members it counts live whenever that set changes, as
// a mesh member rebuilds its own (nodes with the same view share one).
//
// join starts a new member from the snapshot of a live member, the donor,
// drawn from the seeded source among the members started before the step:
// its core starts at the donor's rows (node.Config.Start) and applies the
// frames the snapshot carries above them; the snapshot reaches it at once.
// The donor admits it at once (AddMember at the snapshot's clock); every
// other live node does when the admission announcement reaches it: one
// message, sent at the join, taking the one-way latency between the donor's
// and the node's sites (it is neither lost nor queued). A node the
// announcement misses (dead, or cut off from the donor, at the time) learns
// of the member, with every other member its side knows, at the next
// liveness update that finds it alive; each join schedules one. A joiner
// starts on its donor's side of any partition and trains up to Iterations
// like everyone else. A node that has waited at its gate for SyncTimeout
// asks the laggards for their updates (node.Syncer.SyncRequest), again
// every SyncTimeout while it waits, and every node runs anti-entropy every
// SyncInterval (node.Syncer.AntiEntropy); without them a lost message would
// stall the mesh.
//
// The run ends when every live node has run all iterations and holds every
// live member's updates, and no update held by a live node is missing at
// another (anti-entropy continues for up to 50 sync intervals to get
// there); or when no node has trained for 200 sync timeouts (reported as
// stalled).
//
// # Determinism
//
// All randomness comes from one PCG source seeded by cfg.Seed, drawn in
// event order, and nothing in the event loop reads the wall clock (only
// WallSeconds does). The same configuration and seed give the same events
// in the same order, hence the same TraceHash: an FNV-64a hash over every
// delivered and dropped message (time, ends, size), every iteration (time,
// node, clock, training loss bits), every scenario step, liveness update
// and join (time, joiner, donor, snapshot clock). A failing seed replays
// exactly.
func Simulate(ctx context.Context, cfg SimConfig) (*SimReport, error) {
	wallStart := time.Now()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s, err := newSim(cfg)
	if err != nil {
		return nil, err
	}
	if err := s.run(ctx); err != nil {
		return nil, err
	}
	return s.report(time.Since(wallStart)), nil
}

func (c *SimConfig) validate() error {
	switch {
	case c.Nodes < 1 || c.Nodes > MaxSimNodes:
		return fmt.Errorf("nodes must be between 1 and %d, got %d", MaxSimNodes, c.Nodes)
	case c.ComputeTime < 0 || c.SyncTimeout < 0 || c.SyncInterval < 0 || c.DetectionDelay < 0 || c.FlushDelay < 0:
		return errors.New("compute time, sync timeout, sync interval, detection delay and flush delay must be >= 0")
	}
	if err := validateRun(c.Train, c.Test, c.Iterations, c.Batch, c.Staleness, c.Codec, &c.Topology); err != nil {
		return err
	}
	if c.WAN.Sites == 0 {
		lan, err := ParseLinkProfile("lan")
		if err != nil {
			return err
		}
		lan.Loss, lan.Duplicate, lan.Reorder, lan.Jitter = c.WAN.Loss, c.WAN.Duplicate, c.WAN.Reorder, c.WAN.Jitter
		c.WAN = lan
	}
	if err := c.WAN.validate(); err != nil {
		return err
	}
	if c.ComputeTime == 0 {
		c.ComputeTime = 10 * time.Millisecond
	}
	worst := c.WAN.maxLatency() + c.WAN.Jitter
	if c.SyncTimeout == 0 {
		c.SyncTimeout = c.ComputeTime + 2*worst + c.FlushDelay
	}
	if c.SyncInterval == 0 {
		c.SyncInterval = 100 * time.Millisecond
	}
	if c.DetectionDelay == 0 {
		c.DetectionDelay = max(3*worst, time.Microsecond)
	}
	return nil
}

// Event kinds.
const (
	evDeliver uint8 = iota
	evTrainDone
	evStallSync
	evAntiEntropy
	evFlush
	evDetect
	evCheck
	evAdmit // a join's admission announcement reaches node
	evLeave // a leave notice reaches node; tag is the leaver's last clock
)

type simEvent struct {
	at   int64 // virtual nanoseconds
	seq  uint64
	data []byte
	kind uint8
	node int32
	from int32
	tag  uint32 // the node's incarnation or stall epoch the event belongs to; an admission's donor; a leaver's last clock
}

// simQueue is a binary min-heap of events by (at, seq).
type simQueue []simEvent

func (q simQueue) less(i, j int) bool {
	return q[i].at < q[j].at || q[i].at == q[j].at && q[i].seq < q[j].seq
}

func (q *simQueue) push(e simEvent) {
	*q = append(*q, e)
	h := *q
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if !h.less(i, p) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

func (q *simQueue) pop() simEvent {
	h := *q
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h[last] = simEvent{}
	h = h[:last]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(h) && h.less(l, m) {
			m = l
		}
		if r < len(h) && h.less(r, m) {
			m = r
		}
		if m == i {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	*q = h
	return top
}

// simTrace is FNV-64a over the run's events, fed eight bytes per word.
type simTrace uint64

func (t *simTrace) words(ws ...uint64) {
	h := uint64(*t)
	for _, w := range ws {
		for range 8 {
			h ^= w & 0xff
			h *= 1099511628211
			w >>= 8
		}
	}
	*t = simTrace(h)
}

// Trace record kinds.
const (
	trDeliver = iota + 1
	trDrop
	trTrain
	trStep
	trDetect
	trJoin
)

type simNode struct {
	idx   int
	id    string
	core  *node.Syncer
	site  int
	group int
	alive bool
	// inc counts lives: kill and restart bump it, voiding the timers of the
	// life before.
	inc       uint32
	computing bool
	slow      float64
	// A node is stalled while alive, not computing and not done; blocked
	// time is stalled time with iterations left.
	stalled    bool
	stallStart int64
	stallEpoch uint32
	blocked    int64
	done       bool
	flushArmed bool
	// believe mirrors the core's live set and suspect its suspected
	// members; knows its membership (every member it has been told of).
	// Only the driver changes them. All three are indexed by node number.
	believe, suspect, knows []bool
	// hint is a member that last held this node back; checked first.
	hint int
	// viewChanged is set when the live set changed without the overlay
	// following yet.
	viewChanged bool
	// entry is a joiner's entry clock: its snapshot's rows' clock.
	entry uint64
	// left is set for a node that left with notice: it never comes back.
	left bool
	// heardLeave maps the leavers whose notice reached this node to the
	// last clock they announced.
	heardLeave map[int]uint64
}

type sim struct {
	cfg SimConfig
	// p is the number of nodes the run will have started by its end (the
	// initial ones and the joiners); ids holds all their member ids.
	p     int
	ids   []string
	iters uint64
	nodes []*simNode
	index map[string]int32
	q     simQueue
	seq   uint64
	now   int64
	rng   *rand.Rand
	trace simTrace

	busy     []int64 // per directed link, when it is free again
	lat      [][]int64
	bw       [][]float64
	net      LinkProfile // with the scenario's loss, dup and reorder
	jitter   float64
	detect   int64
	timeout  int64
	interval int64
	flushDly int64
	detectAt int64 // pending liveness update, or -1

	steps    []simStep
	nextStep int
	test     []dataset.Row
	hops     float64
	cdcName  string

	// What new cores are built from.
	mdl      *model.Model
	cdc      codec.Codec
	cache    *node.DecodeCache
	shuffled *dataset.Dataset
	// routers holds the overlays of the views nodes have, keyed by the
	// view's bitmap over node numbers.
	routers map[string]Router
	joined  int

	msgs, bytes, syncMsgs, syncBytes, dups uint64
	stallSyncs                             uint64
	dropped                                map[string]uint64
	staleMax, staleSum, reads              uint64
	// finishedShort counts nodes that finished without the updates a
	// leaver announced, while still counting it live.
	finishedShort       uint64
	nodeIters           uint64
	lastTrain           int64
	allDoneAt           int64
	stalled             bool
	stop                bool
	events              uint64
	evalEvery, nextEval uint64
	assertions          []AssertionResult
}

// simStep is a scenario step resolved against the run's nodes.
type simStep struct {
	Step
	name   string
	nodes  []int
	groups []int // node → group, for partition
}

func newSim(cfg SimConfig) (*sim, error) {
	mdl, err := NewModel(cfg.Model, cfg.L2, cfg.Train)
	if err != nil {
		return nil, err
	}
	cdc, err := codec.ByName(cfg.Codec)
	if err != nil {
		return nil, err
	}
	s := &sim{
		cfg:       cfg,
		iters:     uint64(cfg.Iterations),
		rng:       rand.New(rand.NewPCG(cfg.Seed, 0x5eed_51a7)),
		trace:     simTrace(14695981039346656037),
		net:       cfg.WAN,
		jitter:    float64(cfg.WAN.Jitter),
		detect:    int64(cfg.DetectionDelay),
		timeout:   int64(cfg.SyncTimeout),
		interval:  int64(cfg.SyncInterval),
		flushDly:  int64(cfg.FlushDelay),
		detectAt:  -1,
		test:      cfg.Test.Rows,
		cdcName:   cdc.Name(),
		dropped:   map[string]uint64{},
		allDoneAt: -1,
		evalEvery: uint64(max(1, cfg.Iterations/10)),
		mdl:       mdl,
		cdc:       cdc,
		routers:   map[string]Router{},
	}
	if cfg.EvalEvery > 0 {
		s.evalEvery = uint64(cfg.EvalEvery)
	}
	s.nextEval = s.evalEvery
	for a := range cfg.WAN.Sites {
		s.lat = append(s.lat, make([]int64, cfg.WAN.Sites))
		for b := range cfg.WAN.Sites {
			s.lat[a][b] = int64(cfg.WAN.Latency[a][b])
		}
	}
	s.bw = cfg.WAN.Bandwidth
	if err := s.resolveSteps(); err != nil {
		return nil, err
	}
	p := s.p
	s.busy = make([]int64, p*p)
	s.index = make(map[string]int32, p)
	width := len(strconv.Itoa(p - 1))
	s.ids = make([]string, p)
	for i := range s.ids {
		// Zero-padded, so the canonical (sorted) order is the node order.
		s.ids[i] = fmt.Sprintf("n%0*d", width, i)
		s.index[s.ids[i]] = int32(i)
	}
	s.shuffled = cfg.Train.Shuffled(int64(cfg.Seed))
	// Every receiver decodes the same frame to the same update; one shared
	// cache turns P² decodes an iteration into P. It holds the frames of
	// the iterations that can be in flight at once.
	s.cache = node.NewDecodeCache(p * (cfg.Staleness + 3))
	initial := cfg.Nodes
	for i := range initial {
		n := &simNode{idx: i, id: s.ids[i], site: i % cfg.WAN.Sites, alive: true, slow: 1,
			believe: make([]bool, p), suspect: make([]bool, p), knows: make([]bool, p)}
		for j := range initial {
			n.believe[j], n.knows[j] = true, true
		}
		s.nodes = append(s.nodes, n)
	}
	router := s.routerFor(s.nodes[0])
	s.hops = router.MeanHops()
	for _, n := range s.nodes {
		if n.core, err = s.newCore(n.idx, nil, router); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// newCore builds node i's core: from scratch over the run's initial nodes,
// or from a snapshot.
func (s *sim) newCore(i int, start *node.Snapshot, router Router) (*node.Syncer, error) {
	cfg := s.cfg
	var shard *dataset.Dataset
	if rows := len(s.shuffled.Rows); s.p <= rows {
		shard = s.shuffled.Shard(i, s.p)
	} else {
		shard = s.shuffled.Shard(i%rows, rows)
	}
	opt, err := model.NewOptimizer(cfg.Optimizer, cfg.LR, s.mdl.NumParams())
	if err != nil {
		return nil, err
	}
	tc := Config{Batch: cfg.Batch}
	nc := node.Config{
		ID:            s.ids[i],
		Model:         s.mdl,
		Optimizer:     opt,
		Codec:         s.cdc,
		ErrorFeedback: cfg.ErrorFeedback,
		Staleness:     cfg.Staleness,
		Iterations:    s.iters,
		BatchSize:     tc.batchRows(len(shard.Rows)),
		Seed:          cfg.Seed,
		Shard:         shard.Rows,
		Router:        router,
		DecodeCache:   s.cache,
		Start:         start,
	}
	if start == nil {
		nc.Members = s.ids[:cfg.Nodes]
	}
	core, err := node.NewSyncer(nc, cfg.Sync)
	if err != nil {
		return nil, fmt.Errorf("node %d: %w", i, err)
	}
	return core, nil
}

// routerFor returns the overlay over the members n counts live, itself
// included; nodes with the same view share one.
func (s *sim) routerFor(n *simNode) Router {
	key := make([]byte, (s.p+7)/8)
	var view []string
	for j, live := range n.believe {
		if live || j == n.idx {
			key[j/8] |= 1 << (j % 8)
			view = append(view, s.ids[j])
		}
	}
	if r, ok := s.routers[string(key)]; ok {
		return r
	}
	if len(s.routers) >= 64 {
		clear(s.routers)
	}
	r := newRouter(s.cfg.Topology, view)
	s.routers[string(key)] = r
	return r
}

// resolveSteps checks the scenario against the run, orders its steps by
// trigger (file order within a trigger), and sets p, the number of nodes
// the run will have started by its end. A step's node sets are resolved
// against the nodes started by the time it fires.
func (s *sim) resolveSteps() error {
	s.p = s.cfg.Nodes
	sc := s.cfg.Faults
	if sc == nil {
		return nil
	}
	steps := slices.Clone(sc.Steps)
	slices.SortStableFunc(steps, func(a, b Step) int {
		ka, kb := a.At, b.At
		if ka == AtEnd {
			ka = math.MaxInt
		}
		if kb == AtEnd {
			kb = math.MaxInt
		}
		return ka - kb
	})
	for _, st := range steps {
		rs := simStep{Step: st, name: sc.Name}
		where := fmt.Sprintf("%s:%d", sc.Name, st.Line)
		if st.At > s.cfg.Iterations {
			return fmt.Errorf("%s: iteration %d is beyond the run's %d iterations", where, st.At, s.cfg.Iterations)
		}
		if st.At == AtEnd && st.op != "assert" {
			return fmt.Errorf("%s: only assert may run at end", where)
		}
		var err error
		if st.nodes != nil {
			if rs.nodes, err = st.nodes.resolve(s.p); err != nil {
				return fmt.Errorf("%s: %w", where, err)
			}
		}
		if st.groups != nil {
			rs.groups = make([]int, s.p)
			for i := range rs.groups {
				rs.groups[i] = len(st.groups) // in no group
			}
			for g, set := range st.groups {
				members, err := set.resolve(s.p)
				if err != nil {
					return fmt.Errorf("%s: %w", where, err)
				}
				for _, i := range members {
					if rs.groups[i] != len(st.groups) {
						return fmt.Errorf("%s: node %d is in two groups", where, i)
					}
					rs.groups[i] = g
				}
			}
		}
		if st.op == "join" {
			if s.p+st.count > MaxSimNodes {
				return fmt.Errorf("%s: %d more nodes make %d, above the limit of %d", where, st.count, s.p+st.count, MaxSimNodes)
			}
			s.p += st.count
		}
		s.steps = append(s.steps, rs)
	}
	return nil
}

func (s *sim) schedule(at int64, kind uint8, n, from int32, tag uint32, data []byte) {
	s.seq++
	s.q.push(simEvent{at: at, seq: s.seq, kind: kind, node: n, from: from, tag: tag, data: data})
}

func (s *sim) run(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("simulation not started: %w", err)
	}
	for i, n := range s.nodes {
		// Stagger anti-entropy over the interval so requests do not burst.
		s.schedule(s.interval*int64(i+1)/int64(len(s.nodes)), evAntiEntropy, int32(i), 0, n.inc, nil)
	}
	s.schedule(s.interval, evCheck, 0, 0, 0, nil)
	if err := s.fireSteps(); err != nil {
		return err
	}
	for _, n := range s.nodes {
		s.advance(n)
	}
	for !s.stop && len(s.q) > 0 {
		ev := s.q.pop()
		s.now = ev.at
		s.events++
		if s.events%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("simulation interrupted at %.3f virtual seconds: %w", float64(s.now)/1e9, err)
			}
		}
		var err error
		switch ev.kind {
		case evDeliver:
			s.deliver(ev)
		case evTrainDone:
			err = s.trainDone(ev)
		case evStallSync:
			if n := s.nodes[ev.node]; n.alive && n.stalled && ev.tag == n.stallEpoch {
				s.stallSyncs++
				s.sendAll(n, n.core.SyncRequest(), true)
				s.schedule(s.now+s.timeout, evStallSync, ev.node, 0, ev.tag, nil)
			}
		case evAntiEntropy:
			if n := s.nodes[ev.node]; n.alive && ev.tag == n.inc {
				s.sendAll(n, n.core.AntiEntropy(), true)
				s.schedule(s.now+s.interval, evAntiEntropy, ev.node, 0, ev.tag, nil)
			}
		case evFlush:
			if n := s.nodes[ev.node]; n.alive && ev.tag == n.inc {
				n.flushArmed = false
				s.flush(n)
			}
		case evDetect:
			s.updateLiveness()
		case evCheck:
			s.check()
		case evAdmit:
			s.admitted(ev)
		case evLeave:
			s.leaveNoticed(ev)
		}
		if err != nil {
			return err
		}
	}
	for s.nextStep < len(s.steps) {
		if err := s.fire(s.steps[s.nextStep]); err != nil {
			return err
		}
		s.nextStep++
	}
	return nil
}

// deliver hands an arriving message to its node, unless the node is dead or
// cut off from the sender.
func (s *sim) deliver(ev simEvent) {
	to := s.nodes[ev.node]
	switch {
	case !to.alive:
		s.drop(ev.from, ev.node, len(ev.data), "dead")
		return
	case s.nodes[ev.from].group != to.group:
		s.drop(ev.from, ev.node, len(ev.data), "partition")
		return
	}
	s.trace.words(trDeliver, uint64(s.now), uint64(ev.from), uint64(ev.node), uint64(len(ev.data)))
	to.core.Receive(s.nodes[ev.from].id, ev.data)
	switch {
	case s.flushDly == 0:
		s.flush(to)
	case !to.flushArmed:
		to.flushArmed = true
		s.schedule(s.now+s.flushDly, evFlush, ev.node, 0, to.inc, nil)
	}
	s.advance(to)
}

func (s *sim) drop(from, to int32, size int, reason string) {
	s.dropped[reason]++
	var code uint64
	switch reason {
	case "loss":
		code = 1
	case "partition":
		code = 2
	case "dead":
		code = 3
	}
	s.trace.words(trDrop, uint64(s.now), uint64(from), uint64(to), uint64(size), code)
}

// trainDone runs the iteration a node started ComputeTime ago.
func (s *sim) trainDone(ev simEvent) error {
	n := s.nodes[ev.node]
	if !n.alive || ev.tag != n.inc || !n.computing {
		return nil
	}
	n.computing = false
	t := n.core.Clock()
	stale := t - min(t, s.minEntry(n))
	if err := n.core.Train(); err != nil {
		if errors.Is(err, node.ErrGateClosed) {
			// A member came back while this node computed; it waits again.
			s.advance(n)
			return nil
		}
		return fmt.Errorf("node %d at virtual %.3fs: %w", n.idx, float64(s.now)/1e9, err)
	}
	s.staleMax = max(s.staleMax, stale)
	s.staleSum += stale
	s.reads++
	s.nodeIters++
	s.lastTrain = s.now
	s.trace.words(trTrain, uint64(s.now), uint64(n.idx), n.core.Clock(), math.Float64bits(n.core.Stats().LastLoss))
	s.flush(n)
	if err := s.fireSteps(); err != nil {
		return err
	}
	if low := s.minLiveClock(); low >= s.nextEval && s.cfg.Progress != nil {
		s.progress("")
		for s.nextEval <= low {
			s.nextEval += s.evalEvery
		}
	}
	s.advance(n)
	return nil
}

// minEntry is the smallest vector-clock entry over the members n counts live.
func (s *sim) minEntry(n *simNode) uint64 {
	vc := n.core.VectorClock()
	m := uint64(math.MaxUint64)
	for j, ok := range n.believe {
		if ok && !s.retired(n, j) {
			m = min(m, vc.Get(s.nodes[j].id))
		}
	}
	return m
}

// waiting reports whether some member n counts live has an entry below need.
// It tries the member that held n back last time first, then walks on from
// it, so over one clock the walk covers each member about once. A leaver
// whose updates up to its last clock are in no longer counts (the core has
// retired it).
func (s *sim) waiting(n *simNode, need uint64) bool {
	vc := n.core.VectorClock()
	for k := 0; k < s.p; k++ {
		j := (n.hint + k) % s.p
		if n.believe[j] && vc.Get(s.nodes[j].id) < need && !s.retired(n, j) {
			n.hint = j
			return true
		}
	}
	return false
}

// advance starts n's next iteration when its gate is open, and otherwise
// marks it stalled (arming its stall timer) or done.
func (s *sim) advance(n *simNode) {
	if !n.alive || n.computing {
		return
	}
	c := n.core.Clock()
	if c < s.iters {
		need := int64(c) - int64(s.cfg.Staleness)
		if (need <= 0 || !s.waiting(n, uint64(need))) && n.core.CanTrain() {
			s.endStall(n)
			n.computing = true
			d := float64(s.cfg.ComputeTime) * n.slow * (0.9 + 0.2*s.rng.Float64())
			s.schedule(s.now+int64(d), evTrainDone, int32(n.idx), 0, n.inc, nil)
			return
		}
		s.beginStall(n)
		return
	}
	if n.done {
		return
	}
	if !s.waiting(n, s.iters) && n.core.Done() {
		s.endStall(n)
		n.done = true
		for j, last := range n.heardLeave {
			// Unless the driver declared the leaver dead, its updates up to
			// its last clock are part of the run's result.
			if n.believe[j] && n.core.VectorClock().Get(s.nodes[j].id) < last {
				s.finishedShort++
			}
		}
		s.noteDone()
		return
	}
	s.beginStall(n)
}

func (s *sim) beginStall(n *simNode) {
	if n.stalled {
		return
	}
	n.stalled = true
	n.stallStart = s.now
	n.stallEpoch++
	s.schedule(s.now+s.timeout, evStallSync, int32(n.idx), 0, n.stallEpoch, nil)
}

func (s *sim) endStall(n *simNode) {
	if !n.stalled {
		return
	}
	n.stalled = false
	n.stallEpoch++
	if n.core.Clock() < s.iters {
		n.blocked += s.now - n.stallStart
	}
}

// noteDone records when every live node became done, and forgets it when
// one no longer is (a member came back).
func (s *sim) noteDone() {
	switch {
	case !s.allDone():
		s.allDoneAt = -1
	case s.allDoneAt < 0:
		s.allDoneAt = s.now
	}
}

func (s *sim) allDone() bool {
	for _, n := range s.nodes {
		if n.alive && !n.done {
			return false
		}
	}
	return true
}

// flush sends what n's core has queued.
func (s *sim) flush(n *simNode) {
	s.sendAll(n, n.core.Ready().Messages, false)
}

func (s *sim) sendAll(n *simNode, msgs []node.Message, sync bool) {
	for _, m := range msgs {
		to, ok := s.index[m.To]
		if !ok || int(to) == n.idx {
			continue
		}
		s.send(int32(n.idx), to, m.Data, sync)
	}
}

// send puts one message on the link from → to.
func (s *sim) send(from, to int32, data []byte, sync bool) {
	size := len(data)
	s.msgs++
	s.bytes += uint64(size)
	if sync {
		s.syncMsgs++
		s.syncBytes += uint64(size)
	}
	a, b := s.nodes[from], s.nodes[to]
	if a.group != b.group {
		s.drop(from, to, size, "partition")
		return
	}
	link := int(from)*s.p + int(to)
	start := max(s.now, s.busy[link])
	done := start + int64(float64(size)/s.bw[a.site][b.site]*1e9)
	s.busy[link] = done
	if s.net.Loss > 0 && s.rng.Float64() < s.net.Loss {
		s.drop(from, to, size, "loss")
		return
	}
	lat := s.lat[a.site][b.site]
	arrive := done + lat + s.jitterDelay()
	if s.net.Reorder > 0 && s.rng.Float64() < s.net.Reorder {
		arrive += max(lat, 1)
	}
	s.schedule(arrive, evDeliver, to, from, 0, data)
	if s.net.Duplicate > 0 && s.rng.Float64() < s.net.Duplicate {
		s.dups++
		extra := s.jitterDelay()
		if extra == 0 {
			extra = lat/10 + 1
		}
		s.schedule(arrive+extra, evDeliver, to, from, 0, data)
	}
}

func (s *sim) jitterDelay() int64 {
	if s.jitter == 0 {
		return 0
	}
	return int64(s.rng.ExpFloat64() * s.jitter)
}

// scheduleDetect makes the liveness views follow the truth DetectionDelay
// from now. One pending update serves every change made before it runs.
func (s *sim) scheduleDetect() {
	if s.detectAt >= s.now {
		return
	}
	s.detectAt = s.now + s.detect
	s.schedule(s.detectAt, evDetect, 0, 0, 0, nil)
}

// updateLiveness sets every live node's view of its peers to the truth: a
// peer is live when it is alive and on the same side of any partition,
// suspected when it is alive on another side, dead otherwise. Once members
// have joined, each node first learns of every member a live node on its
// side knows of.
func (s *sim) updateLiveness() {
	s.trace.words(trDetect, uint64(s.now))
	if s.joined > 0 {
		s.spreadMembership()
	}
	for _, n := range s.nodes {
		if n.alive {
			s.resetBeliefs(n)
		}
	}
	for _, n := range s.nodes {
		s.advance(n)
	}
	s.noteDone()
}

// learnAll tells n of every member that a live node on its side knows of.
func (s *sim) learnAll(n *simNode) {
	for _, m := range s.nodes {
		if m == n || !m.alive || m.group != n.group {
			continue
		}
		for j, ok := range m.knows {
			if ok && !n.knows[j] {
				s.learn(n, s.nodes[j])
			}
		}
	}
}

// spreadMembership tells every live node of the members that live nodes on
// its side of any partition know of.
func (s *sim) spreadMembership() {
	known := map[int][]bool{} // group → union of the members known there
	for _, n := range s.nodes {
		if !n.alive {
			continue
		}
		k := known[n.group]
		if k == nil {
			k = make([]bool, s.p)
			known[n.group] = k
		}
		for j, ok := range n.knows {
			k[j] = k[j] || ok
		}
	}
	for _, n := range s.nodes {
		if !n.alive {
			continue
		}
		for j, ok := range known[n.group] {
			if ok && !n.knows[j] {
				s.learn(n, s.nodes[j])
			}
		}
	}
}

// learn admits member m at n, as the announcement of m's join does: n's core
// adds m as live at its entry clock. The caller then sets n's view of m to
// the truth (resetBeliefs).
func (s *sim) learn(n, m *simNode) {
	n.core.AddMember(m.id, m.entry)
	n.knows[m.idx], n.believe[m.idx], n.suspect[m.idx] = true, true, false
	n.done, n.viewChanged = false, true
}

func (s *sim) resetBeliefs(n *simNode) {
	changed := false
	for j, peer := range s.nodes {
		if j == n.idx || !n.knows[j] {
			continue
		}
		live := peer.alive && peer.group == n.group
		suspect := peer.alive && !live
		if live == n.believe[j] && suspect == n.suspect[j] {
			continue
		}
		changed = true
		switch {
		case live:
			n.core.PeerUp(peer.id)
			n.done = false
		case suspect:
			n.core.Suspect(peer.id)
		default:
			n.core.DeclareDead(peer.id)
		}
		n.believe[j], n.suspect[j] = live, suspect
	}
	if changed || n.viewChanged {
		n.core.SetRouter(s.routerFor(n))
		n.viewChanged = false
	}
}

// join starts member i from the snapshot of a live member started before
// the step (first is the first node the step starts), and sends the
// admission announcements.
func (s *sim) join(i, first int) error {
	var donors []*simNode
	for _, n := range s.nodes[:first] {
		if n.alive {
			donors = append(donors, n)
		}
	}
	donor := donors[s.rng.IntN(len(donors))]
	snap := donor.core.Snapshot()
	// The new core knows the donor's members and counts live those the
	// donor does; the snapshot lists the donor's suspected members as down,
	// so they are dead to it until resetBeliefs below sets its view.
	n := &simNode{idx: i, id: s.ids[i], site: i % s.cfg.WAN.Sites, alive: true, slow: 1, group: donor.group, entry: snap.Clock,
		believe: slices.Clone(donor.believe), suspect: make([]bool, s.p), knows: slices.Clone(donor.knows)}
	n.believe[i], n.knows[i] = true, true
	s.nodes = append(s.nodes, n)
	s.joined++
	var err error
	if n.core, err = s.newCore(i, &snap, s.routerFor(n)); err != nil {
		return err
	}
	s.trace.words(trJoin, uint64(s.now), uint64(i), uint64(donor.idx), snap.Clock)
	s.resetBeliefs(n)
	if len(snap.Pending) > 0 {
		n.core.Receive(donor.id, node.EncodeEnvelope(snap.Pending))
	}
	s.learn(donor, n)
	s.resetBeliefs(donor)
	for _, m := range s.nodes[:i] {
		if m.alive && m != donor {
			s.schedule(s.now+s.lat[donor.site][m.site], evAdmit, int32(m.idx), int32(i), uint32(donor.idx), nil)
		}
	}
	s.schedule(s.now+s.interval, evAntiEntropy, int32(i), 0, n.inc, nil)
	s.flush(n)
	s.flush(donor)
	s.advance(n)
	s.advance(donor)
	s.noteDone()
	return nil
}

// admitted handles the announcement of joiner ev.from's admission, sent by
// donor ev.tag, reaching node ev.node: it learns of the joiner, unless it is
// dead or cut off from the donor now (it learns at a later liveness update
// then).
func (s *sim) admitted(ev simEvent) {
	n, m, donor := s.nodes[ev.node], s.nodes[ev.from], s.nodes[ev.tag]
	if !n.alive || n.knows[m.idx] || n.group != donor.group {
		return
	}
	s.learn(n, m)
	s.resetBeliefs(n)
	s.flush(n)
	s.advance(n)
	s.noteDone()
}

// announceLeave sends leaver n's notice, with its last clock, to every live
// node. It travels as the admissions do (one-way latency, never lost), so it
// can overtake the leaver's last updates, which queue on the links and may
// be lost and resent.
func (s *sim) announceLeave(n *simNode) {
	last := n.core.Clock()
	for _, m := range s.nodes {
		if m != n && m.alive {
			s.schedule(s.now+s.lat[n.site][m.site], evLeave, int32(m.idx), int32(n.idx), uint32(last), nil)
		}
	}
}

// retired reports whether n heard member j leave and its core no longer
// waits for it.
func (s *sim) retired(n *simNode, j int) bool {
	_, heard := n.heardLeave[j]
	return heard && !n.core.Leaving(s.nodes[j].id)
}

// leaveNoticed handles leaver ev.from's notice reaching node ev.node: the
// core keeps waiting for the leaver's updates up to its last clock (ev.tag)
// and then drops it. A node that is dead, or cut off from the leaver, does
// not hear it; liveness detection declares the leaver dead there.
func (s *sim) leaveNoticed(ev simEvent) {
	n, m := s.nodes[ev.node], s.nodes[ev.from]
	if !n.alive || !n.knows[m.idx] || n.group != m.group {
		return
	}
	n.core.Leave(m.id, uint64(ev.tag))
	if n.heardLeave == nil {
		n.heardLeave = map[int]uint64{}
	}
	n.heardLeave[m.idx] = uint64(ev.tag)
	s.flush(n)
	s.advance(n)
	s.noteDone()
}

// check runs every sync interval: it ends the run once every live node is
// done and anti-entropy has left no gap (or has had 50 intervals to close
// them), and ends a run in which nobody has trained for 200 sync timeouts.
func (s *sim) check() {
	switch {
	case s.allDoneAt >= 0:
		if s.undelivered() == 0 || s.now-s.allDoneAt >= 50*s.interval {
			s.stop = true
			return
		}
	case s.now-s.lastTrain > 200*s.timeout:
		s.stalled = true
		s.stop = true
		return
	}
	s.schedule(s.now+s.interval, evCheck, 0, 0, 0, nil)
}

// minLiveClock is the slowest live node's clock, the clock scenario triggers
// follow.
func (s *sim) minLiveClock() uint64 {
	m := uint64(math.MaxUint64)
	for _, n := range s.nodes {
		if n.alive {
			m = min(m, n.core.Clock())
		}
	}
	return m
}

func (s *sim) live() int {
	k := 0
	for _, n := range s.nodes {
		if n.alive {
			k++
		}
	}
	return k
}

// fireSteps runs the steps whose trigger the slowest live node has reached.
func (s *sim) fireSteps() error {
	for s.nextStep < len(s.steps) {
		st := s.steps[s.nextStep]
		if st.At == AtEnd || uint64(st.At) > s.minLiveClock() {
			return nil
		}
		s.nextStep++
		if err := s.fire(st); err != nil {
			return err
		}
	}
	return nil
}

func (s *sim) fire(st simStep) error {
	s.trace.words(trStep, uint64(s.now), uint64(st.Line))
	switch st.op {
	case "kill", "leave":
		for _, i := range st.nodes {
			n := s.nodes[i]
			if !n.alive {
				continue
			}
			s.endStall(n)
			n.alive, n.computing, n.done, n.flushArmed = false, false, false, false
			n.inc++
			if st.op == "leave" {
				n.left = true
				s.announceLeave(n)
			}
		}
		if s.live() == 0 {
			return fmt.Errorf("%s:%d: %q leaves no live node", st.name, st.Line, st.Text)
		}
		s.noteDone()
		s.scheduleDetect()
	case "restart":
		for _, i := range st.nodes {
			n := s.nodes[i]
			if n.left {
				return fmt.Errorf("%s:%d: %q: node %d left the mesh; a member that left does not come back (join adds a new one)", st.name, st.Line, st.Text, i)
			}
			if n.alive {
				continue
			}
			n.alive = true
			n.inc++
			// A node that rejoins learns the membership as it is now.
			if s.joined > 0 {
				s.learnAll(n)
			}
			s.resetBeliefs(n)
			s.schedule(s.now+s.interval, evAntiEntropy, int32(i), 0, n.inc, nil)
		}
		s.scheduleDetect()
		for _, i := range st.nodes {
			s.advance(s.nodes[i])
		}
		s.noteDone()
	case "join":
		first := len(s.nodes)
		for i := first; i < first+st.count; i++ {
			if err := s.join(i, first); err != nil {
				return err
			}
		}
		s.scheduleDetect()
	case "partition":
		for i, g := range st.groups {
			s.nodes[i].group = g
		}
		s.scheduleDetect()
	case "heal":
		for _, n := range s.nodes {
			n.group = 0
		}
		s.scheduleDetect()
	case "slow":
		for _, i := range st.nodes {
			s.nodes[i].slow = st.value
		}
	case "loss":
		s.net.Loss = st.value
	case "dup":
		s.net.Duplicate = st.value
	case "reorder":
		s.net.Reorder = st.value
	case "assert":
		s.assert(st)
	}
	if s.cfg.Progress != nil {
		s.progress(fmt.Sprintf("at %s: %s", atText(st.At), st.Text))
	}
	return nil
}

func atText(at int) string {
	if at == AtEnd {
		return "end"
	}
	return strconv.Itoa(at)
}

func (s *sim) assert(st simStep) {
	var v float64
	switch st.metric {
	case "staleness":
		v = float64(s.staleMax)
	case "loss", "accuracy":
		loss, acc := s.meanMetrics()
		v = loss
		if st.metric == "accuracy" {
			v = acc
		}
	case "live":
		v = float64(s.live())
	case "undelivered":
		v = float64(s.undelivered())
	case "applied_twice":
		v = float64(s.appliedTwice())
	}
	var ok bool
	switch st.cmp {
	case "<=":
		ok = v <= st.value
	case "<":
		ok = v < st.value
	case ">=":
		ok = v >= st.value
	case ">":
		ok = v > st.value
	case "==":
		ok = v == st.value
	}
	s.assertions = append(s.assertions, AssertionResult{
		Line:             st.Line,
		Step:             fmt.Sprintf("at %s: %s", atText(st.At), st.Text),
		Iteration:        s.minLiveClock(),
		SimulatedSeconds: float64(s.now) / 1e9,
		Value:            finite(v),
		Passed:           ok,
	})
}

func (s *sim) progress(step string) {
	p := SimProgress{
		Iteration:        s.minLiveClock(),
		SimulatedSeconds: float64(s.now) / 1e9,
		Live:             s.live(),
		MessagesSent:     s.msgs,
		BytesSent:        s.bytes,
		Step:             step,
		TestLoss:         math.NaN(),
		TestAccuracy:     math.NaN(),
	}
	for _, n := range s.nodes {
		if n.alive {
			met := n.core.Evaluate(s.test)
			p.TestLoss, p.TestAccuracy = met.Loss, met.Accuracy
			break
		}
	}
	s.cfg.Progress(p)
}

// meanMetrics returns the mean test loss and accuracy over live nodes.
func (s *sim) meanMetrics() (loss, acc float64) {
	k := 0
	for _, n := range s.nodes {
		if n.alive {
			met := n.core.Evaluate(s.test)
			loss += met.Loss
			acc += met.Accuracy
			k++
		}
	}
	return loss / float64(k), acc / float64(k)
}

// undelivered counts the updates some live node holds and another lacks.
// Origins' clocks bound the updates that exist; below the smallest entry
// any live node has for an origin, every live node holds them all.
func (s *sim) undelivered() uint64 {
	var live []*simNode
	for _, n := range s.nodes {
		if n.alive {
			live = append(live, n)
		}
	}
	var count uint64
	for _, origin := range s.nodes {
		lo := uint64(math.MaxUint64)
		for _, n := range live {
			lo = min(lo, n.core.VectorClock().Get(origin.id))
		}
		for c := lo + 1; c <= origin.core.Clock(); c++ {
			holders := 0
			for _, n := range live {
				if n.core.VectorClock().Has(origin.id, c) {
					holders++
				}
			}
			if holders > 0 && holders < len(live) {
				count++
			}
		}
	}
	return count
}

// appliedTwice is, over all nodes, how many more updates a core has applied
// (on top of those its starting snapshot held) than the distinct updates it
// holds: nonzero only if one went in twice.
func (s *sim) appliedTwice() uint64 {
	var extra uint64
	for _, n := range s.nodes {
		base, applied, held := n.core.Ledger()
		if base+applied > held {
			extra += base + applied - held
		}
	}
	return extra
}

func finite(v float64) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0
	}
	return v
}
