package sim

// The run's configuration, its defaults and their checks.

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/sketchmesh/sketchmesh/dataset"
	"github.com/sketchmesh/sketchmesh/netmodel"
	"github.com/sketchmesh/sketchmesh/node"
)

// Config describes one simulated run. Zero durations pick the defaults
// given with each field.
type Config struct {
	// Nodes is the number of node cores at the start, 1 to MaxNodes
	// (with the members the scenario adds by join).
	Nodes int
	// Train is shuffled by Seed and dealt round robin, one shard per node,
	// members that join later included: node i of n (the run's nodes plus
	// the scenario's joins) gets every n-th row from row i, so a new member
	// brings rows nobody has trained on. With more nodes than rows, node i
	// gets row i mod rows alone: some rows then sit on two nodes.
	Train, Test *dataset.Dataset
	// Training is what the nodes train; scenario steps and progress count
	// exchanges (the nodes' clocks).
	netmodel.Training
	// Topology is "halton" (the default) or "full".
	Topology string
	// Sites is "auto" (the default: each node announces the site label its
	// round trips give, and the cores build the site-aware overlay over
	// the labels they hear, see sites.go) or "off" (the flat overlay).
	Sites string
	// WAN is the network; the zero value is ParseLinkProfile("lan").
	WAN netmodel.LinkProfile
	// ComputeTime is the virtual time one iteration takes (default 10 ms).
	// Each iteration draws its own time uniformly within ±10 % of it, so
	// nodes do not move in artificial lockstep; a "slow" step multiplies it.
	ComputeTime time.Duration
	// SyncTimeout is how long a node waits at its gate before it asks for
	// what it lacks, and then between asks (node.SyncConfig.StallTicks,
	// rounded up to whole ticks). The default is one ComputeTime (the
	// spread of the nodes' finishing times is within it) plus one round
	// trip over the slowest link (two largest one-way latencies and two
	// jitters) plus one relay window (FlushDelay) per hop of the initial
	// overlay's diameter D (D = 1 on the full mesh): relays wait in windows
	// on every hop of an update's path. Asking sooner asks for updates
	// still in windows: at P = 256 on lan (D = 5), waiting one window sent
	// 3.8 requests per node per iteration and resent 10,661 updates, every
	// one a duplicate. The latencies are not counted per hop: on a WAN a
	// request to the origin crosses one link where the overlay's path
	// crosses several, and waiting for the path cost time (geo3, 24 nodes,
	// s = 0, site-aware overlay: 2.21 simulated seconds against 1.85; on
	// geo3 with 1% loss and 64 nodes, 1.8× the simulated time for 0.8× the
	// bytes).
	SyncTimeout time.Duration
	// SyncInterval is the period of every node's anti-entropy request
	// (node.SyncConfig.EntropyTicks, rounded up to whole ticks) and of the
	// run's checks for its end (default 100 ms).
	SyncInterval time.Duration
	// Tick is the length of the node cores' tick (node.Node.Tick), the
	// unit of every membership timeout (default 10 ms). Each node ticks on
	// its own, staggered over the first tick.
	Tick time.Duration
	// DetectionDelay is the silence after which a node suspects a member
	// (node.SyncConfig.SuspectTicks, rounded up to whole ticks); the core
	// declares it dead after four times as long. The default is four
	// heartbeats (node.DefaultHeartbeatTicks ticks each) plus, for an
	// overlay of diameter D, D + 2 largest one-way latencies and jitters and
	// D flush delays (detectionDelay).
	DetectionDelay time.Duration
	// FlushDelay lets a node collect relays for this long before it sends
	// them, batching updates per next hop; 0 sends after every message. A
	// node's own update always leaves as soon as it is computed, and the
	// relays held then leave with it, which closes the window; membership
	// messages queued meanwhile leave with the relays. Relays that arrive
	// while the node computes open no window: they wait for its own update,
	// due within one compute time, as in the mesh daemon. A window opens
	// for what arrives while the node waits at its gate or is done. At
	// P = 256 on lan: 13.8 messages per node per iteration, against 15.1
	// with a window for every arrival and 45.8 with 1 ms (see the README).
	FlushDelay time.Duration
	// SendQueueBytes bounds the update traffic waiting on one link, as
	// the daemon's send queue is bounded (mesh.Limits.SendQueueBytes, whose
	// default is the default here: 128 MiB); past it the oldest update
	// messages are dropped. Announcements go ahead of it (links.go).
	SendQueueBytes int
	// keepEnvelopes leaves delivered envelopes to the collector instead of
	// recycling their buffers (node.QueuePool.Recycle), for the test that
	// the recycling changes nothing.
	keepEnvelopes bool
	// Sync tunes the nodes' retransmission (node.SyncConfig defaults).
	Sync node.SyncConfig
	// Faults is an optional fault script.
	Faults *Scenario
	// Progress, when set, receives a report every EvalEvery iterations
	// (0: about ten per run) and one per scenario step.
	Progress  func(Progress)
	EvalEvery int
	// Heartbeat, when set with Progress, is asked while cores are built
	// and between windows whether the driver wants a status line now; on
	// yes, Progress receives a report marked Heartbeat, without test
	// metrics (an evaluation costs too much to make at any moment). The
	// driver keeps the wall clock, which the run must not read: a report
	// reads the run and changes nothing in it. Where P = 10,000, building
	// the cores takes half a minute and the slowest node's clock can stay
	// on one iteration for minutes while the others' updates spread.
	Heartbeat func() bool
	// Workers is how many goroutines run the nodes (workers.go), 1 to
	// MaxWorkers (0 = 1). The trace depends on the seed and on Workers:
	// the same pair replays the same run on any machine.
	Workers int
}

// DefaultSendQueueBytes is Config.SendQueueBytes's default, the daemon's.
const DefaultSendQueueBytes = 128 << 20

// MaxNodes bounds Config.Nodes (and the joiners of a fault script). Link
// state is kept only for the links busy now, so memory bounds P: each core
// holds O(P) per-member state.
const MaxNodes = 16384

// Progress is one progress report of a simulated run.
type Progress struct {
	// Iteration is the slowest live node's clock, Fastest the fastest's.
	Iteration, Fastest uint64
	SimulatedSeconds   float64
	Live               int
	// TestLoss and TestAccuracy are the lowest-numbered live node's (NaN
	// accuracy for regression).
	TestLoss, TestAccuracy float64
	MessagesSent           uint64
	BytesSent              uint64
	// MembershipBytes is what the membership protocol sent, counted apart
	// from BytesSent (the update protocol's).
	MembershipBytes uint64
	// Step is the scenario step that just fired ("at 20: kill 0-3"), or "".
	Step string
	// Heartbeat marks a report the driver asked for (Config.Heartbeat):
	// its test loss and accuracy are NaN. Built counts the cores built so
	// far: fewer than Nodes only while the run starts.
	Heartbeat bool
	Built     int
}

func (c *Config) validate() error {
	switch {
	case c.Nodes < 1 || c.Nodes > MaxNodes:
		return fmt.Errorf("nodes must be between 1 and %d, got %d", MaxNodes, c.Nodes)
	case c.ComputeTime < 0 || c.SyncTimeout < 0 || c.SyncInterval < 0 || c.DetectionDelay < 0 || c.FlushDelay < 0 || c.Tick < 0:
		return errors.New("compute time, sync timeout, sync interval, detection delay, flush delay and tick must be >= 0")
	case c.SendQueueBytes < 0:
		return fmt.Errorf("send queue bytes must be >= 0 (0 = %d), got %d", DefaultSendQueueBytes, c.SendQueueBytes)
	case c.Workers < 0 || c.Workers > MaxWorkers:
		return fmt.Errorf("workers must be between 1 and %d (0 = 1), got %d", MaxWorkers, c.Workers)
	}
	if c.Workers == 0 {
		c.Workers = 1
	}
	if err := c.Training.Validate(c.Train, c.Test); err != nil {
		return err
	}
	if err := netmodel.CheckTopology(&c.Topology); err != nil {
		return err
	}
	if err := netmodel.CheckSitesMode(&c.Sites); err != nil {
		return err
	}
	if c.WAN.Sites == 0 {
		lan, err := netmodel.ParseLinkProfile("lan")
		if err != nil {
			return err
		}
		lan.Loss, lan.Duplicate, lan.Reorder, lan.Jitter = c.WAN.Loss, c.WAN.Duplicate, c.WAN.Reorder, c.WAN.Jitter
		c.WAN = lan
	}
	if err := c.WAN.Validate(); err != nil {
		return err
	}
	if c.ComputeTime == 0 {
		c.ComputeTime = 10 * time.Millisecond
	}
	if c.SyncInterval == 0 {
		c.SyncInterval = 100 * time.Millisecond
	}
	if c.Tick == 0 {
		c.Tick = 10 * time.Millisecond
	}
	if bw := c.WAN.MinBandwidth(); c.Sync.ReplyRate == 0 && bw > 0 && !math.IsInf(bw, 0) {
		// What a node answers one requester follows the slowest link
		// (node.SyncConfig.ReplyRate).
		c.Sync.ReplyRate = max(1, int(bw*c.Tick.Seconds()))
	}
	if c.SendQueueBytes == 0 {
		c.SendQueueBytes = DefaultSendQueueBytes
	}
	if c.Sync.HeartbeatTicks == 0 {
		c.Sync.HeartbeatTicks = node.DefaultHeartbeatTicks
	}
	return nil
}

// fillDetection sets the failure detector's timeouts once the overlay's
// diameter is known: DetectionDelay's default, and from it SuspectTicks
// and DeadTicks unless they are set.
func (c *Config) fillDetection(diameter int) {
	if c.DetectionDelay == 0 {
		c.DetectionDelay = detectionDelay(*c, diameter)
	}
	if c.Sync.SuspectTicks == 0 {
		c.Sync.SuspectTicks = int((c.DetectionDelay + c.Tick - 1) / c.Tick)
	}
	if c.Sync.DeadTicks == 0 {
		c.Sync.DeadTicks = 4 * c.Sync.SuspectTicks
	}
}

// detectionDelay is Config.DetectionDelay's default over an overlay of the
// given diameter: four heartbeats, and the slowest way a member's sign of
// life takes: a member that trains says no hellos (node/liveness.go), so
// its updates, relayed hop by hop (a latency, a jitter and a flush delay
// each), are what the others hear of it; two latencies more cover a hello
// that a member starts saying when its updates stop.
func detectionDelay(c Config, diameter int) time.Duration {
	worst := c.WAN.MaxLatency() + c.WAN.Jitter
	return 4*time.Duration(c.Sync.HeartbeatTicks)*c.Tick + time.Duration(diameter+2)*worst + time.Duration(diameter)*c.FlushDelay
}

// syncTimeout is Config.SyncTimeout's default over an overlay of the given
// diameter.
func syncTimeout(cfg Config, diameter int) time.Duration {
	worst := cfg.WAN.MaxLatency() + cfg.WAN.Jitter
	return cfg.ComputeTime + 2*worst + time.Duration(diameter)*cfg.FlushDelay
}
