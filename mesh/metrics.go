package mesh

import (
	"maps"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sketchmesh/sketchmesh/liveview"
	"github.com/sketchmesh/sketchmesh/node"
)

// Metrics exposes a running node to Prometheus under sketchmesh_* names.
// The daemon's loop copies its counters into it at each heartbeat; a scrape
// reads that copy, so scrapes never touch the core. Refusals it counts as
// the core's node.Tracer (node.Config.Tracer), across every core the node
// runs: a rejoin starts a new core, and the counters go on.
type Metrics struct {
	reg *prometheus.Registry
	mu  sync.Mutex
	s   metricsSnapshot
	// rejected counts the cores' refusals by reason, as Reject hears them.
	rejected map[node.RejectReason]uint64
}

// Apply implements node.Tracer; applied frames are read from the core's
// counters at each heartbeat.
func (m *Metrics) Apply(string, uint64) {}

// Reject implements node.Tracer: it counts the refusal under its reason.
func (m *Metrics) Reject(reason node.RejectReason) {
	m.mu.Lock()
	m.rejected[reason]++
	m.mu.Unlock()
}

var _ node.Tracer = (*Metrics)(nil)

// Rejected returns a copy of the refusals counted so far, by reason, over
// every core the node ran.
func (m *Metrics) Rejected() map[node.RejectReason]uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.rejected)
}

type metricsSnapshot struct {
	clock, staleness                     float64
	blocked                              time.Duration
	peers, members, live                 float64
	bytesSent, bytesRecv                 float64
	msgsSent, msgsRecv                   float64
	ownFrames, relayed, applied          float64
	frameBytes, pairs                    float64
	testLoss, testAccuracy, trainingLoss float64
	resent, syncRequests                 float64
	aloneSince                           float64
	connDirect, connRelayed              float64
	unreachable, reservations            float64
	sendFailed, sendDropped              float64
	oversized, truncated, throttled      float64
	viewDivergence                       float64
	// byState counts the members by liveview state (live, suspected,
	// dead, left).
	byState map[string]float64
}

var (
	descClock        = prometheus.NewDesc("sketchmesh_clock", "Iterations this node has completed.", nil, nil)
	descStaleness    = prometheus.NewDesc("sketchmesh_staleness", "Largest staleness (iterations) observed at a read so far.", nil, nil)
	descBlocked      = prometheus.NewDesc("sketchmesh_blocked_seconds_total", "Time spent waiting at the staleness gate, in seconds.", nil, nil)
	descPeers        = prometheus.NewDesc("sketchmesh_peers", "libp2p peers this node holds a connection to.", nil, nil)
	descMembers      = prometheus.NewDesc("sketchmesh_members", "Members of the mesh by state.", []string{"state"}, nil)
	descMemberStates = prometheus.NewDesc("sketchmesh_members_by_state", "Members of the mesh as this node sees them, by state: live, suspected (silent; the gate no longer waits for it, it keeps its share of the step), dead, or left (with notice).", []string{"state"}, nil)
	descBytes        = prometheus.NewDesc("sketchmesh_bytes_total", "Bytes on update streams, length prefixes included.", []string{"direction"}, nil)
	descMessages     = prometheus.NewDesc("sketchmesh_messages_total", "Messages on update streams.", []string{"direction"}, nil)
	descFrames       = prometheus.NewDesc("sketchmesh_frames_total", "Update frames handled, by kind: own (this node's updates, sent), relayed (forwarded for others), applied (in the view, own included), resent (answers to sync requests).", []string{"kind"}, nil)
	descRatio        = prometheus.NewDesc("sketchmesh_compression_ratio", "Raw size (12 bytes per key/value pair) over encoded size of this node's own frames.", nil, nil)
	descRejected     = prometheus.NewDesc("sketchmesh_frames_rejected_total", "Frames and messages refused, by reason.", []string{"reason"}, nil)
	descSyncRequests = prometheus.NewDesc("sketchmesh_sync_requests_total", "Sync requests sent to fetch missing updates.", nil, nil)
	descTestLoss     = prometheus.NewDesc("sketchmesh_test_loss", "Mean loss on the test set at the last evaluation.", nil, nil)
	descTestAcc      = prometheus.NewDesc("sketchmesh_test_accuracy", "Accuracy (0..1) on the test set at the last evaluation.", nil, nil)
	descTrainLoss    = prometheus.NewDesc("sketchmesh_training_loss", "Mean training loss of the last mini-batch.", nil, nil)
	descAlone        = prometheus.NewDesc("sketchmesh_alone_seconds", "How long this node has had no live member besides itself, or none it is connected to (0 when it has).", nil, nil)
	descConnections  = prometheus.NewDesc("sketchmesh_connections", "Live members this node is connected to, by path: direct (some connection is direct) or relayed (all go through relays).", []string{"path"}, nil)
	descUnreachable  = prometheus.NewDesc("sketchmesh_unreachable_links", "Live members no update stream could be opened to for longer than the dead-member timeout.", nil, nil)
	descSendsLost    = prometheus.NewDesc("sketchmesh_sends_lost_total", "Update messages that never went out, by cause: failed (no stream could be opened, or the write failed or timed out) or dropped (the peer's send queue was full). The receiver pulls what it misses.", []string{"cause"}, nil)
	descReservations = prometheus.NewDesc("sketchmesh_relay_reservations", "Relay reservations this node holds.", nil, nil)
	descStreams      = prometheus.NewDesc("sketchmesh_streams_rejected_total", "Update messages refused before they were decoded, their stream reset, by reason: oversized (a length prefix above the message limit) or truncated (the stream ended inside the message).", []string{"reason"}, nil)
	descThrottled    = prometheus.NewDesc("sketchmesh_messages_throttled_total", "Update messages held back by the per-peer rate limit (delayed, not lost).", nil, nil)
	descDivergence   = prometheus.NewDesc("sketchmesh_view_divergence_total", "Members' view digests that differed from this node's of the same committed row (their replicas drifted apart; see the log's view diverged warnings).", nil, nil)
	descBuild        = prometheus.NewDesc("sketchmesh_build_info", "Always 1; the labels name the running build.", []string{"version", "commit", "go_version"}, nil)
)

// NewMetrics returns metrics on a registry of their own (plus the Go and
// process collectors).
func NewMetrics() *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry(), rejected: map[node.RejectReason]uint64{}}
	m.reg.MustRegister(m, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descClock, descStaleness, descBlocked, descPeers, descMembers, descMemberStates, descBytes, descMessages,
		descFrames, descRatio, descRejected, descSyncRequests, descTestLoss, descTestAcc, descTrainLoss, descAlone,
		descConnections, descUnreachable, descReservations, descSendsLost, descStreams, descThrottled, descDivergence, descBuild} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	s := m.s
	rejected := maps.Clone(m.rejected)
	m.mu.Unlock()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	gauge(descClock, s.clock)
	gauge(descStaleness, s.staleness)
	counter(descBlocked, s.blocked.Seconds())
	gauge(descPeers, s.peers)
	gauge(descMembers, s.live, "live")
	gauge(descMembers, s.members-s.live, "down")
	for _, state := range []string{liveview.StateLive, liveview.StateSuspected, liveview.StateDead, liveview.StateLeft} {
		gauge(descMemberStates, s.byState[state], state)
	}
	counter(descBytes, s.bytesSent, "sent")
	counter(descBytes, s.bytesRecv, "received")
	counter(descMessages, s.msgsSent, "sent")
	counter(descMessages, s.msgsRecv, "received")
	counter(descFrames, s.ownFrames, "own")
	counter(descFrames, s.relayed, "relayed")
	counter(descFrames, s.applied, "applied")
	counter(descFrames, s.resent, "resent")
	ratio := 0.0
	if s.frameBytes > 0 {
		ratio = 12 * s.pairs / s.frameBytes
	}
	gauge(descRatio, ratio)
	// Every reason is exported from the start, at 0 until it counts, so
	// that dashboards and alerts see the series before the first refusal.
	known := node.RejectReasons()
	for _, reason := range known {
		counter(descRejected, float64(rejected[reason]), string(reason))
	}
	for reason, v := range rejected {
		if !slices.Contains(known, reason) {
			counter(descRejected, float64(v), string(reason))
		}
	}
	counter(descStreams, s.oversized, "oversized")
	counter(descStreams, s.truncated, "truncated")
	counter(descThrottled, s.throttled)
	counter(descDivergence, s.viewDivergence)
	b := BuildInfo()
	gauge(descBuild, 1, b.Version, b.Commit, b.GoVersion)
	counter(descSyncRequests, s.syncRequests)
	gauge(descTestLoss, s.testLoss)
	gauge(descTestAcc, s.testAccuracy)
	gauge(descTrainLoss, s.trainingLoss)
	gauge(descAlone, s.aloneSince)
	gauge(descConnections, s.connDirect, "direct")
	gauge(descConnections, s.connRelayed, "relayed")
	gauge(descUnreachable, s.unreachable)
	gauge(descReservations, s.reservations)
	counter(descSendsLost, s.sendFailed, "failed")
	counter(descSendsLost, s.sendDropped, "dropped")
}

// observe copies the daemon's counters; it runs on the daemon's loop.
func (m *Metrics) observe(a *Daemon) {
	st := a.n.Stats()
	sy := a.n.SyncStats()
	tr := a.net.Traffic()
	s := metricsSnapshot{
		clock: float64(a.n.Steps()), staleness: float64(st.StalenessMax), blocked: a.blocked,
		peers: float64(a.net.ConnectedPeers()), members: float64(len(a.n.Members())), live: float64(len(a.n.Live())),
		bytesSent: float64(tr.BytesSent), bytesRecv: float64(tr.BytesReceived),
		msgsSent: float64(tr.MessagesSent), msgsRecv: float64(tr.MessagesReceived),
		ownFrames: float64(st.FactorFramesSent + st.DeltaFramesSent), relayed: float64(st.UpdatesRelayed), applied: float64(st.UpdatesApplied),
		frameBytes: float64(st.FrameBytes), pairs: float64(st.PairsEncoded),
		testLoss: a.lastEval.loss, testAccuracy: a.lastEval.accuracy, trainingLoss: st.LastLoss,
		resent: float64(sy.UpdatesResent), syncRequests: float64(sy.RequestsSent),
		aloneSince: a.alone().Seconds(),
		sendFailed: float64(tr.SendFailures), sendDropped: float64(tr.SendDropped),
		oversized: float64(tr.Oversized), truncated: float64(tr.Truncated), throttled: float64(tr.Throttled),
		viewDivergence: float64(sy.ViewDivergence),
	}
	s.byState = map[string]float64{}
	live := map[string]bool{}
	for _, m := range a.n.Live() {
		live[m] = true
	}
	for _, m := range a.n.Members() {
		s.byState[memberState(a.n, m, live[m])]++
	}
	direct, relayed := a.net.ConnPaths(a.livePeers())
	_, _, unreachable := a.linkCounts(time.Now())
	s.connDirect, s.connRelayed = float64(direct), float64(relayed)
	s.unreachable, s.reservations = float64(unreachable), float64(a.net.Reservations())
	m.mu.Lock()
	m.s = s
	m.mu.Unlock()
}
