package testnet

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/pnet"

	"github.com/sketchmesh/sketchmesh/codec"
	"github.com/sketchmesh/sketchmesh/dataset"
	"github.com/sketchmesh/sketchmesh/mesh"
	"github.com/sketchmesh/sketchmesh/model"
	"github.com/sketchmesh/sketchmesh/netmodel"
	"github.com/sketchmesh/sketchmesh/node"
)

// Config describes one testnet run.
type Config struct {
	Nodes int
	// Train is split into one shard per node after a seeded shuffle; Test is
	// what accuracy and loss are reported on.
	Train, Test *dataset.Dataset
	// Batches, when set, gives node i its mini-batches (data larger than
	// memory, streamed): Train then only names the data and gives the
	// model's dimension, and Batch is a row count.
	Batches func(node int) (StreamSource, error)
	// Training is what the nodes train; with Batches, Batch is a row
	// count.
	netmodel.Training
	// Topology is "halton" (the default: O(log P) links per node, updates
	// relayed along broadcast trees) or "full" (everyone sends to everyone).
	Topology string
	// Sites is "auto" (the default: on an emulated WAN, group nodes into
	// sites by measured round-trip time and build the site-aware overlay
	// when they fall into two or more, see sites.go) or "off" (the flat
	// Halton overlay). Only the halton topology has sites.
	Sites string
	// Factors selects sufficient factor broadcasting for softmax models.
	Factors node.FactorMode
	// RelayWindow is how long a node keeps collecting arrivals before it
	// forwards them, so relays batch, or mesh.AutoRelayWindow (see
	// mesh.DaemonConfig.RelayWindow).
	RelayWindow time.Duration
	// BudgetFromLinks makes each node's frame budget follow the throughput
	// it measures on its emulated links, as a real mesh does
	// (mesh.DaemonConfig.BudgetFromLinks), instead of Exchange.BudgetBytes.
	BudgetFromLinks bool
	// WAN shapes the links between nodes; the zero value is loopback TCP.
	WAN netmodel.LinkProfile
	// ComputeTime is extra time each iteration takes, emulating a heavier
	// model than the one trained.
	ComputeTime time.Duration
	// Stragglers is how many nodes (the last ones) run Slowdown times slower:
	// their computation and their ComputeTime are stretched by that factor.
	Stragglers int
	Slowdown   float64
	// EvalEvery is how often (in iterations) node 0 reports progress with a
	// test evaluation; 0 picks about 10 reports per run.
	EvalEvery int
	// Progress, when set, receives node 0's progress reports.
	Progress func(Progress)
	Logger   *slog.Logger
	// Sign makes every node sign its updates with its libp2p key and
	// verify everyone else's (mesh.KeyAuthenticator), in the mesh named
	// MeshName ("testnet" when empty).
	Sign     bool
	MeshName string
	// PSK, when set, makes the testnet a private network; AllowList gives
	// every host an allow list of the members.
	PSK       pnet.PSK
	AllowList bool
	// Robust screens incoming updates (norm bound, centered clipping).
	Robust node.RobustConfig
	// Attack, when set, runs a hostile peer of that kind (AttackKinds)
	// against the mesh while it trains; it turns on Sign, a PSK and
	// AllowList.
	Attack string
	// DeadAfter is the silence after which a node suspects a member (the
	// core's failure detector, in ticks of 100 ms); default 5 s, as `run`.
	DeadAfter time.Duration
	// StallTimeout ends a run in which no node's clock has moved for this
	// long (the report then says Stalled); default 60 s.
	StallTimeout time.Duration
	// Live, when set, is kept up to date for the live web view: every
	// node's state after each iteration and tick, node 0's curve, and the
	// final state once the run is over.
	Live *LiveView
	// JoinAt, when above 0, makes one more node join the mesh when node 0
	// reaches that iteration (see joiner.go); the donor-lie attack sets
	// it to a quarter of the iterations.
	JoinAt int
}

// Progress is one report from node 0 during a run.
type Progress struct {
	Iteration    uint64
	Elapsed      time.Duration
	TrainLoss    float64 // node 0's last mini-batch loss
	TestLoss     float64
	TestAccuracy float64 // NaN for regression
	TestAUC      float64 // NaN but for binary classifiers
	BytesSent    uint64  // all nodes, update streams, so far
}

// Validate checks cfg and fills defaults.
func (c *Config) Validate() error {
	switch {
	case c.Nodes < 1:
		return fmt.Errorf("nodes must be >= 1, got %d", c.Nodes)
	case c.Nodes > 256:
		return fmt.Errorf("nodes must be <= 256 for an in-process testnet, got %d", c.Nodes)
	case c.Batches == nil && c.Train != nil && len(c.Train.Rows) < c.Nodes:
		return fmt.Errorf("%d training rows cannot be shared by %d nodes", len(c.Train.Rows), c.Nodes)
	case c.Stragglers < 0 || c.Stragglers > c.Nodes:
		return fmt.Errorf("stragglers must be between 0 and the %d nodes, got %d", c.Nodes, c.Stragglers)
	case c.Stragglers > 0 && !(c.Slowdown >= 1) || math.IsInf(c.Slowdown, 0):
		return fmt.Errorf("slowdown must be a finite factor >= 1, got %v", c.Slowdown)
	case c.RelayWindow < 0 && c.RelayWindow != mesh.AutoRelayWindow:
		return fmt.Errorf("relay window must be >= 0 or auto, got %v", c.RelayWindow)
	case c.ComputeTime < 0:
		return fmt.Errorf("compute time must be >= 0, got %v", c.ComputeTime)
	}
	train := c.Train
	if c.Batches != nil {
		// Streamed rows are in the file, not in Train.
		if c.Batch < 1 || c.Train == nil {
			return fmt.Errorf("a streamed run needs Train for its name and dimension and a batch row count, got %v", c.Batch)
		}
		train = c.Test
	}
	if err := c.Training.Validate(train, c.Test); err != nil {
		return err
	}
	if err := netmodel.CheckTopology(&c.Topology); err != nil {
		return err
	}
	if c.Attack != "" {
		if c.Attack != quietMember && !slices.Contains(AttackKinds, c.Attack) {
			return fmt.Errorf("unknown attack %q (want one of %v)", c.Attack, AttackKinds)
		}
		hardenForAttack(c)
	}
	if _, err := node.NewRobust(c.Robust); err != nil {
		return err
	}
	if c.WAN.Name == "" {
		c.WAN.Name = "lan"
	}
	if err := netmodel.CheckSitesMode(&c.Sites); err != nil {
		return err
	}
	if c.EvalEvery <= 0 {
		c.EvalEvery = max(1, c.Iterations/10)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}

// batchRows turns the Batch setting into a row count for a shard
// (node.BatchRows).
func (c *Config) batchRows(shardRows int) int { return node.BatchRows(c.Batch, shardRows) }

// StreamSource is a node's stream of mini-batches (see Config.Batches).
type StreamSource interface {
	node.BatchSource
	// Rows is the number of rows the batches have held so far.
	Rows() uint64
	Close() error
}

type member struct {
	host *mesh.Host
	// net is what the member's daemon sends through: the host, behind the
	// emulated links of the run's WAN when it has one.
	net     mesh.Transport
	allow   *mesh.AllowList
	core    *node.Node
	shard   *dataset.Dataset
	batches StreamSource
	run     mesh.Result
	runErr  error
	// clock is the core's clock, for the stall watchdog.
	clock atomic.Uint64
	// links is the number of peers connected when the node finished its
	// iterations: the overlay's links, before the leave notices at the
	// end open streams to every member.
	links int
}

// batchSource is the member's stream as the core takes it: nil when it
// trains on its shard.
func (m *member) batchSource() node.BatchSource {
	if m.batches == nil {
		return nil
	}
	return m.batches
}

// trainRows is the number of rows the member trains on: its shard, or the
// rows its stream has given so far.
func (m *member) trainRows() int {
	if m.batches != nil {
		return int(m.batches.Rows())
	}
	return len(m.shard.Rows)
}

// Run starts the testnet, trains to the end and returns its report. When
// ctx ends first, it returns the report so far (Interrupted) with an
// error wrapping ctx's.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	mdl, err := model.NewModel(cfg.Model, cfg.L2, cfg.Train)
	if err != nil {
		return nil, err
	}
	cdc, err := codec.ByName(cfg.Codec)
	if err != nil {
		return nil, err
	}
	members, err := startHosts(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, m := range members {
			m.close()
		}
	}()

	ids := make([]string, len(members))
	for i, m := range members {
		ids[i] = m.host.ID()
	}
	sites, err := siteLabels(ctx, cfg, members)
	if err != nil {
		return nil, err
	}
	router := netmodel.NewSiteRouter(cfg.Topology, ids, sites)
	links := router
	if cfg.joinAt() > 0 {
		// A joiner makes every node send to every member (below).
		links = newRouter("full", ids)
	}
	if err := connect(ctx, members, links); err != nil {
		return nil, err
	}
	att, err := newAdversary(ctx, cfg, members)
	if err != nil {
		return nil, err
	}
	defer att.stop()
	memberIDs, router := att.members(ids), att.router(router)
	jn, err := startJoiner(ctx, cfg, members)
	if err != nil {
		return nil, err
	}
	// With a joiner, every node sends to every member it knows, so the
	// joiner is routed updates once admitted.
	var nodeRouter node.Router = router
	if jn != nil {
		defer jn.host.Close()
		nodeRouter = nil
	}
	newCore := func(c node.Config) (*node.Node, error) {
		c.Model, c.Codec, c.ErrorFeedback, c.Staleness = mdl, cdc, cfg.ErrorFeedback, cfg.Staleness
		c.Iterations, c.Seed, c.Router, c.Factors = uint64(cfg.Iterations), cfg.Seed, nodeRouter, cfg.Factors
		c.Sync = node.SyncConfig{SuspectTicks: cfg.suspectTicks(), DeadTicks: 4 * cfg.suspectTicks()}
		return node.New(c)
	}
	// The members' cores count their refusals in one tally; the joiner's
	// are left out of the reports, as they always were.
	rejected := &rejectTally{}
	shuffled := cfg.Train
	if cfg.Batches == nil {
		shuffled = cfg.Train.Shuffled(int64(cfg.Seed))
	}
	for i, m := range members {
		batchSize := 0
		if cfg.Batches != nil {
			if m.batches, err = cfg.Batches(i); err != nil {
				return nil, err
			}
			defer m.batches.Close()
			m.shard, batchSize = &dataset.Dataset{Name: fmt.Sprintf("%s[%d/%d]", cfg.Train.Name, i, cfg.Nodes)}, int(cfg.Batch)
		} else {
			m.shard = shuffled.Shard(i, cfg.Nodes)
			batchSize = cfg.batchRows(len(m.shard.Rows))
		}
		opt, err := model.NewOptimizer(cfg.Optimizer, cfg.LR, mdl.NumParams())
		if err != nil {
			return nil, err
		}
		auth, robust, err := cfg.nodeSecurity(i, ids[i])
		if err != nil {
			return nil, err
		}
		nc := node.Config{
			ID:        ids[i],
			Members:   memberIDs,
			Auth:      auth,
			Robust:    robust,
			Optimizer: opt,
			BatchSize: batchSize,
			Shard:     m.shard.Rows,
			Batches:   m.batchSource(),
			Tracer:    rejected,
		}
		cfg.Exchange.Apply(&nc)
		if m.core, err = newCore(nc); err != nil {
			return nil, err
		}
	}

	// The curve starts from the untrained model, at iteration 0.
	if cfg.Live != nil {
		cfg.Live.begin(cfg, members, router)
	}
	met0 := members[0].core.Evaluate(cfg.Test.Rows)
	p0 := Progress{TestLoss: met0.Loss, TestAccuracy: met0.Accuracy, TestAUC: met0.AUC}
	curve := []CurvePoint{curvePoint(p0)}
	if cfg.Live != nil {
		cfg.Live.point(p0)
	}
	// Node 0 takes each progress point's view and trains on; one evaluator
	// scores the views in order. Evaluated inline, a point held node 0 up
	// for as long as scoring the test rows takes (46 ms on news20.binary's
	// 7,532, 50 points a --compare run), and at staleness 0 every member
	// with it: more time than the exchanges of a run with local steps. The
	// scored points are reported from node 0's goroutine at its next step,
	// as they were when it scored them itself, and the last ones once the
	// nodes are done, so that reports never interleave with the nodes' logs.
	type pendingPoint struct {
		p    Progress
		view []float64
	}
	maxPoints := cfg.Iterations/max(cfg.EvalEvery, 1) + 2
	points, scored := make(chan pendingPoint, maxPoints), make(chan Progress, maxPoints)
	evaluated := make(chan struct{})
	go func() {
		defer close(evaluated)
		defer close(scored)
		for pp := range points {
			met := mdl.Evaluate(pp.view, cfg.Test.Rows)
			p := pp.p
			p.TestLoss, p.TestAccuracy, p.TestAUC = met.Loss, met.Accuracy, met.AUC
			curve = append(curve, curvePoint(p))
			scored <- p
		}
	}()
	report := func(p Progress) {
		if cfg.Live != nil {
			cfg.Live.point(p)
		}
		if cfg.Progress != nil {
			cfg.Progress(p)
		}
	}
	start := time.Now()
	var observed uint64
	observe := func(n *node.Node) {
		for len(scored) > 0 {
			report(<-scored)
		}
		t := n.Steps()
		if t == observed || t%uint64(cfg.EvalEvery) != 0 && t != uint64(cfg.Iterations) {
			return
		}
		observed = t
		points <- pendingPoint{view: slices.Clone(n.View()), p: Progress{
			Iteration: t,
			Elapsed:   time.Since(start),
			TrainLoss: n.Stats().LastLoss,
			BytesSent: totalBytes(members),
		}}
	}

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	watched := members
	if jn != nil {
		watched = append(slices.Clone(members), jn.member)
	}
	stalled := watchStall(runCtx, cancel, watched, cfg.stallTimeout())
	att.start(runCtx)
	// The overlay stays fixed: the testnet's links lose nothing and its
	// nodes never pull (Reliable), so a tree rebuilt while updates are in
	// flight (members leave at the end) would strand them. With a joiner,
	// every node sends to every live member, the joiner once admitted.
	overlay := func([]string, map[string]string) node.Router { return router }
	if jn != nil {
		overlay = func(live []string, _ map[string]string) node.Router { return node.NewFullMesh(live) }
	}
	var wg sync.WaitGroup
	if jn != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			jn.runErr = jn.join(runCtx, cfg, members, att, mdl, shuffled.Shard(0, cfg.Nodes), newCore)
			if jn.runErr != nil {
				cancel()
			}
		}()
	}
	for i, m := range members {
		pace := cfg.pace(i, observe)
		driver, err := mesh.NewDaemon(runCtx, mesh.DaemonConfig{
			Mesh: cfg.meshName(), Host: m.host, Transport: m.net, Node: m.core, Settings: cfg.settings(mdl),
			RelayWindow: cfg.RelayWindow, DeadAfter: cfg.DeadAfter, JoinTimeout: joinerJoinTimeout,
			Overlay:          overlay,
			OverlayBroadcast: true, Reliable: true, Progress: -1, Logger: nodeLogger(cfg.Logger),
			BudgetFromLinks: cfg.BudgetFromLinks,
			// Sites were measured before the run (siteLabels).
			Sites: "off",
			AfterTrain: func(n *node.Node, took time.Duration) {
				m.clock.Store(n.Steps())
				if n.Steps() == uint64(cfg.Iterations) {
					m.links = len(m.host.Libp2p().Network().Peers())
				}
				pace(n, took)
			},
			Observe: observer(cfg.Live, i),
		})
		if err != nil {
			return nil, fmt.Errorf("node %d: %w", i, err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if p := recover(); p != nil {
					m.runErr = fmt.Errorf("node %d panicked: %v", i, p)
					cancel()
				}
			}()
			m.run, m.runErr = driver.Run(runCtx)
			if m.runErr != nil {
				cancel()
			}
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	close(points)
	<-evaluated
	for p := range scored {
		report(p)
	}
	for _, m := range members {
		if m.runErr != nil && !errors.Is(m.runErr, context.Canceled) {
			return nil, m.runErr
		}
	}
	if jn != nil && jn.runErr != nil && !errors.Is(jn.runErr, context.Canceled) {
		return nil, jn.runErr
	}
	if err := ctx.Err(); err != nil {
		// The report so far: every node has stopped, so its state is
		// still read safely.
		if cfg.Live != nil {
			cfg.Live.finish(members, wall)
		}
		rep := buildReport(cfg, cdc, router, members, rejected.counts(), curve, wall)
		rep.Interrupted = true
		return rep, fmt.Errorf("testnet interrupted: %w", err)
	}
	// Node 0's last progress point was taken when it finished its own
	// iterations; with a staleness bound, peers' last updates arrived after.
	// The curve ends with the model node 0 holds when the run is done, at
	// the time it held it: the leave handshake that follows (a round trip
	// for the acknowledgements, and the other nodes' own) changes no model.
	met := members[0].core.Evaluate(cfg.Test.Rows)
	if n := len(curve); n == 0 || curve[n-1].TestLoss != met.Loss {
		p := Progress{
			Iteration:    members[0].core.Steps(),
			Elapsed:      finalElapsed(members[0].run.Finished, start, wall),
			TrainLoss:    members[0].core.Stats().LastLoss,
			TestLoss:     met.Loss,
			TestAccuracy: met.Accuracy,
			TestAUC:      met.AUC,
			BytesSent:    totalBytes(members),
		}
		curve = append(curve, curvePoint(p))
		if cfg.Live != nil {
			cfg.Live.point(p)
		}
	}
	if cfg.Live != nil {
		cfg.Live.finish(members, wall)
	}
	rep := buildReport(cfg, cdc, router, members, rejected.counts(), curve, wall)
	rep.Stalled = stalled.Load()
	rep.Attack = att.report(members, rejected.counts(), cfg.Iterations, jn.heldBy(cfg.Iterations))
	jn.check(rep.Attack, members, cfg.Iterations)
	if rep.Attack != nil {
		rep.Attack.Stalled = rep.Attack.Stalled || rep.Stalled
	}
	rep.FinalView = slices.Clone(members[0].core.View())
	return rep, nil
}

// finalElapsed is when, from start, a node held its final model: when it
// finished, or at the end of the run (wall) when it did not say.
func finalElapsed(finished, start time.Time, wall time.Duration) time.Duration {
	if finished.IsZero() || finished.Before(start) {
		return wall
	}
	return min(finished.Sub(start), wall)
}

func (c *Config) suspectTicks() int {
	d := c.DeadAfter
	if d <= 0 {
		d = 5 * time.Second
	}
	return max(1, int(d/(100*time.Millisecond)))
}

func (c *Config) stallTimeout() time.Duration {
	if c.StallTimeout <= 0 {
		return time.Minute
	}
	return c.StallTimeout
}

// watchStall cancels the run when no node's clock has moved for timeout,
// and reports it: a stalled mesh must end with a report, not hang.
func watchStall(ctx context.Context, cancel context.CancelFunc, members []*member, timeout time.Duration) *atomic.Bool {
	var stalled atomic.Bool
	clocks := func() uint64 {
		var sum uint64
		for _, m := range members {
			sum += m.clock.Load()
		}
		return sum
	}
	go func() {
		tick := time.NewTicker(min(time.Second, timeout/4))
		defer tick.Stop()
		last, since := clocks(), time.Now()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if c := clocks(); c != last {
				last, since = c, time.Now()
				continue
			}
			if time.Since(since) >= timeout {
				stalled.Store(true)
				cancel()
				return
			}
		}
	}()
	return &stalled
}

// pace returns node i's hook: it stretches the iteration to emulate compute
// time and stragglers, and on node 0 it reports progress.
func (c *Config) pace(i int, observe func(*node.Node)) func(*node.Node, time.Duration) {
	factor := 1.0
	if i >= c.Nodes-c.Stragglers {
		factor = c.Slowdown
	}
	return func(n *node.Node, took time.Duration) {
		extra := time.Duration((factor-1)*float64(took) + factor*float64(c.ComputeTime))
		if extra > 0 {
			time.Sleep(extra)
		}
		if i == 0 {
			observe(n)
		}
	}
}

// startHosts starts one libp2p host per node on 127.0.0.1 and connects every
// pair; with an emulated WAN, each member sends through a
// mesh.ShapedTransport that holds each message for its link.
func startHosts(ctx context.Context, cfg Config) ([]*member, error) {
	members := make([]*member, 0, cfg.Nodes)
	// index maps a peer id to its node number; shapers read it only after
	// every host has started.
	index := map[peer.ID]int{}
	fail := func(err error) ([]*member, error) {
		for _, m := range members {
			m.close()
		}
		return nil, err
	}
	for i := 0; i < cfg.Nodes; i++ {
		key, err := nodeKey(cfg.Seed, i)
		if err != nil {
			return fail(err)
		}
		hc := mesh.HostConfig{
			ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"},
			Key:         key,
			Logger:      cfg.Logger,
		}
		if err := cfg.secureHost(&hc); err != nil {
			return fail(err)
		}
		h, err := mesh.NewHost(hc)
		if err != nil {
			return fail(fmt.Errorf("node %d: %w", i, err))
		}
		m := &member{host: h, net: h, allow: hc.Allow}
		if cfg.WAN.Emulated() {
			m.net = mesh.NewShapedTransport(h, func(to peer.ID) mesh.LinkShape { return linkBetween(cfg.WAN, i, index[to]) }, 0)
		}
		members = append(members, m)
		index[h.Libp2p().ID()] = i
	}
	return members, nil
}

// close stops the member's emulated links, then its host.
func (m *member) close() {
	if s, ok := m.net.(*mesh.ShapedTransport); ok {
		s.Close()
	}
	_ = m.host.Close()
}

// nodeKey derives node i's identity from the run's seed. Peer ids decide the
// canonical order of updates and seed each node's sampling, so deriving them
// makes a testnet run reproducible from its seed.
func nodeKey(seed uint64, i int) (crypto.PrivKey, error) {
	var s [32]byte
	binary.LittleEndian.PutUint64(s[:], seed)
	binary.LittleEndian.PutUint64(s[8:], uint64(i))
	copy(s[16:], "sketchmesh-node")
	key, _, err := crypto.GenerateEd25519Key(rand.NewChaCha8(s))
	if err != nil {
		return nil, fmt.Errorf("derive key of node %d: %w", i, err)
	}
	return key, nil
}

// newRouter returns the overlay a topology names, without sites.
func newRouter(topology string, ids []string) netmodel.Router {
	return netmodel.NewSiteRouter(topology, ids, nil)
}

// connect dials every overlay link, so each node holds connections to its
// neighbours only.
func connect(ctx context.Context, members []*member, r netmodel.Router) error {
	byID := make(map[string]*member, len(members))
	for _, m := range members {
		byID[m.host.ID()] = m
	}

	for _, a := range members {
		for _, id := range r.Linked(a.host.ID()) {
			b := byID[id]
			info := peer.AddrInfo{ID: b.host.Libp2p().ID(), Addrs: b.host.Libp2p().Addrs()}
			if err := a.host.Connect(ctx, info); err != nil {
				return err
			}
		}
	}
	return nil
}

func totalBytes(members []*member) uint64 {
	var sum uint64
	for _, m := range members {
		sum += updateTraffic(m.net.Traffic()).BytesSent
	}
	return sum
}

// viewsIdentical reports whether every node holds bit-for-bit the same view.
func viewsIdentical(members []*member) bool {
	first := members[0].core.View()
	for _, m := range members[1:] {
		v := m.core.View()
		if len(v) != len(first) {
			return false
		}
		for i := range v {
			if math.Float64bits(v[i]) != math.Float64bits(first[i]) {
				return false
			}
		}
	}
	return true
}

// quietHandler passes on only records at minLevel or above: a testnet's
// nodes each log every membership change of every other (P² lines as the
// run ends and they leave), which its progress lines already tell.
type quietHandler struct {
	slog.Handler
	minLevel slog.Level
}

func (h quietHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.minLevel && h.Handler.Enabled(ctx, l)
}

func (h quietHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return quietHandler{h.Handler.WithAttrs(attrs), h.minLevel}
}

func (h quietHandler) WithGroup(name string) slog.Handler {
	return quietHandler{h.Handler.WithGroup(name), h.minLevel}
}

// nodeLogger is the logger of a testnet node's driver: warnings and errors
// only, unless the run logs at debug level.
func nodeLogger(l *slog.Logger) *slog.Logger {
	if l == nil {
		l = slog.Default()
	}
	if l.Enabled(context.Background(), slog.LevelDebug) {
		return l
	}
	return slog.New(quietHandler{l.Handler(), slog.LevelWarn})
}

// observer is node i's hook into the live view, or nil without one.
func observer(v *LiveView, i int) func(*node.Node, time.Duration) {
	if v == nil {
		return nil
	}
	return func(n *node.Node, blocked time.Duration) { v.observe(i, n, blocked, false) }
}
