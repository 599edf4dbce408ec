package cmd

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/sketchmesh/sketchmesh/checkpoint"
	"github.com/sketchmesh/sketchmesh/dataset"
	"github.com/sketchmesh/sketchmesh/mesh"
	"github.com/sketchmesh/sketchmesh/model"
	"github.com/sketchmesh/sketchmesh/node"
)

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error {
	*l = append(*l, v)
	return nil
}

// runFlags are the flags of the run command.
type runFlags struct {
	config          string
	data, testData  string
	shard           string
	listen, join    listFlag
	announce, relay listFlag
	relayService    bool
	mesh            string
	dim             uint64
	seed            uint64
	topology        string
	sites           string
	key             string
	checkpointDir   string
	checkpointEvery uint64
	keepBest        bool
	metrics         string
	ui              uiFlags
	psk             string
	allow           string
	robust          string
	deadAfter       time.Duration
	heartbeat       time.Duration
	waitMembers     int
	relayWindow     time.Duration
	minIteration    time.Duration
	progress        time.Duration
	logFormat       string
	json            bool
	saveModel       string
	maxDropped      float64
	stream          streamFlags
	// batches is the stream of --stream, once it is open.
	batches  *streamSource
	history  int
	training trainingFlags
	// proposed are the settings the flags give, before the data gives
	// the dimension and the default rate (settings).
	proposed node.Settings
}

// meshWide ends the help of a setting the mesh holds: a joiner given it
// must give the mesh's value.
const meshWide = " (mesh-wide: a joiner takes the mesh's value; a value given to a joiner must match it)"

func (f *runFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.config, "config", "", "YAML file of flag values (keys are flag names); flags given on the command line win")
	fs.StringVar(&f.data, "data", "", "this node's training data: a LIBSVM file (plain or .gz) or a built-in set ("+strings.Join(dataset.BuiltinNames(), ", ")+")")
	fs.StringVar(&f.testData, "test-data", "", "test data, a LIBSVM file (default: the built-in set's test split, or 20% of --data held out)")
	fs.StringVar(&f.shard, "shard", "", "train on one part of --data: i/n takes the i-th of n equal parts (1-based), e.g. 2/3")
	fs.Var(&f.listen, "listen", "multiaddr to listen on, repeatable (default /ip4/0.0.0.0/tcp/4001 and /ip4/0.0.0.0/udp/4001/quic-v1; TCP only with --psk)")
	fs.Var(&f.join, "join", "multiaddr of a mesh member to join through, ending in /p2p/<peer id>; repeatable, tried in order (none: found a new mesh)")
	f.registerReach(fs)
	fs.StringVar(&f.mesh, "mesh", "sketchmesh", "mesh name: members of other meshes are refused")
	f.training.register(fs, runCommand)
	fs.Uint64Var(&f.dim, "dim", 0, "model dimension: the largest feature id with a weight (0 = the largest in --data)"+meshWide)
	fs.Uint64Var(&f.seed, "seed", 1, "seed for mini-batch sampling and the held-out test split")
	fs.StringVar(&f.topology, "topology", "halton", "overlay: halton (O(log P) links, relayed) or full")
	fs.StringVar(&f.sites, "sites", "auto", sitesHelp+"; a member with off announces no site, which keeps the whole mesh on the flat overlay")
	fs.StringVar(&f.key, "key", "", "file holding this node's libp2p key, created (mode 0600) if absent; keeps the peer id across restarts (default: a fresh key each start)")
	fs.StringVar(&f.checkpointDir, "checkpoint-dir", "", "directory for checkpoints; a node started with a checkpoint there resumes from it and rejoins")
	fs.Uint64Var(&f.checkpointEvery, "checkpoint-every", 10, "iterations between checkpoints (they are also written at exit)")
	fs.BoolVar(&f.keepBest, "keep-best", false, "also keep the model of the lowest test loss seen at an evaluation, as a checkpoint in --checkpoint-dir/best (a node started with --checkpoint-dir DIR/best resumes from it)")
	fs.StringVar(&f.psk, "psk", "", "file holding the mesh's pre-shared key: only peers with the same key can connect (TCP only: QUIC has no private networks)")
	fs.StringVar(&f.robust, "robust", "off", "screen of incoming updates beyond the NaN check and the norm bound: off, or clip (centered clipping, for meshes that may hold a faulty or malicious member)")
	fs.StringVar(&f.allow, "allow", "", "admit only these peers: peer ids separated by commas, or @FILE for a file of them, one per line")
	fs.StringVar(&f.metrics, "metrics", "", "serve Prometheus metrics at this host:port, e.g. 127.0.0.1:9090 (path /metrics)")
	f.ui.register(fs)
	fs.DurationVar(&f.deadAfter, "dead-after", 5*time.Second, "floor of the silence after which a member is suspected (the gate no longer waits for it); it is declared dead after four times as long; both grow to 10 of the mesh's slowest rounds")
	fs.DurationVar(&f.heartbeat, "heartbeat", 500*time.Millisecond, "how often the node announces itself on the membership topic when its own updates do not (it skips the hello while it sends an update of its own every quarter of --dead-after and counts every member live, but still says one each --dead-after)")
	fs.IntVar(&f.history, "history", 512, "own updates this node keeps for members that missed them, in iterations (>= 1); a member cut off for longer catches up by snapshot, as a new incarnation")
	fs.IntVar(&f.waitMembers, "wait-members", 1, "do not train until this many members (this one included) are live")
	f.relayWindow = mesh.AutoRelayWindow
	fs.Var(relayWindowFlag{&f.relayWindow}, "relay-window", relayWindowHelp)
	fs.DurationVar(&f.minIteration, "min-iteration-time", 0, "pad each iteration to at least this wall time, e.g. 20ms, so a demo or a test lasts long enough to watch (0 = as fast as it can)")
	fs.DurationVar(&f.progress, "progress", 5*time.Second, "how often a progress line is logged")
	fs.StringVar(&f.logFormat, "log-format", "text", "log format on stderr: text or json")
	fs.BoolVar(&f.json, "json", false, "print the final result as one JSON object on stdout")
	f.stream.register(fs)
	fs.Float64Var(&f.maxDropped, "max-dropped", defaultMaxDroppedPercent, "refuse to train, in percent, when more of this node's non-zeros than this lie above the mesh's dimension (or more of its rows have labels the mesh has no class for): its data does not fit the mesh")
	fs.StringVar(&f.saveModel, "save-model", "", "write this node's model to this file with every checkpoint (every --checkpoint-every iterations) and at the end, atomically")
}

// runReport is the run command's final JSON.
type runReport struct {
	Member           string                       `json:"member"`
	Peer             string                       `json:"peer"`
	Clock            uint64                       `json:"clock"`
	TestAccuracy     float64                      `json:"test_accuracy"`
	TestAUC          *float64                     `json:"test_auc,omitempty"`
	TestLoss         float64                      `json:"test_loss"`
	Members          int                          `json:"members"`
	Incarnations     int                          `json:"incarnations"`
	Live             int                          `json:"live"`
	Iterations       uint64                       `json:"iterations"`
	UpdatesFromStart uint64                       `json:"updates_from_snapshot"`
	UpdatesApplied   uint64                       `json:"updates_applied"`
	UpdatesHeld      uint64                       `json:"updates_held"`
	AppliedTwice     uint64                       `json:"applied_twice"`
	Rejected         map[node.RejectReason]uint64 `json:"rejected"`
	BlockedSeconds   float64                      `json:"blocked_seconds"`
	// ViewDivergence counts members whose digest of a committed row
	// differed from this node's (their replicas drifted apart).
	ViewDivergence uint64 `json:"view_divergence"`
	// BestTestLoss, BestIteration and BestClock describe the model
	// --keep-best kept: its optimizer steps, and its clock (exchanges),
	// which the checkpoint holds.
	BestTestLoss     *float64 `json:"best_test_loss,omitempty"`
	BestIteration    *uint64  `json:"best_iteration,omitempty"`
	BestClock        *uint64  `json:"best_clock,omitempty"`
	WallSeconds      float64  `json:"wall_seconds"`
	Stopped          bool     `json:"stopped"`
	Resumed          bool     `json:"resumed_from_checkpoint"`
	DirectPeers      int      `json:"direct_peers"`
	RelayedPeers     int      `json:"relayed_peers"`
	UnreachableLinks int      `json:"unreachable_links"`
	// LeaveAcknowledgedBy lists the members that acknowledged this node's
	// leave notice, out of MembersLiveAtLeave it was sent to.
	LeaveAcknowledgedBy []string `json:"leave_acknowledged_by"`
	MembersLiveAtLeave  int      `json:"members_live_at_leave"`
	// Clock counts optimizer steps, as Iterations does; Exchanges the
	// updates this node made (fewer with local steps).
	Exchanges uint64 `json:"exchanges"`
}

func runRun(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("run", "run --data FILE [--join MULTIADDR]... [flags]", "Runs one long-lived node: it founds a mesh, or joins one through any member's multiaddr, trains on its own data and trades updates with the mesh until its iterations are done or it is stopped (SIGINT/SIGTERM: it leaves with notice).", stderr)
	var f runFlags
	f.register(fs)
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	if f.config != "" {
		if err := applyConfigFile(fs, f.config); err != nil {
			return usageError{err}
		}
	}
	explicit := explicitSettings(fs)
	logger, err := runLogger(stderr, f.logFormat, f.training.logLevel)
	if err != nil {
		return err
	}
	if err := f.check(); err != nil {
		return err
	}
	if f.proposed, err = f.training.settings(flagGiven(fs, node.SettingErrorFeedback), slices.Contains(explicit, node.SettingStaleness)); err != nil {
		return err
	}
	joinAddrs, err := parseJoin(f.join)
	if err != nil {
		return err
	}
	// Every listener is checked before anything is printed: a port in use
	// is bad input, found at once.
	if err := mesh.CheckListen(f.listenAddrs()); err != nil {
		return badInput("--listen %w", err)
	}
	var metricsListener net.Listener
	if f.metrics != "" {
		if metricsListener, err = mesh.ListenTCP(f.metrics); err != nil {
			return badInput("--metrics %s: %w", f.metrics, err)
		}
		defer metricsListener.Close()
	}
	uiListener, err := f.ui.listen()
	if err != nil {
		return err
	}
	if uiListener != nil {
		defer uiListener.Close()
	}
	key, err := f.identity(logger)
	if err != nil {
		return err
	}
	if f.checkpointDir != "" {
		release, err := checkpoint.Lock(f.checkpointDir)
		if err != nil {
			return fmt.Errorf("--checkpoint-dir: %w", err)
		}
		defer func() {
			if err := release(); err != nil {
				logger.Warn("release the checkpoint directory", "dir", f.checkpointDir, "err", err)
			}
		}()
	}
	saved, err := f.loadCheckpoint(key)
	if err != nil {
		return err
	}
	var train, test *dataset.Dataset
	var stream *streamed
	if f.stream.on {
		if stream, err = f.stream.prepare(fs, f.data, f.testData, f.training.format, f.training.model, f.training.hashBits, f.dim, &f.training.batch); err != nil {
			return err
		}
		if _, _, err := parseShard(f.shard); err != nil {
			return err
		}
		train, test = stream.train, stream.test
	} else {
		if train, test, err = loadData(f.data, f.testData, f.seed, f.training.hashBits, f.training.format); err != nil {
			return err
		}
		if train, err = takeShard(train, f.shard); err != nil {
			return err
		}
	}
	warnSparseIDs(logger, train, 1)

	hostCfg := mesh.HostConfig{ListenAddrs: f.listenAddrs(), Key: key, Logger: logger, Reach: f.reachConfig()}
	if err := f.privacy(&hostCfg, logger); err != nil {
		return err
	}
	host, err := mesh.NewHost(hostCfg)
	if errors.Is(err, mesh.ErrAddrInUse) {
		return usageError{err}
	}
	if err != nil {
		return err
	}
	defer host.Close()
	// Unix milliseconds make each start a new incarnation, later than any
	// before it on this peer.
	self := mesh.MemberID(host.Libp2p().ID(), uint64(time.Now().UnixMilli()))
	fmt.Fprintf(stdout, "peer id: %s\nmember: %s\n", host.ID(), self)
	for _, a := range host.Addrs() {
		fmt.Fprintf(stdout, "listening: %s\n", a)
	}

	// The founder's settings come from its flags (or its checkpoint); a
	// joiner's from the mesh.
	rateRows := train
	if stream != nil {
		// The test rows stand for the stream's in the default SGD rate.
		rateRows = test
	}
	settings, err := f.founderSettings(train, rateRows, saved)
	if err != nil {
		return err
	}
	var reply *mesh.JoinReply
	var snapshotsRefused map[node.RejectReason]uint64
	if len(joinAddrs) > 0 {
		signer, err := mesh.NewKeyAuthenticator(f.mesh, self, key)
		if err != nil {
			return err
		}
		reply, snapshotsRefused, err = mesh.JoinAny(ctx, host, joinAddrs, mesh.JoinRequest{
			Mesh: f.mesh, Member: self, Settings: settings, Explicit: explicit, Addrs: addrStrings(host),
		}, signer.SignMessage, 30*time.Second, logger)
		if err != nil {
			return err
		}
		settings = reply.Settings
		if reply.Admission.Member != self {
			self = reply.Admission.Member
			fmt.Fprintf(stdout, "member: %s (the join was retried as a new incarnation)\n", self)
		}
	}
	if settings.HashBits != f.training.hashBits {
		// The mesh (or the checkpoint) hashes ids and this node was not
		// told: map its data the mesh's way.
		if f.training.hashBits != 0 {
			return fmt.Errorf("this node's data was hashed with --hash-bits %d, the mesh trains with %d", f.training.hashBits, settings.HashBits)
		}
		train, test = train.Hashed(settings.HashBits), test.Hashed(settings.HashBits)
	}
	fitRows := train
	if stream != nil {
		// A stream's fit is judged on its first rows.
		fitRows = test
		part, parts, _ := parseShard(f.shard)
		stream.opts.HashBits = settings.HashBits
		if f.batches, err = stream.open(part-1, parts, int(f.training.batch), f.seed); err != nil {
			return err
		}
		defer f.batches.Close()
	}
	if err := checkFit(fitRows, settings, f.maxDropped, logger); err != nil {
		return err
	}
	if saved != nil && saved.Settings.Conflict(settings, node.SettingNames()) != nil {
		return fmt.Errorf("checkpoint in %s was written for other settings: %w", f.checkpointDir, saved.Settings.Conflict(settings, node.SettingNames()))
	}
	auth, err := mesh.NewKeyAuthenticator(f.mesh, self, key)
	if err != nil {
		return err
	}
	// Refusals are counted by the cores' tracer, so that the report's
	// counts go on across a rejoin, which starts a new core: by the
	// metrics when they are served, else by a tally.
	var metrics *mesh.Metrics
	tally := &node.RejectTally{}
	var tracer node.Tracer = tally
	if metricsListener != nil {
		metrics = mesh.NewMetrics()
		tracer = metrics
		defer serveMetrics(metricsListener, metrics, logger)()
	}
	core, err := f.newCore(self, settings, train, reply, saved, auth, tracer)
	if err != nil {
		return err
	}
	var liveBoard *mesh.LiveBoard
	if uiListener != nil {
		liveBoard = mesh.NewLiveBoard()
		say := func(url string) { logger.Info("serving the live view", "url", url) }
		_, stop := serveUI(uiListener, liveBoard, f.ui.public, say, logger)
		defer stop()
	}
	var peers []mesh.PeerRecord
	if reply != nil {
		peers = reply.Members
	}
	daemonCfg := mesh.DaemonConfig{
		Mesh: f.mesh, Host: host, Node: core, Settings: settings, Peers: peers, MinMembers: f.waitMembers,
		Topology: f.topology, Sites: f.sites, Heartbeat: f.heartbeat, DeadAfter: f.deadAfter, RelayWindow: f.relayWindow,
		CheckpointEvery: f.checkpointEvery, Test: test.Rows, EvalEvery: f.training.evalInterval(settings.Iterations), Metrics: metrics, LiveView: liveBoard, Logger: logger,
		MinIteration: f.minIteration, Progress: f.progress,
		// --budget auto: links are not modelled here, so the budget
		// follows what they are measured to carry once training runs.
		BudgetFromLinks: (f.training.exchange.budgetAuto || f.training.exchange.budgetMeasured) && settings.ErrorFeedback && settings.Factors == node.FactorsOff,
	}
	// A member that fell behind the frame history rejoins as a new
	// incarnation: the daemon runs the join, this builds the new core.
	daemonCfg.Rejoin = func(member string, reply *mesh.JoinReply) (*node.Node, error) {
		auth, err := mesh.NewKeyAuthenticator(f.mesh, member, key)
		if err != nil {
			return nil, err
		}
		return f.newCore(member, settings, train, reply, nil, auth, tracer)
	}
	models := modelSaver{path: f.saveModel, settings: settings, mesh: f.mesh, data: []string{train.Name, test.Name}}
	if f.checkpointDir != "" || f.saveModel != "" {
		daemonCfg.Checkpoint = func(n *node.Node) error {
			if f.checkpointDir != "" {
				if err := mesh.SaveCheckpoint(f.checkpointDir, f.mesh, settings, n); err != nil {
					return err
				}
			}
			return models.save(n)
		}
	}
	var best *keptBest
	if f.keepBest {
		best = &keptBest{dir: filepath.Join(f.checkpointDir, "best"), mesh: f.mesh, settings: settings, logger: logger}
		daemonCfg.Evaluated = best.observe
	}
	daemon, err := mesh.NewDaemon(ctx, daemonCfg)
	if err != nil {
		return err
	}
	logger.Info("node started", "member", self, "clock", core.Clock(), "members", len(core.Members()),
		"founder", reply == nil, "resumed", saved != nil, "iterations", settings.Iterations)
	res, err := daemon.Run(ctx)
	if err != nil {
		return dataError(err)
	}
	// The daemon saved the model at exit, but it can only log a failure:
	// save again unless that save of the final clock succeeded.
	if err := models.final(core); err != nil {
		return err
	}
	rep := runReport{
		Member: res.Member, Peer: host.ID(), Clock: res.Steps, Exchanges: res.Clock, TestAccuracy: res.Accuracy, TestLoss: res.Loss,
		Members: res.Members, Incarnations: res.Incarnations, Live: res.Live, Iterations: settings.Iterations, UpdatesFromStart: res.FromSnapshot, UpdatesApplied: res.Applied,
		UpdatesHeld: res.Held, AppliedTwice: res.AppliedTwice, Rejected: tally.Counts(), ViewDivergence: res.ViewDivergence,
		BlockedSeconds: res.Blocked.Seconds(), WallSeconds: res.Wall.Seconds(), Stopped: res.Left, Resumed: saved != nil,
		DirectPeers: res.DirectPeers, RelayedPeers: res.RelayedPeers, UnreachableLinks: res.UnreachableLinks,
		LeaveAcknowledgedBy: res.LeaveAcknowledgedBy, MembersLiveAtLeave: res.MembersLiveAtLeave,
	}
	if metrics != nil {
		rep.Rejected = metrics.Rejected()
	}
	// Snapshots refused at the join count with what the cores refused.
	for reason, k := range snapshotsRefused {
		rep.Rejected[reason] += k
	}
	if rep.LeaveAcknowledgedBy == nil {
		rep.LeaveAcknowledgedBy = []string{}
	}
	// The daemon's last evaluation carries loss and accuracy; AUC is taken
	// here from the same final view (the core is no longer running).
	if len(test.Rows) > 0 {
		rep.TestAUC = present(core.Evaluate(test.Rows).AUC)
	}
	auc := ""
	if rep.TestAUC != nil {
		auc = fmt.Sprintf(", AUC %.4f", *rep.TestAUC)
	}
	if best != nil && best.saved {
		rep.BestTestLoss, rep.BestIteration, rep.BestClock = &best.loss, &best.steps, &best.clock
	}
	if f.json {
		enc := json.NewEncoder(stdout)
		return enc.Encode(rep)
	}
	fmt.Fprintf(stdout, "%s: test accuracy %.2f %%, test loss %.4f%s; %s; %d updates held, %d applied twice; blocked %.1f s of %.1f s at the staleness gate; peers %d direct, %d relayed, %d unreachable\n",
		outcome(rep, res.Trained), 100*rep.TestAccuracy, rep.TestLoss, auc, membersText(rep), rep.UpdatesHeld, rep.AppliedTwice,
		rep.BlockedSeconds, rep.WallSeconds, rep.DirectPeers, rep.RelayedPeers, rep.UnreachableLinks)
	if rep.BestTestLoss != nil {
		fmt.Fprintf(stdout, "best test loss %.4f at iteration %d (clock %d), kept in %s\n", *rep.BestTestLoss, *rep.BestIteration, *rep.BestClock, best.dir)
	}
	return nil
}

// keptBest keeps the model of the lowest test loss as a checkpoint
// (--keep-best): a long run that overfits still has its best model.
type keptBest struct {
	dir      string
	mesh     string
	settings node.Settings
	logger   *slog.Logger
	saved    bool
	loss     float64
	// steps and clock are the kept model's optimizer steps and exchanges.
	steps, clock uint64
}

// observe runs on the daemon's loop after each evaluation.
func (b *keptBest) observe(n *node.Node, loss float64) {
	if b.saved && !(loss < b.loss) || math.IsNaN(loss) {
		return
	}
	if err := mesh.SaveCheckpoint(b.dir, b.mesh, b.settings, n); err != nil {
		b.logger.Error("best model not kept; training goes on", "dir", b.dir, "err", err)
		return
	}
	b.saved, b.loss, b.steps, b.clock = true, loss, n.Steps(), n.Clock()
	b.logger.Debug("best model kept", "iteration", b.steps, "clock", b.clock, "test_loss", mesh.Sig4(loss), "dir", b.dir)
}

// outcome says how a run ended: its iterations done, or stopped, and where.
func outcome(r runReport, trained bool) string {
	total := "∞"
	if r.Iterations > 0 {
		total = strconv.FormatUint(r.Iterations, 10)
	}
	switch {
	case !trained && r.Stopped:
		return "stopped before training"
	case r.Stopped || (r.Iterations > 0 && r.Clock < r.Iterations):
		return fmt.Sprintf("stopped at %d/%s", r.Clock, total)
	}
	return fmt.Sprintf("finished %d/%s", r.Clock, total)
}

// membersText counts the nodes of the mesh apart from their incarnations
// (a restarted node is a new incarnation of the same node).
func membersText(r runReport) string {
	s := fmt.Sprintf("%d of %d members live", r.Live, r.Members)
	if r.Incarnations != r.Members {
		s += fmt.Sprintf(" (%d incarnations)", r.Incarnations)
	}
	return s
}

// explicitSettings lists the mesh-wide settings given on the command line
// or in the config file.
func explicitSettings(fs *flag.FlagSet) []string {
	var out []string
	fs.Visit(func(fl *flag.Flag) {
		// --local-steps auto asks for the mesh's local steps, whatever they are.
		if fl.Name == "local-steps" && fl.Value.String() == autoSetting {
			return
		}
		if slices.Contains(node.SettingNames(), fl.Name) {
			out = append(out, fl.Name)
		}
	})
	return out
}

func (f *runFlags) check() error {
	if f.data == "" {
		return badInput("--data is required: this node's training data")
	}
	for _, c := range []struct {
		name, v string
		allowed []string
	}{
		{"topology", f.topology, []string{"halton", "full"}},
		{"sites", f.sites, []string{"auto", "off"}},
		{"log-format", f.logFormat, []string{"text", "json"}},
		{"robust", f.robust, []string{"off", "clip"}},
	} {
		if err := oneOf(c.name, c.v, c.allowed...); err != nil {
			return err
		}
	}
	switch {
	case f.deadAfter <= 0:
		return badInput("--dead-after %v: want > 0", f.deadAfter)
	case f.heartbeat <= 0:
		return badInput("--heartbeat %v: want > 0", f.heartbeat)
	case f.waitMembers < 1:
		return badInput("--wait-members %d: want >= 1", f.waitMembers)
	case f.history < 1:
		return badInput("--history %d: want >= 1", f.history)
	case f.minIteration < 0:
		return badInput("--min-iteration-time %v: want >= 0", f.minIteration)
	case f.keepBest && f.checkpointDir == "":
		return badInput("--keep-best needs --checkpoint-dir: the best model is kept in DIR/best")
	case f.progress <= 0:
		return badInput("--progress %v: want > 0", f.progress)
	case !(f.maxDropped >= 0 && f.maxDropped <= 100):
		return badInput("--max-dropped %v: want a percentage from 0 to 100", f.maxDropped)
	case f.mesh == "" || len(f.mesh) > 64 || strings.ContainsAny(f.mesh, "/ \t\n"):
		return badInput("--mesh %q: want 1 to 64 characters without slashes or spaces", f.mesh)
	}
	for _, l := range f.listen {
		if _, err := ma.NewMultiaddr(l); err != nil {
			return badInput("--listen %q is not a multiaddr: %v", l, err)
		}
	}
	return f.checkReach()
}

func runLogger(stderr io.Writer, format, level string) (*slog.Logger, error) {
	l, err := parseLevel(level)
	if err != nil {
		return nil, err
	}
	opts := &slog.HandlerOptions{Level: l}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(stderr, opts)), nil
	}
	return slog.New(slog.NewTextHandler(stderr, opts)), nil
}

func parseJoin(list []string) ([]ma.Multiaddr, error) {
	var out []ma.Multiaddr
	for _, s := range list {
		m, err := ma.NewMultiaddr(s)
		if err != nil {
			return nil, badInput("--join %q is not a multiaddr: %v", s, err)
		}
		if _, err := m.ValueForProtocol(ma.P_P2P); err != nil {
			return nil, badInput("--join %q has no /p2p/<peer id> part: a member's full address is printed at its start", s)
		}
		out = append(out, m)
	}
	return out, nil
}

func (f *runFlags) identity(logger *slog.Logger) (crypto.PrivKey, error) {
	if f.key == "" {
		if f.checkpointDir != "" {
			return nil, badInput("--checkpoint-dir needs --key: a checkpoint belongs to one peer identity")
		}
		logger.Warn("no --key: this node gets a fresh identity; restarts will not keep its peer id")
		key, _, err := crypto.GenerateEd25519Key(nil)
		if err != nil {
			return nil, fmt.Errorf("generate a key: %w", err)
		}
		return key, nil
	}
	key, created, err := loadOrCreateKey(f.key)
	if err != nil {
		return nil, usageError{fmt.Errorf("--key: %w", err)}
	}
	if created {
		logger.Info("created key file", "path", f.key)
	}
	return key, nil
}

// loadCheckpoint reads the checkpoint of --checkpoint-dir, if there is one,
// and checks that it belongs to this key and mesh (mesh.LoadCheckpoint).
func (f *runFlags) loadCheckpoint(key crypto.PrivKey) (*checkpoint.State, error) {
	if f.checkpointDir == "" {
		return nil, nil
	}
	self, err := peer.IDFromPrivateKey(key)
	if err != nil {
		return nil, err
	}
	st, err := mesh.LoadCheckpoint(f.checkpointDir, self, f.mesh)
	if errors.Is(err, mesh.ErrForeignCheckpoint) {
		return nil, badInput("--checkpoint-dir %w", err)
	}
	if err != nil {
		return nil, fmt.Errorf("--checkpoint-dir %w", err)
	}
	return st, nil
}

// founderSettings are the settings this node proposes: its checkpoint's
// when resuming, else its flags, with the dimension and classes from its
// data unless given.
func (f *runFlags) founderSettings(train, rateRows *dataset.Dataset, saved *checkpoint.State) (node.Settings, error) {
	if saved != nil {
		return saved.Settings, nil
	}
	mdl, err := model.NewModel(f.proposed.Model, f.proposed.L2, train)
	if err != nil {
		return node.Settings{}, modelError(train, err)
	}
	s := f.proposed
	s.MaxFeature, s.Classes = f.dim, mdl.Config().Classes
	if s.MaxFeature == 0 {
		s.MaxFeature = mdl.Config().MaxFeature
	}
	if s, err = withDefaultRate(s, rateRows); err != nil {
		return node.Settings{}, err
	}
	if _, _, _, err := s.Build(); err != nil {
		return node.Settings{}, usageError{err}
	}
	return s, nil
}

// newCore builds the node core (mesh.NewCore) from this node's own
// settings: its batch, seed, shard or stream, budget, screen and history;
// tracer (nil for none) hears of its applies and refusals.
func (f *runFlags) newCore(self string, s node.Settings, train *dataset.Dataset, reply *mesh.JoinReply, saved *checkpoint.State, auth node.Authenticator, tracer node.Tracer) (*node.Node, error) {
	cfg := node.Config{
		ID: self, Seed: f.seed, Shard: train.Rows, Auth: auth, Tracer: tracer,
		BudgetBytes: f.training.exchange.budget, Priority: node.PriorityMode(f.training.exchange.priority),
		Sync: node.SyncConfig{History: f.history},
	}
	if f.batches != nil {
		// A rejoined core goes on with the stream where the last left it.
		cfg.Batches, cfg.BatchSize = f.batches, int(f.training.batch)
	} else {
		cfg.BatchSize = node.BatchRows(f.training.batch, len(train.Rows))
	}
	if f.robust == "clip" {
		var err error
		if cfg.Robust, err = node.NewRobust(node.RobustConfig{Clip: true}); err != nil {
			return nil, err
		}
	}
	return mesh.NewCore(s, cfg, mesh.Start{Reply: reply, Saved: saved})
}

// modelSaver writes --save-model for the checkpoint hook and at the end.
type modelSaver struct {
	path     string
	settings node.Settings
	mesh     string
	data     []string
	saved    bool
	clock    uint64
}

func (m *modelSaver) save(n *node.Node) error {
	if m.path == "" {
		return nil
	}
	m.saved = false
	if err := writeModel(m.path, savedModel(m.settings, n.View(), m.mesh, n.ID(), n.Clock(), m.data...)); err != nil {
		return err
	}
	m.saved, m.clock = true, n.Clock()
	return nil
}

// final saves the model of a finished run unless its last save holds it.
func (m *modelSaver) final(n *node.Node) error {
	if m.path == "" || m.saved && m.clock == n.Clock() {
		return nil
	}
	return m.save(n)
}

// privacy applies --psk and --allow to the host's configuration.
func (f *runFlags) privacy(cfg *mesh.HostConfig, logger *slog.Logger) error {
	if f.psk != "" {
		psk, err := mesh.LoadPSK(f.psk)
		if err != nil {
			return usageError{fmt.Errorf("--psk: %w", err)}
		}
		cfg.PSK = psk
		logger.Info("private mesh: connections need the pre-shared key; transports limited to TCP")
	}
	if f.allow != "" {
		var ids []peer.ID
		var err error
		if path, ok := strings.CutPrefix(f.allow, "@"); ok {
			ids, err = mesh.LoadAllow(path)
		} else {
			ids, err = mesh.ParseAllow(f.allow)
		}
		if err != nil {
			return usageError{fmt.Errorf("--allow: %w", err)}
		}
		cfg.Allow = mesh.NewAllowList(ids...)
		logger.Info("allow list: only listed peers may connect", "peers", len(ids))
	}
	return nil
}

// takeShard applies --shard i/n.
func takeShard(d *dataset.Dataset, spec string) (*dataset.Dataset, error) {
	if spec == "" {
		return d, nil
	}
	i, n, err := parseShard(spec)
	if err != nil {
		return nil, err
	}
	if len(d.Rows) < n {
		return nil, badInput("--shard %s: %s has only %d rows", spec, d.Name, len(d.Rows))
	}
	return d.Shard(i-1, n), nil
}

// parseShard reads --shard i/n (1-based); "" is 1/1.
func parseShard(spec string) (i, n int, err error) {
	if spec == "" {
		return 1, 1, nil
	}
	is, ns, ok := strings.Cut(spec, "/")
	i, err1 := strconv.Atoi(is)
	n, err2 := strconv.Atoi(ns)
	if !ok || err1 != nil || err2 != nil || n < 1 || i < 1 || i > n {
		return 0, 0, badInput("--shard %q: want i/n with 1 <= i <= n, e.g. 2/3", spec)
	}
	return i, n, nil
}

func addrStrings(h *mesh.Host) []string {
	var out []string
	for _, a := range h.Libp2p().Addrs() {
		out = append(out, a.String())
	}
	return out
}

// serveMetrics serves /metrics on ln until the returned stop is called.
func serveMetrics(ln net.Listener, m *mesh.Metrics, logger *slog.Logger) func() {
	mux := http.NewServeMux()
	mux.Handle("/metrics", m.Handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("metrics server stopped", "err", err)
		}
	}()
	logger.Info("serving metrics", "url", "http://"+ln.Addr().String()+"/metrics")
	return func() { _ = srv.Close() }
}
