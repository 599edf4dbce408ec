package mesh

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/sketchmesh/sketchmesh/dataset"
	"github.com/sketchmesh/sketchmesh/node"
)

// DaemonConfig configures a long-running node: its core, its host, and how
// it keeps track of the mesh around it.
type DaemonConfig struct {
	// Mesh names the mesh; it names the membership topic, and joiners
	// asking for another mesh are refused.
	Mesh string
	// Host runs the join protocol and the membership topic.
	Host *Host
	// Transport carries updates and announcements to peers; nil takes
	// Host. A decorator wraps Host here.
	Transport Transport
	// Node is the core, started fresh (a founder) or from a snapshot (a
	// joiner). The daemon owns it from Run on.
	Node     *node.Node
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
	// Sites is "auto" (the default: measure round trips to the members,
	// announce this node's site label, and relay along the site-aware
	// overlay when the members' labels name two or more sites; see
	// sites.go) or "off" (announce no label: the whole mesh then keeps
	// the flat overlay). SiteProbeInterval is how often the round trips
	// are measured again. Default 30 s.
	Sites             string
	SiteProbeInterval time.Duration
	// Tick is the length of the core's tick (node.Node.Tick): every
	// membership timeout is counted in ticks. Default 100 ms.
	Tick time.Duration
	// Heartbeat is how often the node announces itself. Default 500 ms.
	Heartbeat time.Duration
	// DeadAfter is the floor of the silence after which a member is
	// suspected (the gate stops waiting for it); it is declared dead after
	// four times as long. Both grow with the mesh's observed round time.
	// Default 5 s.
	DeadAfter time.Duration
	// JoinTimeout bounds one join exchange. Default 30 s.
	JoinTimeout time.Duration
	// LeaveTimeout bounds how long a leaving node waits for the live
	// members to acknowledge its notice, and for its last sends. Default
	// 3 s.
	LeaveTimeout time.Duration
	// RelayWindow is how long a relay keeps collecting arrivals once it has
	// something to forward, so that it combines what several neighbours
	// sent into one message per next hop. 0 forwards at once;
	// AutoRelayWindow follows the node's own pace. Relays that arrive while
	// the node can train leave with its own update, and so does what a
	// window collected when an arrival opens the node's gate.
	RelayWindow time.Duration
	// Overlay, when set, builds the router over the live members instead
	// of Topology's (a testnet puts its attacker on the overlay with it).
	Overlay func(live []string, site map[string]string) node.Router
	// OverlayBroadcast sends announcements down this node's overlay trees
	// instead of over a GossipSub topic, each member forwarding those it
	// accepted (a duplicate or a forgery goes no further): a hello costs
	// one message per member. For a mesh whose members are all known at
	// start (a testnet); joiners need the topic.
	OverlayBroadcast bool
	// BudgetFromLinks makes the frame budget and the pace of answers to
	// sync requests follow the throughput measured on the links to this
	// node's next hops (Host.LinkRate, node.LinkRate): the slowest link
	// that has backed up, shared over the frames a link carries in an
	// exchange (node.AutoBudget), set at the end of every exchange. Links
	// that never backed up keep up: with none measured there is no budget.
	// What `run --budget auto` does; a testnet, whose links are modelled,
	// takes its budget from their profile instead. Needs error feedback
	// (what a budget cuts waits in the residual).
	BudgetFromLinks bool
	// Reliable says the links lose nothing (a testnet on loopback): the
	// node never asks for updates it lacks, since every one arrives and a
	// resend would only be a duplicate.
	Reliable bool
	// AfterTrain runs on the loop after every local iteration; took is how
	// long the iteration's computation ran. A testnet uses it to report
	// progress and to emulate slower nodes. It must return quickly.
	AfterTrain func(n *node.Node, took time.Duration)
	// Observe, when set, runs on the loop after every local iteration and
	// every tick, with the time blocked at the gate so far: a live view
	// copies the core's state out here, so that it also moves while the
	// node waits. It must return quickly.
	Observe func(n *node.Node, blocked time.Duration)
	// CheckpointEvery calls Checkpoint every so many iterations (0: only
	// at exit), at the end of the exchange that passes each multiple.
	// Checkpoint runs on the loop, between events.
	CheckpointEvery uint64
	Checkpoint      func(n *node.Node) error
	// Test rows are evaluated every EvalEvery iterations (at the end of
	// the exchange that passes each multiple) and at the end;
	// Evaluated, when set, is called on the loop after each evaluation
	// with its test loss (to keep the best model, say).
	Test      []dataset.Row
	EvalEvery uint64
	Evaluated func(n *node.Node, testLoss float64)
	// Progress is how often a progress line is logged. Default 5 s;
	// negative: never.
	Progress time.Duration
	// MinIteration pads iterations to at least this wall time, for demos
	// and tests that need a run to last; 0 trains as fast as it can.
	MinIteration time.Duration
	// Rejoin builds the core of a new incarnation member from its join
	// reply, when this node fell behind the frame history and must catch
	// up by snapshot (node/catchup.go); the daemon runs the join. nil: the
	// run ends with an error instead.
	Rejoin func(member string, reply *JoinReply) (*node.Node, error)
	// Metrics, when set, is kept up to date; it must be the core's
	// node.Config.Tracer (and that of every core Rejoin builds), which is
	// how it counts refusals.
	Metrics *Metrics
	// LiveView, when set, is kept up to date at every heartbeat and
	// evaluation, for the live web view (package liveview).
	LiveView *LiveBoard
	Logger   *slog.Logger
}

func (c *DaemonConfig) fill() error {
	if c.Host == nil || c.Node == nil {
		return errors.New("daemon: host and node are required")
	}
	if c.Mesh == "" {
		return errors.New("daemon: empty mesh name")
	}
	if err := c.tracedBy(c.Node); err != nil {
		return err
	}
	if c.RelayWindow < 0 && c.RelayWindow != AutoRelayWindow {
		return fmt.Errorf("daemon: relay window %v: want >= 0 or AutoRelayWindow", c.RelayWindow)
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
	switch c.Sites {
	case "":
		c.Sites = "auto"
	case "auto", "off":
	default:
		return fmt.Errorf("daemon: unknown sites mode %q (want auto or off)", c.Sites)
	}
	def(&c.SiteProbeInterval, 30*time.Second)
	def(&c.Tick, 100*time.Millisecond)
	def(&c.Heartbeat, 500*time.Millisecond)
	def(&c.DeadAfter, 5*time.Second)
	def(&c.JoinTimeout, 30*time.Second)
	def(&c.LeaveTimeout, 3*time.Second)
	if c.Progress == 0 {
		c.Progress = 5 * time.Second
	}
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
	// Steps counts optimizer steps; Clock exchanges (fewer with local
	// steps).
	Steps uint64
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
	Rejected                                  map[node.RejectReason]uint64
	Blocked, Wall                             time.Duration
	// Finished is when the node held its final model: its last iteration
	// run and every live member's last update in, before the leave
	// handshake (which waits a round trip for the acknowledgements). Zero
	// when the run was stopped first.
	Finished time.Time
	// Left is true when the run ended on a stop request rather than after
	// its iterations.
	Left bool
	// ViewDivergence counts members' view digests that differed from this
	// node's (node.SyncStats.ViewDivergence).
	ViewDivergence uint64
	// LeaveAcknowledgedBy are the members that acknowledged this node's
	// leave notice; MembersLiveAtLeave counts those it was sent to.
	LeaveAcknowledgedBy []string
	MembersLiveAtLeave  int
	// DirectPeers and RelayedPeers count the peers update streams ran
	// with: directly at some time, or through relays only.
	// UnreachableLinks counts the live members no stream could be opened
	// to for longer than the dead-member timeout.
	DirectPeers, RelayedPeers, UnreachableLinks int
}

// tracedBy checks that core reports its refusals to the daemon's metrics.
func (c *DaemonConfig) tracedBy(core *node.Node) error {
	if c.Metrics != nil && core.Config().Tracer != node.Tracer(c.Metrics) {
		return errors.New("daemon: the core's node.Config.Tracer must be DaemonConfig.Metrics, which counts its refusals")
	}
	return nil
}

// AutoRelayWindow, as DaemonConfig.RelayWindow, makes each window half the
// node's own iteration interval (the moving average of the time between
// its steps, blocked time included), from MinAutoRelayWindow to
// MaxAutoRelayWindow; before the node has stepped twice, it is
// FirstAutoRelayWindow. A node that waits at its gate for most of an
// iteration (many nodes sharing few cores, or a slow member holding the
// mesh) receives relays all along it: a fixed window of a few
// milliseconds sent each burst on, one message per next hop each time,
// while a window of half the iteration collects them into one or two.
// Where iterations are short the window is short, and a relay waits no
// more than half an iteration a hop either way. Measured on 32 testnet
// nodes on 2 cores (README, "Relays batch"): 9.4 messages per node and
// iteration against 11.1–12.5 with 5 ms, at the same wall time.
const AutoRelayWindow time.Duration = -1

// Bounds of the auto relay window (see AutoRelayWindow).
const (
	MinAutoRelayWindow   = time.Millisecond
	MaxAutoRelayWindow   = 50 * time.Millisecond
	FirstAutoRelayWindow = 5 * time.Millisecond
)

// autoRelayWindow is the window of AutoRelayWindow for a node whose
// iteration interval is round (0 before it is known).
func autoRelayWindow(round time.Duration) time.Duration {
	if round <= 0 {
		return FirstAutoRelayWindow
	}
	return min(max(round/2, MinAutoRelayWindow), MaxAutoRelayWindow)
}
