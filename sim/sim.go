package sim

// The run loop: building the nodes, then popping events off the queue in
// virtual-time order and handing each to its node core, until every live
// member is done. See Run.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sketchmesh/sketchmesh/codec"
	"github.com/sketchmesh/sketchmesh/dataset"
	"github.com/sketchmesh/sketchmesh/model"
	"github.com/sketchmesh/sketchmesh/netmodel"
	"github.com/sketchmesh/sketchmesh/node"
)

// Run runs cfg as a discrete-event simulation and reports on it.
//
// # Event model
//
// Nodes are node.Node cores, built exactly as a real mesh builds them,
// dealt over Config.Workers workers (workers.go). Each worker pops its
// nodes' events from a heap ordered by (virtual time, sequence number), so
// simultaneous events keep the order in which they were scheduled, and the
// workers advance together in windows of the least link latency. Events
// are: a message arriving, an iteration
// finishing, a node's stall timer or anti-entropy timer firing, a delayed
// flush, a node's tick, a leaver going down, and a periodic check. A node whose
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
// Membership is the cores' own protocol, exactly as a real mesh runs it
// (node/liveness.go): every node ticks every Tick of virtual time; hellos,
// admits and leave notices are broadcast on the link to every other node
// up, and acknowledgements go back on their links, with the latency, loss
// and partitions of any message. A node that hears nothing of a member for
// DetectionDelay suspects it (the gate stops waiting, the member keeps its
// share of the step) and declares it dead four times later; one heard
// again is live again. Nothing tells a partition from a death but time,
// as in a real mesh. Each core rebuilds its overlay over the members it
// counts live (nodes with the same live set share one).
//
// join starts a new member from the snapshot of a live member, the donor,
// drawn from the seeded source among the members started before the step:
// the donor's core admits it (node.Node.Admit) and broadcasts the signed
// admit; the new core starts at the donor's rows with its admission, which
// its hellos carry, so a node the admit missed (dead or cut off at the
// time) learns of it, at the same entry, from its first hello that
// arrives. A joiner starts on its donor's side of any partition and trains
// up to Iterations like everyone else. leave makes a node's core send its
// signed notice to every member it counts live or suspected and resend it
// every heartbeat; the node stays up, training no more, until every notice
// is acknowledged or 3 s have passed. The cores' ticks ask for what they
// lack by the rule the daemon's cores follow (node/asking.go): a node that
// has waited at its gate for SyncTimeout asks the laggards for their
// updates (node.Node.SyncRequest), again every SyncTimeout while it waits,
// and every node runs anti-entropy every SyncInterval
// (node.Node.AntiEntropy); without them a lost message would stall the
// mesh.
//
// The run ends when every live node has run all iterations and holds every
// live member's updates, no update held by a live node is missing at
// another, and no node suspects a member any more (anti-entropy and the
// failure detector continue for up to 50 sync intervals to get there); or
// when no node has trained for 200 sync timeouts (reported as stalled).
//
// # Determinism
//
// All randomness comes from PCG sources seeded by cfg.Seed, one per worker
// and one for the script's steps, each drawn in its event order, and
// nothing in the event loop reads the wall clock (only WallSeconds does).
// The same configuration, seed and number of workers give the same events
// in the same order, hence the same TraceHash: an FNV-64a hash over every
// delivered and dropped message (time, ends, size), every iteration (time,
// node, clock, training loss bits), every scenario step, every verdict of a
// failure detector (time, node, member, suspected/dead/back) and every join
// (time, joiner, donor, snapshot clock). A failing seed replays
// exactly.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	wallStart := time.Now()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	heapBefore := liveHeap()
	s, err := newSim(cfg)
	if err != nil {
		return nil, err
	}
	if err := s.run(ctx); err != nil {
		return nil, err
	}
	r := s.report(time.Since(wallStart))
	heapAfter := liveHeap()
	runtime.KeepAlive(s)
	r.HeapBytesPerNode = float64(heapAfter-min(heapBefore, heapAfter)) / float64(len(s.nodes))
	return r, nil
}

// liveHeap is the heap in use after a collection.
func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// Event kinds.
const (
	evDeliver uint8 = iota
	evTrainDone
	evFlush
	evTick
	evCheck
	evGone     // a leaver stops: its notice was acknowledged, or it gave up
	evLinkFree // a busy link is free: its queue's next message starts (node is the receiver, from the sender)
)

// The causes a message of the update protocol leaves for, counted apart in
// the report (Report.MessagesBy).
const (
	causeOwnUpdate   = iota // with the node's own update, relays held then included
	causeWindow             // when a relay window closes
	causeTick               // on a tick, with no window open
	causeAtOnce             // as soon as it is queued (no relay window)
	causeMembership         // on a join, rejoin or leave
	causeSyncRequest        // requests for what a node lacks (node/asking.go)
	numCauses
)

var causeNames = [numCauses]string{"own_update", "window", "tick", "at_once", "membership_change", "sync_requests"}

type simNode struct {
	idx   int
	id    string
	core  *node.Node
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
	blocked    int64
	done       bool
	// flushArmed is set while relays wait in a window, window counting
	// the windows opened.
	flushArmed bool
	window     uint32
	// left is set for a node that left with notice: it never comes back.
	// It stays up (leaving) until its notice is acknowledged or it gives
	// up, training no more; last is its last clock, entry the clock it
	// started at.
	left, leaving bool
	last, entry   uint64
	// declaredDead holds the members this node's core declared dead.
	declaredDead map[string]bool
	// incarnation counts the node's rejoins (node.EventRejoin).
	incarnation int
}

type sim struct {
	cfg Config
	// p is the number of nodes the run will have started by its end (the
	// initial ones and the joiners); ids holds all their member ids.
	p     int
	ids   []string
	iters uint64
	nodes []*simNode
	index map[string]int32
	// workers run the nodes' events (workers.go); checks holds the run's
	// periodic checks. now is the time between windows, rng draws what
	// the script's steps choose, and trace hashes the steps and joins.
	workers  []*worker
	checks   simQueue
	checkSeq uint64
	now      int64
	rng      *rand.Rand
	trace    simTrace
	// lookahead is the least one-way latency, the length of a window.
	lookahead int64
	// queueLimit bounds each link's queue (Config.SendQueueBytes).
	queueLimit int
	lat        [][]int64
	bw         [][]float64
	net        netmodel.LinkProfile // with the scenario's loss, dup and reorder
	jitter     float64
	tick       int64
	timeout    int64
	interval   int64
	flushDly   int64

	steps    []simStep
	nextStep int
	test     []dataset.Row
	hops     float64
	diameter int
	cdcName  string

	// What new cores are built from.
	mdl      *model.Model
	cdc      codec.Codec
	shuffled *dataset.Dataset
	// overlayMu guards routers, keyed and flat: the cores of every worker
	// share them.
	overlayMu sync.Mutex
	// routers holds the overlays of the live sets nodes have, keyed by
	// the set and its site labels.
	routers map[string]netmodel.Router
	// keyed holds the overlays cores built, by their key
	// (node.Config.OverlayByKey): a core whose input has a key seen before
	// takes that overlay in O(1), where even a lookup in routers reads
	// the whole live set. flat holds those built while some member had no
	// label, by the live set alone: halton.BuildSites builds the flat
	// overlay then, whatever the other labels.
	keyed, flat map[uint64]node.Router
	joined      int
	// rejoins counts the new incarnations of nodes that fell behind the
	// frame history.
	rejoins int
	// retired holds the incarnations whose cores were dropped (replaced
	// by a rejoin, or gone for good: see retire), whose updates the live
	// nodes must still hold alike; retiredStats and retiredTwice are what
	// the report and appliedTwice read of those cores.
	retired      []incarnationSpan
	retiredStats node.SyncStats
	retiredTwice uint64
	// unbalanced names the retired cores whose ledger did not add up
	// (Node.Ledger: what their snapshot held and what they applied
	// against what they held).
	unbalanced []string
	// restartable marks the nodes a restart step names: their cores are
	// kept when they stop.
	restartable map[int]bool

	allDoneAt int64
	// doneHint is the node allDone found not done last (see there).
	doneHint            int
	stalled             bool
	stop                bool
	evalEvery, nextEval uint64
	assertions          []AssertionResult

	// labels is the site label each node announces, by its first member
	// id; nil when the overlay has no sites.
	labels map[string]string
	sites  int
}

func newSim(cfg Config) (*sim, error) {
	mdl, err := model.NewModel(cfg.Model, cfg.L2, cfg.Train)
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
		tick:      int64(cfg.Tick),
		interval:  int64(cfg.SyncInterval),
		flushDly:  int64(cfg.FlushDelay),
		test:      cfg.Test.Rows,
		cdcName:   cdc.Name(),
		allDoneAt: -1,
		evalEvery: uint64(max(1, cfg.Iterations/10)),
		mdl:       mdl,
		cdc:       cdc,
		routers:   map[string]netmodel.Router{},
		keyed:     map[uint64]node.Router{},
		flat:      map[uint64]node.Router{},
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
	s.queueLimit = cfg.SendQueueBytes
	s.lookahead = s.lat[0][0]
	for a := range s.lat {
		for _, l := range s.lat[a] {
			s.lookahead = min(s.lookahead, l)
		}
	}
	s.index = make(map[string]int32, p)
	width := len(strconv.Itoa(p - 1))
	s.ids = make([]string, p)
	for i := range s.ids {
		// Zero-padded, so the canonical (sorted) order is the node order.
		s.ids[i] = fmt.Sprintf("n%0*d", width, i)
		s.index[s.ids[i]] = int32(i)
	}
	s.shuffled = cfg.Train.Shuffled(int64(cfg.Seed))
	for id := range cfg.Workers {
		s.workers = append(s.workers, newWorker(s, id))
	}
	for i := range cfg.Nodes {
		s.nodes = append(s.nodes, &simNode{idx: i, id: s.ids[i], site: i % cfg.WAN.Sites, alive: true, slow: 1})
	}
	s.measureSites()
	router := s.overlay(s.ids[:cfg.Nodes], s.labels)
	s.hops, s.sites = router.MeanHops(), netmodel.SiteCount(router)
	s.diameter = diameter(router)
	s.cfg.fillDetection(s.diameter)
	cfg = s.cfg
	s.timeout = int64(cfg.SyncTimeout)
	if s.timeout == 0 {
		s.timeout = int64(syncTimeout(cfg, s.diameter))
	}
	if err := s.buildCores(); err != nil {
		return nil, err
	}
	return s, nil
}

// buildCores builds the run's initial cores, each worker's on a goroutine
// of its own: at P = 10,000, building them one after the other took half
// a minute. A core is built with its worker's shared parts (slot table,
// caches, pools) and with parts every worker reads, as during the run, so
// the cores are the same whichever goroutine runs ahead. The driver's
// status reports come from this goroutine.
func (s *sim) buildCores() error {
	var built atomic.Int64
	note := make(chan int)                // each 64th core built: a few hand-offs a run
	failed := make([]int, len(s.workers)) // the first node each could not build
	errs := make([]error, len(s.workers))
	var wg sync.WaitGroup
	for w := range s.workers {
		wg.Go(func() {
			for i := w; i < len(s.nodes); i += len(s.workers) {
				n := s.nodes[i]
				core, err := s.newCore(n.idx, nil, nil)
				if err != nil {
					failed[w], errs[w] = i, err
					return
				}
				n.core = core
				if k := built.Add(1); k%64 == 0 {
					note <- int(k)
				}
			}
		})
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	most := 0
	for {
		select {
		case k := <-note:
			if most = max(most, k); most < len(s.nodes) && s.wantsHeartbeat() {
				s.cfg.Progress(Progress{Heartbeat: true, Built: most, Live: most, TestLoss: math.NaN(), TestAccuracy: math.NaN()})
			}
		case <-done:
			// The error of the lowest node, as one goroutine would have met it.
			first := -1
			for w, err := range errs {
				if err != nil && (first < 0 || failed[w] < failed[first]) {
					first = w
				}
			}
			if first >= 0 {
				return errs[first]
			}
			return nil
		}
	}
}

// wantsHeartbeat asks the driver whether it wants a status report now.
func (s *sim) wantsHeartbeat() bool {
	return s.cfg.Heartbeat != nil && s.cfg.Progress != nil && s.cfg.Heartbeat()
}

// newCore builds node i's core: from scratch over the run's initial nodes,
// or from a snapshot with its admission.
func (s *sim) newCore(i int, start *node.Snapshot, admission *node.Admission) (*node.Node, error) {
	return s.newCoreAs(i, s.ids[i], start, admission)
}

// newCoreAs builds node i's core for member id (a new incarnation of node
// i when it rejoins).
func (s *sim) newCoreAs(i int, id string, start *node.Snapshot, admission *node.Admission) (*node.Node, error) {
	cfg := s.cfg
	w := s.workerOf(int32(i))
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
	nc := node.Config{
		ID:            id,
		Model:         s.mdl,
		Optimizer:     opt,
		Codec:         s.cdc,
		ErrorFeedback: cfg.ErrorFeedback,
		Staleness:     cfg.Staleness,
		Iterations:    s.iters,
		BatchSize:     node.BatchRows(cfg.Batch, len(shard.Rows)),
		Seed:          cfg.Seed,
		Shard:         shard.Rows,
		Overlay:       s.lazyOverlay,
		OverlayByKey:  s.keyedOverlay,
		OverlayBuilt:  s.keepOverlay,
		DecodeCache:   w.cache,
		SharedRows:    w.rows,
		Scratch:       &w.scratch,
		Queues:        &w.queues,
		Slots:         w.slots,
		Start:         start,
		Admission:     admission,
		Tracer:        &w.rejected,
	}
	if start == nil {
		nc.Members = s.ids[:cfg.Nodes]
	}
	nc.Sync = cfg.Sync
	// The core's own timers ask for what it lacks (node/asking.go), with
	// the floors this run's links give.
	nc.Sync.StallTicks, nc.Sync.EntropyTicks = s.ticks(s.timeout), s.ticks(s.interval)
	cfg.Exchange.Apply(&nc)
	core, err := node.New(nc)
	if err != nil {
		return nil, fmt.Errorf("node %d: %w", i, err)
	}
	if err := core.SetSite(s.labels[s.ids[i]]); err != nil {
		return nil, fmt.Errorf("node %d: %w", i, err)
	}
	return core, nil
}

// schedule queues an event between windows: a check on the run's queue,
// anything else on the queue of the worker that handles it.
func (s *sim) schedule(at int64, kind uint8, n, from int32, tag uint32, data []byte) {
	if kind == evCheck {
		s.checkSeq++
		s.checks.push(simEvent{at: at, seq: s.checkSeq, kind: kind})
		return
	}
	s.handler(kind, n, from).schedule(at, kind, n, from, tag, data)
}

func (s *sim) run(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("simulation not started: %w", err)
	}
	for i, n := range s.nodes {
		// Stagger the ticks so requests and hellos do not burst.
		s.schedule(s.tick*int64(i+1)/int64(len(s.nodes)), evTick, int32(i), 0, n.inc, nil)
	}
	s.schedule(s.interval, evCheck, 0, 0, 0, nil)
	if err := s.fireSteps(); err != nil {
		return err
	}
	for _, n := range s.nodes {
		s.workerOf(int32(n.idx)).advance(n)
	}
	for !s.stop {
		at, ok := s.nextEvent()
		if !ok {
			break
		}
		if len(s.checks) > 0 && s.checks[0].at == at {
			s.setNow(at)
			s.checks.pop()
			s.check()
			continue
		}
		end := at + max(s.lookahead, 1)
		if len(s.checks) > 0 {
			end = min(end, s.checks[0].at)
		}
		s.window(end)
		s.setNow(end)
		if err := s.betweenWindows(); err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("simulation interrupted at %.3f virtual seconds: %w", float64(s.now)/1e9, err)
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

// betweenWindows does what the last window asked of the run, worker by
// worker in order: the errors, stops and rejoins; then the script's steps
// and progress when a node trained, and the check for the end.
func (s *sim) betweenWindows() error {
	trained := false
	for _, w := range s.workers {
		if w.err != nil {
			return w.err
		}
		for _, n := range w.stops {
			if n.alive {
				s.stopNode(n)
			}
		}
		for _, n := range w.rejoins {
			if n.alive && n.core != nil && (n.core.Rejoining() == "" || !s.rejoin(n)) {
				w.tickNode(n)
			}
		}
		clear(w.stops)
		clear(w.rejoins)
		w.stops, w.rejoins = w.stops[:0], w.rejoins[:0]
		trained = trained || w.trained
		w.trained = false
	}
	if trained {
		if err := s.fireSteps(); err != nil {
			return err
		}
		if low := s.minLiveClock(); low >= s.nextEval && s.cfg.Progress != nil {
			s.progress("")
			for s.nextEval <= low {
				s.nextEval += s.evalEvery
			}
		}
	}
	if s.wantsHeartbeat() {
		s.cfg.Progress(s.status(""))
	}
	s.noteDone()
	if s.allDoneAt == s.now && s.undelivered() == 0 && s.settled() {
		// Every live node is done and holds every update: what the run
		// would do until the next periodic check is the members' hellos
		// of a mesh that trains no more, P² deliveries a heartbeat.
		s.stop = true
	}
	return nil
}

// handle runs one event of one of the worker's nodes.
func (w *worker) handle(ev simEvent) {
	switch ev.kind {
	case evDeliver:
		w.deliver(ev)
	case evTrainDone:
		if err := w.trainDone(ev); err != nil && w.err == nil {
			w.err = err
		}
	case evFlush:
		// A window the node's own update closed is void (from carries
		// the window's number).
		if n := w.nodes[ev.node]; n.alive && ev.tag == n.inc && n.flushArmed && uint32(ev.from) == n.window {
			n.flushArmed = false
			w.cause = causeWindow
			w.flush(n)
		}
	case evTick:
		if n := w.nodes[ev.node]; n.alive && ev.tag == n.inc {
			w.schedule(w.now+w.tick, evTick, ev.node, 0, ev.tag, nil)
			if n.core.Rejoining() != "" {
				// A rejoin builds a core from another node's snapshot:
				// between windows, which tick the node when it cannot
				// rejoin.
				w.rejoins = append(w.rejoins, n)
				return
			}
			w.tickNode(n)
		}
	case evLinkFree:
		w.linkFree(ev.from, ev.node)
	case evGone:
		if n := w.nodes[ev.node]; n.alive && n.leaving && ev.tag == n.inc {
			w.stops = append(w.stops, n)
		}
	}
}

// tickNode runs one tick of n's core and sends what it queued.
func (w *worker) tickNode(n *simNode) {
	n.core.Tick()
	w.cause = causeTick
	// Held relays, and what the tick queued with them, leave with the
	// node's own update or when their window closes; with neither due,
	// they leave now.
	if !n.flushArmed && !n.computing {
		w.flush(n)
	}
	w.advance(n)
}

// trainDone runs the iteration a node started ComputeTime ago.
func (s *worker) trainDone(ev simEvent) error {
	n := s.nodes[ev.node]
	if !n.alive || ev.tag != n.inc || !n.computing {
		return nil
	}
	n.computing = false
	t := n.core.Clock()
	stale := t - min(t, n.core.MinLiveEntry())
	// A later local step reads the copy its exchange's first step took
	// and passes no gate: the bound is on what an exchange starts from.
	exchangeStart := !n.core.MidExchange()
	if err := n.core.Train(); err != nil {
		if errors.Is(err, node.ErrGateClosed) {
			// A member came back while this node computed; it waits again,
			// and what it held for its own update leaves now.
			s.cause = causeOwnUpdate
			s.flush(n)
			s.advance(n)
			return nil
		}
		return fmt.Errorf("node %d at virtual %.3fs: %w", n.idx, float64(s.now)/1e9, err)
	}
	if exchangeStart {
		s.staleMax = max(s.staleMax, stale)
		s.staleSum += stale
		s.reads++
	}
	s.nodeIters++
	s.lastTrain = s.now
	s.trace.words(trTrain, uint64(s.now), uint64(n.idx), n.core.Clock(), math.Float64bits(n.core.Stats().LastLoss))
	// The held relays ride with the node's own update, and the window
	// they were waiting in closes.
	n.flushArmed = false
	s.cause = causeOwnUpdate
	s.flush(n)
	s.trained = true
	s.advance(n)
	return nil
}

// advance starts n's next iteration when its gate is open, and otherwise
// marks it stalled (arming its stall timer) or done.
func (s *worker) advance(n *simNode) {
	if !n.alive || n.computing || n.leaving {
		return
	}
	if n.core.Steps() < s.iters {
		if n.core.CanTrain() {
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
	if n.core.Done() {
		s.endStall(n)
		n.done = true
		return
	}
	s.beginStall(n)
}

func (s *worker) beginStall(n *simNode) {
	if n.stalled {
		return
	}
	n.stalled = true
	n.stallStart = s.now
}

func (s *worker) endStall(n *simNode) {
	if !n.stalled {
		return
	}
	n.stalled = false
	if n.core.Steps() < s.iters {
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

// allDone starts from the node that was not done at the last call: it runs
// after every tick and training step, and a scan from node 0 walked past
// every node done so far, O(P) each time near the end of a run.
func (s *sim) allDone() bool {
	k := len(s.nodes)
	if s.doneHint >= k {
		s.doneHint = 0
	}
	for i := range k {
		j := (s.doneHint + i) % k
		if n := s.nodes[j]; n.member() && !n.done {
			s.doneHint = j
			return false
		}
	}
	return true
}

// flush sends what n's core has queued: messages on their links, and each
// broadcast on the link to every other node up (the membership topic
// reaches every subscriber); it records the core's verdicts.
func (s *worker) flush(n *simNode) {
	rd := n.core.Ready()
	s.sendAll(n, rd.Messages)
	for _, b := range rd.Broadcast {
		for _, m := range s.nodes {
			if m != n && m.alive {
				s.send(int32(n.idx), int32(m.idx), b)
			}
		}
	}
	for _, e := range rd.Events {
		switch e.Kind {
		case node.EventDead:
			if n.declaredDead == nil {
				n.declaredDead = map[string]bool{}
			}
			n.declaredDead[e.Member] = true
			s.trace.words(trDetect, uint64(s.now), uint64(n.idx), uint64(s.index[e.Member]), 2)
		case node.EventSuspected:
			s.trace.words(trDetect, uint64(s.now), uint64(n.idx), uint64(s.index[e.Member]), 1)
		case node.EventBack:
			delete(n.declaredDead, e.Member)
			s.trace.words(trDetect, uint64(s.now), uint64(n.idx), uint64(s.index[e.Member]), 0)
		case node.EventDiverged:
			s.divergences = append(s.divergences, Divergence{SimulatedSeconds: float64(s.now) / 1e9, Node: n.id, Member: e.Member, Row: e.Clock})
		}
	}
	// A change of membership can leave the core waiting again (a member
	// came back behind it); any other event leaves it done. Clearing the
	// flag on every event left a done core marked not done until its next
	// tick, and under churn some node always was when the others ticked:
	// the run counted as stalled.
	if len(rd.Events) > 0 && n.done && !n.core.Done() {
		n.done = false
	}
	if n.leaving && n.core.LeaveAcknowledged() {
		s.stops = append(s.stops, n)
	}
}

func (s *worker) sendAll(n *simNode, msgs []node.Message) {
	for _, m := range msgs {
		to, ok := s.index[m.To]
		if !ok || int(to) == n.idx {
			continue
		}
		s.send(int32(n.idx), to, m.Data)
	}
}

// ticks is d in whole ticks of the node cores, rounded up, at least one.
func (s *sim) ticks(d int64) int { return int(max(1, (d+s.tick-1)/s.tick)) }

// finishedShort counts, over the nodes up at the end, the leavers whose
// updates up to their last clock a node lacks without its core having
// declared the leaver dead: those updates are part of the run's result.
func (s *sim) finishedShort() uint64 {
	var short uint64
	for _, n := range s.nodes {
		if !n.member() {
			continue
		}
		for _, m := range s.nodes {
			// A member that never heard of a leaver holds it at 0: it
			// lacks nothing if the leaver made no update past its entry
			// (one that joined as the run ended, say).
			if m.left && !n.declaredDead[m.id] && max(n.core.VectorClock().Get(m.id), m.entry) < m.last {
				short++
			}
		}
	}
	return short
}

// settled reports whether the membership has settled: no leaver still
// waits for acknowledgements of its notice (a run that ended then left
// members that had not heard it counting the leaver live), and no node
// suspects a member any more (each is live, dead or gone).
func (s *sim) settled() bool {
	for _, n := range s.nodes {
		if n.alive && n.leaving {
			return false
		}
		if !n.member() || n.core.SuspectsNone() {
			continue
		}
		for _, m := range s.nodes {
			if m != n && n.core.Suspected(m.id) {
				return false
			}
		}
	}
	return true
}

// minLiveClock is the slowest live node's clock, the clock scenario triggers
// follow.
func (s *sim) minLiveClock() uint64 {
	m := uint64(math.MaxUint64)
	for _, n := range s.nodes {
		if n.member() {
			m = min(m, n.core.Clock())
		}
	}
	return m
}

// member reports whether n is up and has not left: a leaver waiting for
// acknowledgements is up but no longer part of the run's result.
func (n *simNode) member() bool { return n.alive && !n.left }

// live counts the nodes up and not leaving.
func (s *sim) live() int {
	k := 0
	for _, n := range s.nodes {
		if n.member() {
			k++
		}
	}
	return k
}

func (s *sim) progress(step string) {
	p := s.status(step)
	p.Heartbeat = false
	for _, n := range s.nodes {
		if n.member() {
			met := n.core.Evaluate(s.test)
			p.TestLoss, p.TestAccuracy = met.Loss, met.Accuracy
			break
		}
	}
	s.cfg.Progress(p)
}

// status is a progress report of the run as it stands, without test
// metrics: a heartbeat.
func (s *sim) status(step string) Progress {
	sent := s.total()
	p := Progress{
		Iteration:        math.MaxUint64,
		SimulatedSeconds: float64(s.now) / 1e9,
		MessagesSent:     sent.msgs,
		BytesSent:        sent.bytes,
		MembershipBytes:  sent.memberBytes,
		Step:             step,
		TestLoss:         math.NaN(),
		TestAccuracy:     math.NaN(),
		Heartbeat:        true,
		Built:            len(s.nodes),
	}
	for _, n := range s.nodes {
		if n.member() {
			c := n.core.Clock()
			p.Iteration, p.Fastest = min(p.Iteration, c), max(p.Fastest, c)
			p.Live++
		}
	}
	return p
}

// meanMetrics returns the mean test loss and accuracy over live nodes.
func (s *sim) meanMetrics() (loss, acc float64) {
	k := 0
	for _, n := range s.nodes {
		if n.member() {
			met := n.core.Evaluate(s.test)
			loss += met.Loss
			acc += met.Accuracy
			k++
		}
	}
	return loss / float64(k), acc / float64(k)
}

func finite(v float64) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0
	}
	return v
}
