package mesh

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/sketchmesh/sketchmesh/halton"
	"github.com/sketchmesh/sketchmesh/model"
	"github.com/sketchmesh/sketchmesh/node"
)

// Daemon drives one node core in a live mesh. The core decides everything
// (training, relaying, membership, failure detection, admission, leave);
// the daemon is its driver: a ticker for the core's Tick, the host's inbox
// and the membership topic into Receive, join requests into Admit, and
// each Ready out to the network (messages on update streams, broadcasts on
// the topic), its events into logs and into the host (addresses of members,
// queues of members gone). One goroutine (Run's) owns the core; handlers
// hand it work through channels.
type Daemon struct {
	cfg DaemonConfig
	// net is cfg.Transport, or cfg.Host.
	net Transport
	// peers caches the peer of each member id seen (peerOf).
	peers map[string]peer.ID
	n     *node.Node
	log   *slog.Logger
	self  string
	ps    *pubsub.PubSub
	topic *pubsub.Topic
	sub   *pubsub.Subscription
	// joins answers the join protocol (joincheck.go).
	joins *JoinService
	heard chan []byte
	// round is an average of this node's time per iteration, updated at
	// each iteration only, for progress lines and sync pacing.
	round     time.Duration
	lastTrain time.Time
	stopped   chan struct{}
	lastEval  struct {
		loss     float64
		accuracy float64
	}
	// exchangeStart is the optimizer steps taken when the node's last
	// exchange ended: evaluations and checkpoints are due when an exchange
	// passes a multiple of theirs.
	exchangeStart uint64
	// exchangePeriod is an average of the time between the ends of two
	// exchanges (H local steps and the waits), and lastExchange when the
	// last one ended.
	exchangePeriod time.Duration
	lastExchange   time.Time
	// stepCompute is an average of one Train call's time (an optimizer
	// step's compute), frameBytes of this node's frame bytes per exchange,
	// and framesBefore the frame bytes sent when the last exchange ended.
	stepCompute  time.Duration
	frameBytes   float64
	framesBefore uint64
	blocked      time.Duration
	psCancel     context.CancelFunc
	// quorate is set once MinMembers were live: members that die or leave
	// later do not stop the others.
	quorate bool
	// aloneFrom is when the node last found itself the only live member;
	// zero while it has company.
	aloneFrom, aloneWarned time.Time
	// lossWatch warns when the test loss stalls or rises.
	lossWatch model.LossWatch
	// sites measures round trips for the site-aware overlay (sites.go).
	sites siteProbe
}

// The daemon is the join service's driver.
func (a *Daemon) core() *node.Node { return a.n }
func (a *Daemon) training() bool   { return a.quorate && !a.n.Done() }
func (a *Daemon) admitted()        { a.handleReady() }

// TopicName is the membership topic of a mesh.
func TopicName(mesh string) string { return "/sketchmesh/" + mesh + "/members/1" }

// addrTTL is how long addresses a member announced are kept: they are
// refreshed by its hellos, and forgotten when it goes.
const addrTTL = 10 * time.Minute

// NewDaemon sets up membership over GossipSub and the join handler. Call
// Run to start.
func NewDaemon(ctx context.Context, cfg DaemonConfig) (*Daemon, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	a := &Daemon{
		cfg: cfg, n: cfg.Node, self: cfg.Node.ID(),
		log:     cfg.Logger.With("self", shortMember(cfg.Node.ID())),
		heard:   make(chan []byte, 256),
		stopped: make(chan struct{}),
		net:     cfg.Transport,
		peers:   map[string]peer.ID{},
		// A node resumed from a checkpoint counts from where it is.
		exchangeStart: cfg.Node.Steps(),
	}
	if a.net == nil {
		a.net = cfg.Host
	}
	selfPeer, err := a.peerOf(a.self)
	if err != nil {
		return nil, err
	}
	if selfPeer != a.net.Self() {
		return nil, fmt.Errorf("daemon: member %s does not run on host %s", a.self, a.net.Self())
	}
	a.psCancel = func() {}
	if !cfg.OverlayBroadcast {
		if err := a.joinTopic(ctx); err != nil {
			return nil, err
		}
	}
	a.configureCore()
	for _, p := range cfg.Peers {
		if p.Member != a.self {
			a.learnAddrs(p.Member, p.Addrs)
		}
	}
	// This node's own earlier incarnations are gone, whatever the snapshot
	// it started from says.
	for _, m := range a.n.Members() {
		if p, err := a.peerOf(m); err == nil && p == selfPeer && m != a.self {
			a.n.DeclareDead(m)
		}
	}
	for _, m := range a.n.Live() {
		if p, err := a.peerOf(m); err == nil && m != a.self {
			a.net.addMember(p)
		}
	}
	a.joins = NewJoinService(cfg.Host, cfg.Mesh, cfg.Settings, cfg.JoinTimeout, a.log)
	return a, nil
}

// joinTopic starts GossipSub and subscribes to the membership topic.
func (a *Daemon) joinTopic(ctx context.Context) error {
	topicName := TopicName(a.cfg.Mesh)
	// GossipSub outlives a stop request long enough to carry the leave
	// notice; Run ends it.
	psCtx, psCancel := context.WithCancel(context.WithoutCancel(ctx))
	a.psCancel = psCancel
	ps, err := pubsub.NewGossipSub(psCtx, a.cfg.Host.Libp2p(),
		pubsub.WithPeerScore(scoreParams(topicName), scoreThresholds()),
		pubsub.WithFloodPublish(true),
		pubsub.WithPeerOutboundQueueSize(256),
		pubsub.WithValidateQueueSize(256),
		pubsub.WithMaxMessageSize(node.MaxAnnouncementBytes+1024),
	)
	if err != nil {
		psCancel()
		return fmt.Errorf("start gossipsub: %w", err)
	}
	if err := ps.RegisterTopicValidator(topicName, validateAnnouncement); err != nil {
		psCancel()
		return fmt.Errorf("register membership validator: %w", err)
	}
	if a.topic, err = ps.Join(topicName); err != nil {
		psCancel()
		return fmt.Errorf("join membership topic: %w", err)
	}
	if a.sub, err = a.topic.Subscribe(pubsub.WithBufferSize(256)); err != nil {
		psCancel()
		return fmt.Errorf("subscribe to membership topic: %w", err)
	}
	a.ps = ps
	return nil
}

// stallFloor is the least a node waits at its gate before it asks the
// members holding it back for their updates.
const stallFloor = 200 * time.Millisecond

// configureCore gives the core what the daemon decides: its timeouts in
// ticks of cfg.Tick, the overlay, and this host's addresses.
func (a *Daemon) configureCore() {
	ticks := func(d time.Duration) int { return max(1, int((d+a.cfg.Tick-1)/a.cfg.Tick)) }
	suspect := ticks(a.cfg.DeadAfter)
	a.n.SetTiming(ticks(a.cfg.Heartbeat), suspect, 4*suspect)
	if !a.cfg.Reliable {
		// The core asks for what it lacks on its ticks (node/asking.go):
		// stuck at its gate for stallFloor or three iteration periods, and
		// anti-entropy every four heartbeats.
		a.n.SetAskTiming(ticks(stallFloor), 4*ticks(a.cfg.Heartbeat), 3)
	}
	a.n.SetOverlay(a.overlay)
	a.n.SetAddrs(a.addrStrings())
}

// overlay is the router over the live members (node.Config.Overlay): the
// site-aware Halton overlay over the site labels members announce, which
// is the flat one while they announce one site or none.
func (a *Daemon) overlay(live []string, site map[string]string) node.Router {
	if a.cfg.Overlay != nil {
		return a.cfg.Overlay(live, site)
	}
	if a.cfg.Topology == "full" {
		return node.NewFullMesh(live)
	}
	return halton.BuildSites(live, site)
}

// validateAnnouncement is the membership topic's validator: what does not
// parse is rejected and counts against the sender's score. Signatures and
// membership are the core's to check: it knows who is a member.
func validateAnnouncement(_ context.Context, _ peer.ID, m *pubsub.Message) pubsub.ValidationResult {
	if _, err := node.DecodeAnnouncement(m.Data); err != nil {
		return pubsub.ValidationReject
	}
	return pubsub.ValidationAccept
}

var loopbackNets = func() []*net.IPNet {
	var out []*net.IPNet
	for _, s := range []string{"127.0.0.0/8", "::1/128"} {
		_, n, _ := net.ParseCIDR(s)
		out = append(out, n)
	}
	return out
}()

// scoreParams scores peers on the membership topic: invalid messages cost
// a lot, first deliveries earn a little, and many peers behind one IP are
// penalised except on loopback, where a local testnet runs them all.
func scoreParams(topic string) *pubsub.PeerScoreParams {
	return &pubsub.PeerScoreParams{
		Topics: map[string]*pubsub.TopicScoreParams{topic: {
			TopicWeight:                    1,
			TimeInMeshWeight:               0.01,
			TimeInMeshQuantum:              time.Second,
			TimeInMeshCap:                  10,
			FirstMessageDeliveriesWeight:   1,
			FirstMessageDeliveriesDecay:    0.5,
			FirstMessageDeliveriesCap:      10,
			InvalidMessageDeliveriesWeight: -100,
			InvalidMessageDeliveriesDecay:  0.5,
		}},
		AppSpecificScore:            func(peer.ID) float64 { return 0 },
		IPColocationFactorWeight:    -10,
		IPColocationFactorThreshold: 8,
		IPColocationFactorWhitelist: loopbackNets,
		BehaviourPenaltyWeight:      -1,
		BehaviourPenaltyDecay:       0.9,
		DecayInterval:               time.Second,
		DecayToZero:                 0.01,
		RetainScore:                 10 * time.Minute,
	}
}

func scoreThresholds() *pubsub.PeerScoreThresholds {
	return &pubsub.PeerScoreThresholds{
		GossipThreshold:             -100,
		PublishThreshold:            -200,
		GraylistThreshold:           -400,
		AcceptPXThreshold:           10,
		OpportunisticGraftThreshold: 5,
	}
}

func shortMember(m string) string {
	id, inc, _ := strings.Cut(m, "/")
	if len(id) > 8 {
		id = id[len(id)-8:]
	}
	if inc != "" {
		return id + "/" + inc
	}
	return id
}

// learnAddrs puts a member's addresses in the peerstore for addrTTL, so
// streams to it can be opened; a non-member's are never kept.
func (a *Daemon) learnAddrs(member string, addrs []string) { learnAddrs(a.cfg.Host, member, addrs) }

// addrStrings returns the host's listen addresses as strings.
func (a *Daemon) addrStrings() []string { return hostAddrs(a.cfg.Host) }

// Run trains until the node has run its iterations and holds everyone's
// last updates, or until ctx ends; then it leaves with notice (checkpoint,
// leave notice acknowledged by the live members or LeaveTimeout, last
// sends). A stop through ctx is not an error.
func (a *Daemon) Run(ctx context.Context) (Result, error) {
	start := time.Now()
	defer close(a.stopped)
	defer a.joins.Stop(a, "this member stopped")
	defer a.psCancel()
	if a.sub != nil {
		lctx, cancelListen := context.WithCancel(context.WithoutCancel(ctx))
		defer cancelListen()
		go a.listen(lctx)
		defer a.sub.Cancel()
	}

	inbox := a.net.Inbox()
	tick := time.NewTicker(a.cfg.Tick)
	defer tick.Stop()
	var lastProgress, lastMetrics, blockedSince time.Time
	lastProgress = start
	var window *time.Timer
	if a.cfg.RelayWindow > 0 || a.cfg.RelayWindow == AutoRelayWindow {
		window = time.NewTimer(a.relayWindow())
		defer window.Stop()
	}
	flush := func() {
		if window != nil && a.n.HasReady() {
			window.Reset(a.relayWindow())
		collect:
			for {
				select {
				case m := <-inbox:
					a.receive(m)
					// An arrival that opens the gate ends the window:
					// what it collected leaves with the update the node
					// trains now.
					if a.quorate && a.n.CanTrain() && !pacedAt(a.cfg.MinIteration, a.lastTrain, time.Now()) {
						return
					}
				case <-window.C:
					break collect
				case <-ctx.Done():
					break collect
				}
			}
		}
		a.handleReady()
	}
	for {
		// Handle everything that is waiting before deciding what to do.
		for drained := false; !drained; {
			select {
			case m := <-inbox:
				a.receive(m)
			case data := <-a.heard:
				a.n.Receive("", data)
			case call := <-a.joins.calls:
				a.joins.Serve(a, call)
			case <-tick.C:
				a.tick()
			default:
				drained = true
			}
		}
		now := time.Now()
		if now.Sub(lastMetrics) >= a.cfg.Heartbeat {
			// Addresses change as relays grant reservations; hellos carry
			// the current ones.
			a.n.SetAddrs(a.addrStrings())
			a.measureSites(ctx, now)
			a.checkAlone(now)
			a.metrics()
			lastMetrics = now
		}
		if a.cfg.Progress > 0 && now.Sub(lastProgress) >= a.cfg.Progress {
			a.progress()
			lastProgress = now
		}
		// Relays collected while the node can train now leave with its own
		// update, which closes the window (below): one message per next
		// hop instead of one for the relays and one for the update.
		if !(a.quorate && a.n.CanTrain() && !pacedAt(a.cfg.MinIteration, a.lastTrain, now)) {
			flush()
		}
		a.joins.ServeHeld(a, now)
		if a.n.Rejoining() != "" {
			a.joins.DropHeld(a, "this member fell behind the frame history and is rejoining")
			if err := a.rejoin(ctx); err != nil {
				return a.result(start, false), err
			}
			continue
		}
		if a.finished() {
			return a.finish(ctx, start, false)
		}
		if ctx.Err() != nil {
			return a.finish(ctx, start, true)
		}
		paced := pacedAt(a.cfg.MinIteration, a.lastTrain, now)
		if !a.quorate && len(a.n.Live()) >= a.cfg.MinMembers && a.meshTraining() {
			a.quorate = true
			if !blockedSince.IsZero() {
				blockedSince = now // waiting for MinMembers is not blocking
			}
		}
		if !paced && a.quorate && a.n.CanTrain() {
			if !blockedSince.IsZero() {
				// The wait for --min-iteration-time is padding, not
				// blocking: only the time past it counts.
				from := blockedSince
				if padEnd := a.lastTrain.Add(a.cfg.MinIteration); a.cfg.MinIteration > 0 && padEnd.After(from) {
					from = padEnd
				}
				a.blocked += max(0, now.Sub(from))
				blockedSince = time.Time{}
			}
			if err := a.train(); err != nil {
				return a.result(start, false), err
			}
			a.handleReady()
			continue
		}
		var pace *time.Timer
		var paceC <-chan time.Time
		if paced && a.n.CanTrain() {
			pace = time.NewTimer(a.cfg.MinIteration - now.Sub(a.lastTrain))
			paceC = pace.C
		} else if blockedSince.IsZero() {
			blockedSince = now
		}
		select {
		case m := <-inbox:
			a.receive(m)
		case data := <-a.heard:
			a.n.Receive("", data)
		case call := <-a.joins.calls:
			a.joins.Serve(a, call)
		case <-tick.C:
			a.tick()
		case <-paceC:
		case <-ctx.Done():
		}
		if pace != nil {
			pace.Stop()
		}
	}
}

// relayWindow is the length of the next relay window (see
// DaemonConfig.RelayWindow).
func (a *Daemon) relayWindow() time.Duration {
	if a.cfg.RelayWindow == AutoRelayWindow {
		return autoRelayWindow(a.round)
	}
	return a.cfg.RelayWindow
}

// pacedAt reports whether --min-iteration-time holds the next step at now.
func pacedAt(minIteration time.Duration, lastTrain, now time.Time) bool {
	return minIteration > 0 && now.Sub(lastTrain) < minIteration
}

// handleReady carries out what the core asks: messages to members,
// announcements to the topic, membership events into logs and the host.
func (a *Daemon) handleReady() {
	rd := a.n.Ready()
	// Events first: a member gone has its queue dropped (Host.Forget)
	// before this round's messages are queued, so the acknowledgement of
	// its leave notice goes out; a member joined has its addresses known
	// before anything is sent to it.
	for _, e := range rd.Events {
		a.onEvent(e)
	}
	for _, m := range rd.Messages {
		a.send(m)
	}
	for _, b := range rd.Broadcast {
		a.publish(b)
	}
}

// onEvent logs a membership change and applies it to the host.
func (a *Daemon) onEvent(e node.Event) {
	who := shortMember(e.Member)
	p, _ := a.peerOf(e.Member)
	ticks := func(n uint64) time.Duration { return time.Duration(n) * a.cfg.Tick }
	switch e.Kind {
	case node.EventJoined:
		a.learnAddrs(e.Member, a.n.Addrs(e.Member))
		a.net.addMember(p)
		a.log.Info("member joined", "member", who, "entry", e.Clock, "admitted_by", shortMember(e.By), "live", len(a.n.Live()))
	case node.EventBack:
		a.learnAddrs(e.Member, a.n.Addrs(e.Member))
		a.log.Info("member back", "member", who, "clock", e.Clock)
	case node.EventSuspected:
		if e.Withholding {
			a.log.Warn("member suspected: it says it is past the clock this node needs, but its updates do not come; the gate no longer waits for it", "member", who, "clock", e.Clock)
			break
		}
		a.log.Warn("member suspected: the gate no longer waits for it", "member", who, "silent_for", ticks(e.Silent), "clock", e.Clock)
	case node.EventDead:
		a.forget(e.Member)
		if e.Waiting {
			a.log.Warn("member left but its last updates never arrived; no longer waiting for them", "member", who, "silent_for", ticks(e.Silent))
			break
		}
		a.log.Warn("member declared dead", "member", who, "silent_for", ticks(e.Silent), "clock", e.Clock)
	case node.EventLeft:
		if !e.Waiting {
			a.forget(e.Member)
		}
		a.log.Info("member left", "member", who, "last_clock", e.Clock, "waiting_for_updates", e.Waiting)
	case node.EventSuperseded:
		a.log.Info("member replaced by a new incarnation", "old", who, "new", shortMember(e.By))
	case node.EventLeaveAcked:
		a.log.Debug("leave acknowledged", "member", who)
	case node.EventAddrs:
		a.learnAddrs(e.Member, a.n.Addrs(e.Member))
	case node.EventDiverged:
		a.log.Warn("view diverged: a member's digest of a committed row differs from this node's; the replicas have drifted apart",
			"member", who, "row", e.Clock, "divergences", a.n.SyncStats().ViewDivergence)
	}
}

// meshTraining reports whether the mesh has begun to train, so that a
// joiner admitted while the founder still waits for --wait-members waits
// with it: a founder (fresh or resumed), a joiner that starts above clock
// 0, one that has heard of a member above its entry, or one with no other
// live member left to wait for, may train.
func (a *Daemon) meshTraining() bool {
	entry := a.n.Entry()
	if len(a.cfg.Peers) == 0 || entry > 0 || len(a.n.Live()) <= 1 {
		return true
	}
	return a.n.HeardAbove(entry)
}

// finished reports whether a bounded run is over: all iterations run and
// every live member's last update in.
func (a *Daemon) finished() bool {
	return a.cfg.Settings.Iterations > 0 && a.n.Done()
}

// tick advances the core's clock of ticks, and shows the core to Observe.
func (a *Daemon) tick() {
	a.n.Tick()
	a.observe()
}

func (a *Daemon) observe() {
	if a.cfg.Observe != nil {
		a.cfg.Observe(a.n, a.blocked)
	}
}

func (a *Daemon) train() error {
	started := time.Now()
	if err := a.n.Train(); err != nil {
		return fmt.Errorf("train: %w", err)
	}
	took := time.Since(started)
	a.stepCompute = ewma(a.stepCompute, took)
	if a.cfg.AfterTrain != nil {
		a.cfg.AfterTrain(a.n, took)
	}
	a.observe()
	if !a.lastTrain.IsZero() {
		a.round = ewma(a.round, started.Sub(a.lastTrain))
	}
	a.lastTrain = time.Now()
	// Evaluations and checkpoints count optimizer steps, as their flags
	// do, and come at the end of an exchange: with local steps the clock
	// stays put for H steps (each was evaluated and checkpointed H times),
	// and a checkpoint taken mid-exchange would hold none of its steps.
	if a.n.MidExchange() {
		return nil
	}
	a.followLinks()
	steps := a.n.Steps()
	from := a.exchangeStart
	a.exchangeStart = steps
	if crossed(from, steps, a.cfg.EvalEvery) {
		a.evaluate()
	}
	if crossed(from, steps, a.cfg.CheckpointEvery) {
		a.checkpoint()
	}
	return nil
}

// followLinks, at the end of an exchange, sets the core's frame budget
// and the pace of its answers from the throughput measured on the links to
// its next hops (DaemonConfig.BudgetFromLinks).
func (a *Daemon) followLinks() {
	meter, ok := a.net.(interface{ LinkRate(peer.ID) float64 })
	if !a.cfg.BudgetFromLinks || !ok {
		return
	}
	now, sent := time.Now(), a.n.Stats().FrameBytes
	if !a.lastExchange.IsZero() {
		a.exchangePeriod = ewma(a.exchangePeriod, now.Sub(a.lastExchange))
	}
	a.frameBytes = ewma(a.frameBytes, float64(sent-a.framesBefore))
	a.lastExchange, a.framesBefore = now, sent
	hops := a.n.Relays(a.self)
	slowest, roundTrip := 0.0, time.Duration(0)
	for _, hop := range hops {
		p, err := a.peerOf(hop)
		if err != nil {
			continue
		}
		if r := meter.LinkRate(p); r > 0 && (slowest == 0 || r < slowest) {
			slowest = r
		}
		roundTrip = max(roundTrip, a.sites.rtt[hop]) // measured for the sites, when they are
	}
	// The period AutoBudget shares is the exchange's without the link:
	// the measured one less the time this node's frames took on the
	// slowest link (on a saturated link the measured period is that
	// time, and a budget from it would keep whatever frames are sent),
	// and at least the exchange's compute and the longest round trip to
	// a next hop, as AutoBudget's period is on modelled links.
	frames := node.FramesPerLink(len(a.n.Live()), len(hops))
	onLink := time.Duration(0)
	if slowest > 0 {
		onLink = time.Duration(frames * a.frameBytes / slowest * float64(time.Second))
	}
	period := max(a.exchangePeriod-onLink, a.stepCompute*time.Duration(a.n.LocalSteps()), roundTrip)
	budget := node.AutoBudget(slowest, period, frames, a.n.LeastBudget())
	if before := a.n.Budget(); budget != before {
		if err := a.n.SetBudget(budget); err != nil {
			a.log.Warn("frame budget from the measured links refused", "budget_bytes", budget, "err", err)
			return
		}
		level := slog.LevelDebug
		if before == 0 || budget == 0 {
			level = slog.LevelInfo
		}
		a.log.Log(context.Background(), level, "frame budget follows the links", "budget_bytes", budget,
			"slowest_link_bytes_per_second", int64(slowest), "exchange_period", period.Round(time.Millisecond))
	}
	a.n.SetReplyRate(int(slowest * a.cfg.Tick.Seconds()))
}

func (a *Daemon) evaluate() {
	if len(a.cfg.Test) == 0 {
		return
	}
	m := a.n.Evaluate(a.cfg.Test)
	a.lastEval.loss, a.lastEval.accuracy = m.Loss, m.Accuracy
	if a.cfg.LiveView != nil {
		a.cfg.LiveView.point(LivePoint(a.n.Steps(), time.Since(a.cfg.LiveView.start), a.net.Traffic().BytesSent, a.n.Stats().LastLoss, m))
	}
	if msg := a.lossWatch.Observe(m.Loss); msg != "" {
		a.log.Warn(msg, "iteration", a.n.Steps(), "lr", a.cfg.Settings.LearningRate)
	}
	if a.cfg.Evaluated != nil {
		a.cfg.Evaluated(a.n, m.Loss)
	}
}

// ewma folds sample into a running mean (a tenth of its weight), the first
// sample taken as it is.
func ewma[T time.Duration | float64](mean, sample T) T {
	if mean == 0 {
		return sample
	}
	return (9*mean + sample) / 10
}

// crossed reports whether a multiple of every (> 0) lies in (from, to]: an
// exchange that took the steps from+1 to to passed one.
func crossed(from, to, every uint64) bool {
	return every > 0 && to/every > from/every
}

func (a *Daemon) checkpoint() {
	if a.cfg.Checkpoint == nil {
		return
	}
	if err := a.cfg.Checkpoint(a.n); err != nil {
		a.log.Error("checkpoint failed; training goes on", "clock", a.n.Clock(), "err", err)
	}
}

// progress logs a progress line, once training has begun: before, there
// is no loss to show.
func (a *Daemon) progress() {
	if a.lastTrain.IsZero() {
		return
	}
	st := a.n.Stats()
	a.log.Info("progress", "clock", a.n.Clock(), "live", len(a.n.Live()), "members", len(a.n.Members()),
		"loss", Sig4(st.LastLoss), "test_loss", Sig4(a.lastEval.loss), "test_accuracy", Sig4(a.lastEval.accuracy),
		"blocked", a.blocked.Round(time.Millisecond), "round", a.round.Round(time.Microsecond))
}

// receive hands one arrival to the core under the member id of its sender:
// the newest incarnation on the sending peer (libp2p authenticates peers),
// or the bare peer id of a non-member, whose updates the core refuses.
func (a *Daemon) receive(m Inbound) {
	from := a.n.MemberOf(m.From)
	if from == "" {
		from = m.From
	}
	before := a.n.Rejections()
	a.n.Receive(from, m.Data)
	if a.cfg.OverlayBroadcast && node.IsAnnouncement(m.Data) && a.n.Rejections() == before {
		a.forwardAnnouncement(m)
	}
}

// forwardAnnouncement passes an accepted hello or admit on down its
// signer's overlay tree (OverlayBroadcast).
func (a *Daemon) forwardAnnouncement(m Inbound) {
	ann, err := node.DecodeAnnouncement(m.Data)
	if err != nil || (ann.Kind != node.KindHello && ann.Kind != node.KindAdmit) || ann.Signer == a.self {
		return
	}
	for _, hop := range a.n.Relays(ann.Signer) {
		if p, err := a.peerOf(hop); err == nil && p.String() != m.From {
			a.net.SendTo(p, m.Data)
		}
	}
}

func (a *Daemon) send(m node.Message) {
	p, err := a.peerOf(m.To)
	if err != nil {
		return
	}
	a.net.SendTo(p, m.Data)
}

func (a *Daemon) publish(data []byte) {
	if a.cfg.OverlayBroadcast {
		for _, hop := range a.n.Relays(a.self) {
			a.send(node.Message{To: hop, Data: data})
		}
		return
	}
	if err := a.topic.Publish(context.Background(), data); err != nil {
		a.log.Warn("membership announcement not published", "err", err)
	}
}

// listen moves announcements from the subscription to the loop.
func (a *Daemon) listen(ctx context.Context) {
	for {
		m, err := a.sub.Next(ctx)
		if err != nil {
			return
		}
		if m.ReceivedFrom == a.net.Self() && m.GetFrom() == a.net.Self() {
			continue
		}
		select {
		case a.heard <- m.Data:
		case <-ctx.Done():
			return
		case <-a.stopped:
			return
		}
	}
}

// forget drops what the host still queues for member m, gone or dead
// (Host.Forget), unless m's peer runs a newer incarnation.
func (a *Daemon) forget(m string) {
	p, err := a.peerOf(m)
	if err != nil {
		return
	}
	if cur := a.n.MemberOf(p.String()); cur == m || cur == "" {
		a.net.Forget(p)
	}
}

// deadAfter is the core's current suspicion timeout as a duration.
func (a *Daemon) deadAfter() time.Duration {
	return time.Duration(a.n.SuspectAfter()) * a.cfg.Tick
}

// checkAlone warns, once per DeadAfter, while the node has no live member
// besides itself, or none it is connected to: it must never train alone
// while believing it is in a mesh.
func (a *Daemon) checkAlone(now time.Time) {
	live := len(a.n.Live()) > 1
	if live && a.reachable() {
		a.aloneFrom = time.Time{}
		return
	}
	if a.aloneFrom.IsZero() {
		a.aloneFrom = now
	}
	if d := now.Sub(a.aloneFrom); d >= a.cfg.DeadAfter && now.Sub(a.aloneWarned) >= 4*a.cfg.DeadAfter {
		msg, level := "no live peers: this node trains alone", slog.LevelWarn
		if live {
			msg = "no live peer is reachable: every member this node knows is unreachable"
		} else if !a.quorate {
			// Waiting for --wait-members is what a founder does first.
			msg, level = fmt.Sprintf("waiting for %d members before training", a.cfg.MinMembers), slog.LevelInfo
		}
		a.log.Log(context.Background(), level, msg, "for", d.Round(time.Second), "clock", a.n.Clock())
		a.aloneWarned = now
	}
}

// alone is how long the node has had no live member besides itself.
func (a *Daemon) alone() time.Duration {
	if a.aloneFrom.IsZero() {
		return 0
	}
	return time.Since(a.aloneFrom)
}

// peerOf is PeerOf, decoded once per member id.
func (a *Daemon) peerOf(member string) (peer.ID, error) {
	if p, ok := a.peers[member]; ok {
		return p, nil
	}
	p, err := PeerOf(member)
	if err == nil {
		a.peers[member] = p
	}
	return p, err
}

func addrsOf(t Transport, p peer.ID) []string {
	var out []string
	for _, m := range t.KnownAddrs(p) {
		out = append(out, m.String())
	}
	return out
}

func (a *Daemon) metrics() {
	if a.cfg.LiveView != nil {
		a.cfg.LiveView.observe(a)
	}
	if a.cfg.Metrics == nil {
		return
	}
	a.cfg.Metrics.observe(a)
}
