package mesh

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/peerstore"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/sketchmesh/sketchmesh/dataset"
	"github.com/sketchmesh/sketchmesh/halton"
	"github.com/sketchmesh/sketchmesh/model"
	"github.com/sketchmesh/sketchmesh/node"
)

// DaemonConfig configures a long-running node: its core, its host, and how
// it keeps track of the mesh around it.
type DaemonConfig struct {
	// Mesh names the mesh; it names the membership topic, and joiners
	// asking for another mesh are refused.
	Mesh string
	Host *Host
	// Node is the core, started fresh (a founder) or from a snapshot (a
	// joiner). The daemon owns it from Run on.
	Node     *node.Syncer
	Settings node.Settings
	// Peers are the members known at start besides this one, with their
	// addresses (from the join reply).
	Peers []PeerRecord
	// MinMembers holds training back until at least this many members,
	// this one included, are live for the first time: nodes started
	// together begin together.
	MinMembers int
	// Topology is "halton" (relay along the Halton overlay) or "full".
	Topology string
	// Heartbeat is how often the node announces itself. Default 500 ms.
	Heartbeat time.Duration
	// DeadAfter is the floor of the silence after which a member is
	// declared dead; the timeout grows with the mesh's observed round
	// time. Default 5 s.
	DeadAfter time.Duration
	// JoinTimeout bounds one join exchange. Default 30 s.
	JoinTimeout time.Duration
	// LeaveTimeout bounds how long a leaving node waits for its last
	// sends. Default 3 s.
	LeaveTimeout time.Duration
	// RelayWindow is how long a relay batches arrivals (see Options).
	RelayWindow time.Duration
	// CheckpointEvery calls Checkpoint every so many iterations (0: only
	// at exit). Checkpoint runs on the loop, between events.
	CheckpointEvery uint64
	Checkpoint      func(n *node.Syncer) error
	// Test rows are evaluated every EvalEvery iterations and at the end;
	// Evaluated, when set, is called on the loop after each evaluation
	// with its test loss (to keep the best model, say).
	Test      []dataset.Row
	EvalEvery uint64
	Evaluated func(n *node.Syncer, testLoss float64)
	// Progress is how often a progress line is logged. Default 5 s.
	Progress time.Duration
	// MinIteration pads iterations to at least this wall time, for demos
	// and tests that need a run to last; 0 trains as fast as it can.
	MinIteration time.Duration
	// Metrics, when set, is kept up to date.
	Metrics *Metrics
	Logger  *slog.Logger
}

func (c *DaemonConfig) fill() error {
	if c.Host == nil || c.Node == nil {
		return errors.New("daemon: host and node are required")
	}
	if c.Mesh == "" {
		return errors.New("daemon: empty mesh name")
	}
	switch c.Topology {
	case "":
		c.Topology = "halton"
	case "halton", "full":
	default:
		return fmt.Errorf("daemon: unknown topology %q (want halton or full)", c.Topology)
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.Heartbeat, 500*time.Millisecond)
	def(&c.DeadAfter, 5*time.Second)
	def(&c.JoinTimeout, 30*time.Second)
	def(&c.LeaveTimeout, 3*time.Second)
	def(&c.Progress, 5*time.Second)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	c.MinMembers = max(c.MinMembers, 1)
	return nil
}

// Result is what a finished run reports.
type Result struct {
	Member   string
	Clock    uint64
	Accuracy float64
	Loss     float64
	// Incarnations counts the members ever admitted (a restarted node is a
	// new one), Members the nodes (peers) they ran on, and Live the
	// members live at the end.
	Incarnations, Members, Live int
	// Trained reports whether this node ran at least one iteration.
	Trained bool
	// FromSnapshot, Applied and Held account for every update in the view
	// (see node.Node.Ledger); AppliedTwice is FromSnapshot+Applied−Held
	// and must be 0.
	FromSnapshot, Applied, Held, AppliedTwice uint64
	Rejected                                  map[string]uint64
	Blocked, Wall                             time.Duration
	// Left is true when the run ended on a stop request rather than after
	// its iterations.
	Left bool
	// DirectPeers and RelayedPeers count the peers update streams ran
	// with: directly at some time, or through relays only.
	// UnreachableLinks counts the live members no stream could be opened
	// to for longer than the dead-member timeout.
	DirectPeers, RelayedPeers, UnreachableLinks int
}

// peerState is what the daemon knows of one other member.
type peerState struct {
	peer      peer.ID
	entry     uint64
	clock     uint64
	round     time.Duration
	lastHeard time.Time
	dead      bool
	left      bool
}

type heard struct {
	a    Announcement
	from peer.ID
}

// Daemon drives one node core in a live mesh: it trains, exchanges updates
// over the update protocol along the overlay, answers joiners, announces
// itself and tracks the other members over GossipSub, declares silent
// members dead, and leaves with notice when stopped. One goroutine (Run's)
// owns the core; handlers hand it work through channels.
type Daemon struct {
	cfg    DaemonConfig
	n      *node.Syncer
	log    *slog.Logger
	self   string
	ps     *pubsub.PubSub
	topic  *pubsub.Topic
	sub    *pubsub.Subscription
	joins  chan joinCall
	heard  chan heard
	peers  map[string]*peerState
	byPeer map[peer.ID]string
	// round is an average of this node's time per iteration, updated at
	// each iteration only, so a stall does not stretch its own timeout.
	round     time.Duration
	lastTrain time.Time
	stopped   chan struct{}
	lastEval  struct {
		clock    uint64
		loss     float64
		accuracy float64
	}
	blocked  time.Duration
	psCancel context.CancelFunc
	// quorate is set once MinMembers were live: members that die or leave
	// later do not stop the others.
	quorate bool
	// aloneFrom is when the node last found itself the only live member;
	// zero while it has company.
	aloneFrom, aloneWarned time.Time
	// lossWatch warns when the test loss stalls or rises.
	lossWatch model.LossWatch
	// joinWarn spaces warnings about unreadable join requests.
	joinWarn logEvery
}

// TopicName is the membership topic of a mesh.
func TopicName(mesh string) string { return "/sketchmesh/" + mesh + "/members/1" }

// NewDaemon sets up membership over GossipSub and the join handler. Call
// Run to start.
func NewDaemon(ctx context.Context, cfg DaemonConfig) (*Daemon, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	a := &Daemon{
		cfg: cfg, n: cfg.Node, self: cfg.Node.ID(),
		log:     cfg.Logger.With("self", shortMember(cfg.Node.ID())),
		joins:   make(chan joinCall),
		heard:   make(chan heard, 256),
		peers:   map[string]*peerState{},
		byPeer:  map[peer.ID]string{},
		stopped: make(chan struct{}),
	}
	selfPeer, err := PeerOf(a.self)
	if err != nil {
		return nil, err
	}
	if selfPeer != cfg.Host.h.ID() {
		return nil, fmt.Errorf("daemon: member %s does not run on host %s", a.self, cfg.Host.h.ID())
	}
	topicName := TopicName(cfg.Mesh)
	// GossipSub outlives a stop request long enough to carry the leave
	// notice; Run ends it.
	psCtx, psCancel := context.WithCancel(context.WithoutCancel(ctx))
	a.psCancel = psCancel
	ps, err := pubsub.NewGossipSub(psCtx, cfg.Host.h,
		pubsub.WithPeerScore(scoreParams(topicName), scoreThresholds()),
		pubsub.WithFloodPublish(true),
		pubsub.WithPeerOutboundQueueSize(256),
		pubsub.WithValidateQueueSize(256),
		pubsub.WithMaxMessageSize(maxAnnounceBytes+1024),
	)
	if err != nil {
		psCancel()
		return nil, fmt.Errorf("start gossipsub: %w", err)
	}
	var fresh freshness
	if err := ps.RegisterTopicValidator(topicName, fresh.validate); err != nil {
		return nil, fmt.Errorf("register membership validator: %w", err)
	}
	if a.topic, err = ps.Join(topicName); err != nil {
		return nil, fmt.Errorf("join membership topic: %w", err)
	}
	if a.sub, err = a.topic.Subscribe(pubsub.WithBufferSize(256)); err != nil {
		return nil, fmt.Errorf("subscribe to membership topic: %w", err)
	}
	a.ps = ps
	now := time.Now()
	for _, p := range cfg.Peers {
		if p.Member == a.self {
			continue
		}
		a.learnAddrs(p.Member, p.Addrs)
		a.track(p.Member, 0, now)
	}
	// This node's own earlier incarnations are gone, whatever the snapshot
	// it started from says.
	for _, m := range a.n.Members() {
		if p, err := PeerOf(m); err == nil && p == selfPeer && m != a.self {
			a.n.PeerDown(m)
		}
	}
	// Every member the node waits for is watched, those the donor did not
	// list too (one on its way out, whose last updates are awaited): a
	// member that never speaks again is declared dead, not waited for.
	for _, m := range a.n.Live() {
		if _, known := a.peers[m]; !known && m != a.self {
			if ps := a.track(m, 0, now); ps != nil {
				ps.left = a.n.Leaving(m)
			}
		}
	}
	cfg.Host.h.SetStreamHandler(JoinProtocol, a.serveJoin)
	return a, nil
}

// freshness is the membership topic's validator. Malformed messages, and
// hellos and leaves not signed by the member's own peer, are rejected (and
// count against the sender's score); a hello older than one already seen
// from its member is stale and ignored (no penalty: gossip reorders).
type freshness struct {
	mu     sync.Mutex
	latest map[string]uint64
}

// maxTracked bounds the members the validator remembers.
const maxTracked = 1 << 16

func (f *freshness) validate(_ context.Context, _ peer.ID, m *pubsub.Message) pubsub.ValidationResult {
	a, err := DecodeAnnouncement(m.Data)
	if err != nil {
		return pubsub.ValidationReject
	}
	if a.Kind == AnnounceAdmit {
		return pubsub.ValidationAccept
	}
	if p, _ := PeerOf(a.Member); p != m.GetFrom() {
		return pubsub.ValidationReject
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.latest == nil || len(f.latest) >= maxTracked {
		f.latest = map[string]uint64{}
	}
	if last, ok := f.latest[a.Member]; ok && a.Kind == AnnounceHello && a.Clock < last {
		return pubsub.ValidationIgnore
	}
	f.latest[a.Member] = max(f.latest[a.Member], a.Clock)
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

// track records member as known and heard from at now, returning its state.
func (a *Daemon) track(member string, entry uint64, now time.Time) *peerState {
	ps := a.peers[member]
	if ps == nil {
		p, err := PeerOf(member)
		if err != nil {
			return nil
		}
		ps = &peerState{peer: p, entry: entry}
		a.peers[member] = ps
		a.cfg.Host.addMember(p)
		// A peer runs one member at a time: its newest incarnation.
		a.byPeer[p] = member
	}
	ps.lastHeard = now
	return ps
}

func (a *Daemon) learnAddrs(member string, addrs []string) {
	p, err := PeerOf(member)
	if err != nil || p == a.cfg.Host.h.ID() {
		return
	}
	var mas []ma.Multiaddr
	for _, s := range addrs {
		if m, err := ma.NewMultiaddr(s); err == nil {
			mas = append(mas, m)
		}
	}
	a.cfg.Host.h.Peerstore().AddAddrs(p, mas, peerstore.PermanentAddrTTL)
}

// addrStrings returns the host's listen addresses as strings.
func (a *Daemon) addrStrings() []string {
	var out []string
	for _, m := range a.cfg.Host.h.Addrs() {
		out = append(out, m.String())
	}
	return out
}

// Run trains until the node has run its iterations and holds everyone's
// last updates, or until ctx ends; then it leaves with notice (checkpoint,
// leave announcement, last sends within LeaveTimeout). A stop through ctx
// is not an error.
func (a *Daemon) Run(ctx context.Context) (Result, error) {
	start := time.Now()
	defer close(a.stopped)
	defer a.psCancel()
	go a.listen(ctx)
	a.rebuildOverlay()
	a.announce(AnnounceHello)

	inbox := a.cfg.Host.Inbox()
	tick := time.NewTicker(min(a.cfg.Heartbeat/2, 100*time.Millisecond))
	defer tick.Stop()
	var lastHello, lastEntropy, lastProgress, blockedSince, lastSync time.Time
	lastProgress = start
	var window *time.Timer
	if a.cfg.RelayWindow > 0 {
		window = time.NewTimer(a.cfg.RelayWindow)
		defer window.Stop()
	}
	flush := func() {
		if window != nil && a.n.HasReady() {
			window.Reset(a.cfg.RelayWindow)
		collect:
			for {
				select {
				case m := <-inbox:
					a.receive(m)
				case <-window.C:
					break collect
				}
			}
		}
		for _, m := range a.n.Ready().Messages {
			a.send(m)
		}
	}
	for {
		// Handle everything that is waiting before deciding what to do.
		for drained := false; !drained; {
			select {
			case m := <-inbox:
				a.receive(m)
			case h := <-a.heard:
				a.onAnnouncement(h)
			case call := <-a.joins:
				call.reply <- a.admit(call.req)
			default:
				drained = true
			}
		}
		now := time.Now()
		if now.Sub(lastHello) >= a.cfg.Heartbeat {
			a.announce(AnnounceHello)
			a.detectDeaths(now)
			a.metrics()
			lastHello = now
		}
		if now.Sub(lastEntropy) >= 4*a.cfg.Heartbeat {
			a.sendAll(a.n.AntiEntropy())
			lastEntropy = now
		}
		if now.Sub(lastProgress) >= a.cfg.Progress {
			a.progress()
			lastProgress = now
		}
		flush()
		if a.finished() {
			return a.finish(ctx, start, false)
		}
		if ctx.Err() != nil {
			return a.finish(ctx, start, true)
		}
		paced := a.cfg.MinIteration > 0 && now.Sub(a.lastTrain) < a.cfg.MinIteration
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
		// Stuck at the gate for a while: ask the members holding it back.
		if now.Sub(blockedSince) >= a.syncAfter() && now.Sub(lastSync) >= a.syncAfter() {
			a.sendAll(a.n.SyncRequest())
			lastSync = now
		}
		select {
		case m := <-inbox:
			a.receive(m)
		case h := <-a.heard:
			a.onAnnouncement(h)
		case call := <-a.joins:
			call.reply <- a.admit(call.req)
		case <-tick.C:
		case <-paceC:
		case <-ctx.Done():
		}
		if pace != nil {
			pace.Stop()
		}
	}
}

// meshTraining reports whether the mesh has begun to train, so that a
// joiner admitted while the founder still waits for --wait-members waits
// with it: a founder (fresh or resumed), a joiner that starts above clock
// 0, one that has heard a member above its entry, or one with no other
// live member left to wait for, may train.
func (a *Daemon) meshTraining() bool {
	entry := a.entry()
	if len(a.cfg.Peers) == 0 || entry > 0 || len(a.n.Live()) <= 1 {
		return true
	}
	for _, ps := range a.peers {
		if !ps.dead && ps.clock > entry {
			return true
		}
	}
	return false
}

// finished reports whether a bounded run is over: all iterations run and
// every live member's last update in.
func (a *Daemon) finished() bool {
	return a.cfg.Settings.Iterations > 0 && a.n.Done()
}

// syncAfter is how long the node waits at its gate before asking for
// updates: a few rounds, at least 200 ms.
func (a *Daemon) syncAfter() time.Duration {
	return max(200*time.Millisecond, 3*a.round)
}

func (a *Daemon) train() error {
	started := time.Now()
	if err := a.n.Train(); err != nil {
		return fmt.Errorf("train: %w", err)
	}
	if !a.lastTrain.IsZero() {
		took := started.Sub(a.lastTrain)
		if a.round == 0 {
			a.round = took
		} else {
			a.round = (9*a.round + took) / 10
		}
	}
	a.lastTrain = time.Now()
	c := a.n.Clock()
	if a.cfg.EvalEvery > 0 && c%a.cfg.EvalEvery == 0 {
		a.evaluate()
	}
	if a.cfg.CheckpointEvery > 0 && c%a.cfg.CheckpointEvery == 0 {
		a.checkpoint()
	}
	return nil
}

func (a *Daemon) evaluate() {
	if len(a.cfg.Test) == 0 {
		return
	}
	m := a.n.Evaluate(a.cfg.Test)
	a.lastEval.clock, a.lastEval.loss, a.lastEval.accuracy = a.n.Clock(), m.Loss, m.Accuracy
	if msg := a.lossWatch.Observe(m.Loss); msg != "" {
		a.log.Warn(msg, "clock", a.n.Clock(), "lr", a.cfg.Settings.LearningRate)
	}
	if a.cfg.Evaluated != nil {
		a.cfg.Evaluated(a.n, m.Loss)
	}
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

// receive hands one arrival to the core under the member id of its sender.
func (a *Daemon) receive(m Inbound) {
	p, err := peer.Decode(m.From)
	if err != nil {
		return
	}
	from, ok := a.byPeer[p]
	if !ok {
		// A peer not yet known as a member: the core counts what it sends
		// as not from a member, and the sync path fetches it again later.
		from = m.From
	} else if ps := a.peers[from]; ps != nil {
		ps.lastHeard = time.Now()
	}
	a.n.Receive(from, m.Data)
}

func (a *Daemon) send(m node.Message) {
	p, err := PeerOf(m.To)
	if err != nil {
		return
	}
	a.cfg.Host.Send(p.String(), m.Data)
}

func (a *Daemon) sendAll(msgs []node.Message) {
	for _, m := range msgs {
		a.send(m)
	}
}

// announce publishes this node's hello or leave.
func (a *Daemon) announce(kind string) {
	c := a.n.Clock()
	a.publish(Announcement{Kind: kind, Member: a.self, Entry: min(a.entry(), c), Clock: c, Round: a.round, Addrs: a.addrStrings()})
}

// entry is the clock this node started at.
func (a *Daemon) entry() uint64 {
	if s := a.n.Config().Start; s != nil {
		return s.Clock
	}
	return 0
}

func (a *Daemon) publish(an Announcement) {
	if err := a.topic.Publish(context.Background(), EncodeAnnouncement(an)); err != nil {
		a.log.Warn("membership announcement not published", "kind", an.Kind, "err", err)
	}
}

// listen moves announcements from the subscription to the loop.
func (a *Daemon) listen(ctx context.Context) {
	for {
		m, err := a.sub.Next(ctx)
		if err != nil {
			return
		}
		if m.ReceivedFrom == a.cfg.Host.h.ID() && m.GetFrom() == a.cfg.Host.h.ID() {
			continue
		}
		an, err := DecodeAnnouncement(m.Data)
		if err != nil {
			continue
		}
		select {
		case a.heard <- heard{a: an, from: m.GetFrom()}:
		case <-ctx.Done():
			return
		case <-a.stopped:
			return
		}
	}
}

// onAnnouncement applies what a member said of itself (or of a joiner it
// admitted).
func (a *Daemon) onAnnouncement(h heard) {
	an := h.a
	if an.Member == a.self {
		return
	}
	now := time.Now()
	ps, known := a.peers[an.Member]
	switch an.Kind {
	case AnnounceLeave:
		if !known || ps.left {
			return
		}
		// The member stays in the wait set until its updates up to its
		// last clock are in: they may still be on their way.
		ps.left, ps.lastHeard = true, now
		a.n.Leave(an.Member, an.Clock)
		ps.dead = !a.n.Leaving(an.Member)
		if ps.dead {
			a.forget(an.Member)
		}
		a.log.Info("member left", "member", shortMember(an.Member), "last_clock", an.Clock, "waiting_for_updates", !ps.dead)
		a.rebuildOverlay()
		return
	case AnnounceHello, AnnounceAdmit:
		if known && ps.left {
			return
		}
		a.learnAddrs(an.Member, an.Addrs)
		if !known {
			ps = a.track(an.Member, an.Entry, now)
			if ps == nil {
				return
			}
			a.n.AddMember(an.Member, an.Entry)
			a.log.Info("member joined", "member", shortMember(an.Member), "entry", an.Entry, "live", len(a.n.Live()))
			a.retire(an.Member)
			a.rebuildOverlay()
		}
		if newest := a.byPeer[ps.peer]; newest != an.Member {
			// A late word from an incarnation its peer has replaced.
			return
		}
		if an.Kind == AnnounceHello {
			ps.lastHeard = now
			ps.clock, ps.round = an.Clock, an.Round
			if ps.dead {
				ps.dead = false
				a.n.PeerUp(an.Member)
				a.log.Info("member back", "member", shortMember(an.Member))
				a.rebuildOverlay()
			}
		}
	}
}

// retire marks the older incarnations of member's peer dead: a peer runs
// one member at a time, so a new incarnation means the old one is gone.
func (a *Daemon) retire(member string) {
	p, _ := PeerOf(member)
	for m, ps := range a.peers {
		if m != member && ps.peer == p && !ps.dead {
			ps.dead = true
			a.n.PeerDown(m)
			a.log.Info("member replaced by a new incarnation", "old", shortMember(m), "new", shortMember(member))
		}
	}
	if _, known := a.peers[member]; known {
		a.byPeer[p] = member
	}
}

// forget drops what the host still queues for member m, gone or dead
// (Host.Forget), unless m's peer runs a newer incarnation.
func (a *Daemon) forget(m string) {
	if ps := a.peers[m]; ps != nil && a.byPeer[ps.peer] == m {
		a.cfg.Host.Forget(ps.peer)
	}
}

// deadAfter is how long a member may stay silent: the floor, or ten of the
// mesh's slowest recent rounds, whichever is longer.
func (a *Daemon) deadAfter() time.Duration {
	slowest := a.round
	for _, ps := range a.peers {
		if !ps.dead {
			slowest = max(slowest, ps.round)
		}
	}
	return max(a.cfg.DeadAfter, 10*slowest, 4*a.cfg.Heartbeat)
}

func (a *Daemon) detectDeaths(now time.Time) {
	limit := a.deadAfter()
	changed := false
	for m, ps := range a.peers {
		if ps.left && !ps.dead && !a.n.Leaving(m) {
			ps.dead = true // its last updates arrived
			a.forget(m)
			continue
		}
		if ps.dead || now.Sub(ps.lastHeard) < limit {
			continue
		}
		ps.dead = true
		a.n.PeerDown(m)
		a.forget(m)
		changed = true
		silent := now.Sub(ps.lastHeard).Round(time.Millisecond)
		if ps.left {
			a.log.Warn("member left but its last updates never arrived; no longer waiting for them", "member", shortMember(m), "since_leave", silent, "timeout", limit)
			continue
		}
		a.log.Warn("member declared dead", "member", shortMember(m), "silent_for", silent, "timeout", limit)
	}
	if changed {
		a.rebuildOverlay()
	}
	a.checkAlone(now)
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

// rebuildOverlay recomputes the relay overlay over the live members.
func (a *Daemon) rebuildOverlay() {
	// Members on their way out are not in the overlay: nothing is sent to
	// them, and others' updates route around them.
	live := slices.DeleteFunc(a.n.Live(), a.n.Leaving)
	if a.cfg.Topology == "full" {
		a.n.SetRouter(node.NewFullMesh(live))
		return
	}
	a.n.SetRouter(halton.Build(live))
}

// admit answers a join request on the loop: refuse another mesh or
// conflicting settings; otherwise add the joiner at this node's rows'
// clock, announce it, and hand it a snapshot.
func (a *Daemon) admit(q JoinRequest) []byte {
	if q.Mesh != a.cfg.Mesh {
		return encodeJoinReply(nil, fmt.Sprintf("this member is in mesh %q, not %q", a.cfg.Mesh, q.Mesh))
	}
	if err := q.Settings.Conflict(a.cfg.Settings, q.Explicit); err != nil {
		a.log.Warn("joiner refused", "member", shortMember(q.Member), "err", err)
		return encodeJoinReply(nil, err.Error())
	}
	if ps, ok := a.peers[q.Member]; ok && ps.left {
		return encodeJoinReply(nil, fmt.Sprintf("member %s left the mesh; a restarted node joins as a new incarnation", q.Member))
	}
	// An earlier incarnation of the joiner's peer is gone: take it out of
	// the live set before the snapshot, so the joiner does not wait for it.
	a.retire(q.Member)
	snap := a.n.Snapshot()
	a.learnAddrs(q.Member, q.Addrs)
	if _, known := a.peers[q.Member]; !known {
		a.track(q.Member, snap.Clock, time.Now())
		a.n.AddMember(q.Member, snap.Clock)
		a.byPeer[a.peers[q.Member].peer] = q.Member
		a.rebuildOverlay()
	}
	a.publish(Announcement{Kind: AnnounceAdmit, Member: q.Member, Entry: snap.Clock, Clock: snap.Clock, Addrs: q.Addrs})
	a.log.Info("member admitted", "member", shortMember(q.Member), "entry", snap.Clock, "live", len(a.n.Live()))
	reply := &JoinReply{Settings: a.cfg.Settings, Snapshot: &snap}
	reply.Members = append(reply.Members, PeerRecord{Member: a.self, Addrs: a.addrStrings()})
	for m, ps := range a.peers {
		if !ps.dead && !ps.left && m != q.Member {
			reply.Members = append(reply.Members, PeerRecord{Member: m, Addrs: addrsOf(a.cfg.Host, ps.peer)})
		}
	}
	slices.SortFunc(reply.Members, func(x, y PeerRecord) int { return strings.Compare(x.Member, y.Member) })
	return encodeJoinReply(reply, "")
}

func addrsOf(h *Host, p peer.ID) []string {
	var out []string
	for _, m := range h.h.Peerstore().Addrs(p) {
		out = append(out, m.String())
	}
	return out
}

// finish ends the run: a final evaluation and checkpoint, the leave notice,
// and the last sends within LeaveTimeout.
func (a *Daemon) finish(ctx context.Context, start time.Time, stopped bool) (Result, error) {
	a.evaluate()
	a.checkpoint()
	a.announce(AnnounceLeave)
	a.metrics()
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.cfg.LeaveTimeout)
	defer cancel()
	if err := a.cfg.Host.Flush(fctx); err != nil {
		a.log.Warn("last sends not all out before leaving", "err", err)
	}
	res := a.result(start, stopped)
	a.log.Info("left the mesh", "clock", res.Clock, "test_accuracy", Sig4(res.Accuracy), "applied_twice", res.AppliedTwice)
	return res, nil
}

func (a *Daemon) result(start time.Time, stopped bool) Result {
	fromSnap, applied, held := a.n.Ledger()
	st := a.n.Stats()
	twice := uint64(0)
	if fromSnap+applied > held {
		twice = fromSnap + applied - held
	}
	direct, relayed, unreachable := a.linkCounts(time.Now())
	return Result{
		Member: a.self, Clock: a.n.Clock(), Accuracy: a.lastEval.accuracy, Loss: a.lastEval.loss,
		Incarnations: len(a.n.Members()), Members: countPeers(a.n.Members()), Live: len(a.n.Live()),
		Trained:      !a.lastTrain.IsZero(),
		FromSnapshot: fromSnap, Applied: applied, Held: held, AppliedTwice: twice,
		Rejected: st.Rejected, Blocked: a.blocked, Wall: time.Since(start), Left: stopped,
		DirectPeers: direct, RelayedPeers: relayed, UnreachableLinks: unreachable,
	}
}

// countPeers counts the distinct peers that ran the members.
func countPeers(members []string) int {
	peers := map[peer.ID]bool{}
	for _, m := range members {
		if p, err := PeerOf(m); err == nil {
			peers[p] = true
		}
	}
	return len(peers)
}

func (a *Daemon) metrics() {
	if a.cfg.Metrics == nil {
		return
	}
	a.cfg.Metrics.observe(a)
}
