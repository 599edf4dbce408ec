package cmd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"time"

	"github.com/sketchmesh/sketchmesh/dataset"
	"github.com/sketchmesh/sketchmesh/model"
	"github.com/sketchmesh/sketchmesh/netmodel"
	"github.com/sketchmesh/sketchmesh/node"
	"github.com/sketchmesh/sketchmesh/sim"
)

// simulateStatusEvery is the longest simulate stays silent: a run
// without a progress line for that long prints a status line (cores
// built, or the slowest and fastest clocks, simulated time and bytes
// sent), since at P = 10,000 an iteration can take minutes. A variable
// for the tests.
var simulateStatusEvery = 30 * time.Second

func runSimulate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("simulate", "simulate [flags]", "Runs the node core of every member as a discrete-event simulation on a virtual clock, its nodes dealt over --workers goroutines, replayable by seed and workers.", stderr)
	nodes := fs.Int("nodes", 64, fmt.Sprintf("number of simulated nodes (1-%d)", sim.MaxNodes))
	data := fs.String("data", "rcv1", "training data: a built-in set ("+strings.Join(dataset.BuiltinNames(), ", ")+") or a LIBSVM file (plain or .gz)")
	testData := fs.String("test-data", "", "test data, a LIBSVM file (default: the built-in set's test split, or 20% of --data held out)")
	var training trainingFlags
	training.register(fs, simulateCommand)
	seed := fs.Uint64("seed", 1, "seed of every random choice: data, links, faults; the same seed and --workers give the same trace hash")
	workers := fs.Int("workers", 2, fmt.Sprintf("goroutines that run the nodes, 1-%d: they advance in windows of the least link latency; the trace depends on the seed and this number, not on the machine", sim.MaxWorkers))
	topology := fs.String("topology", "halton", "overlay: halton or full")
	sites := fs.String("sites", "auto", sitesHelp)
	wan := fs.String("wan", "lan", "modelled network: lan, geo3 or latency=50ms,bandwidth=100Mbit, optionally followed by ,loss=0.01 ,jitter=5ms ,dup=0.001 ,reorder=0.01")
	computeTime := fs.Duration("compute-time", 10*time.Millisecond, "virtual compute time of one iteration")
	relayWindow := fs.Duration("relay-window", 10*time.Millisecond, "virtual time a node collects arrivals before forwarding them, so relays batch per next hop; relays held when the node sends its own update leave with it (0 = forward at once)")
	faults := fs.String("faults", "", "file of the fault script: one step per line, e.g. 'at 20: kill 25%', 'at 30: partition 0-7 | 8-15', 'at 40: heal', 'at 45: join 2' (sim/testdata/scenarios has examples)")
	asJSON := fs.Bool("json", false, "print one JSON report on stdout instead of the summary")
	history := fs.Int("history", 4096, "own updates each node keeps for members that missed them, in iterations (>= 1); a node cut off for longer catches up by snapshot, as a new incarnation")
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	settings, err := training.settings(false, flagGiven(fs, "staleness"))
	if err != nil {
		return err
	}
	for _, c := range []struct {
		name, v string
		allowed []string
	}{
		{"topology", *topology, netmodel.Topologies},
		{"sites", *sites, netmodel.SitesModes},
	} {
		if err := oneOf(c.name, c.v, c.allowed...); err != nil {
			return err
		}
	}
	switch {
	case *nodes < 1 || *nodes > sim.MaxNodes:
		return badInput("--nodes %d: want 1 to %d", *nodes, sim.MaxNodes)
	case *computeTime <= 0:
		return badInput("--compute-time %v: want > 0", *computeTime)
	case *relayWindow < 0:
		return badInput("--relay-window %v: want >= 0", *relayWindow)
	case *history < 1:
		return badInput("--history %d: want >= 1", *history)
	case *workers < 1 || *workers > sim.MaxWorkers:
		return badInput("--workers %d: want 1 to %d", *workers, sim.MaxWorkers)
	}
	link, err := netmodel.ParseLinkProfile(*wan)
	if err != nil {
		return usageError{fmt.Errorf("--wan: %w", err)}
	}
	if training.exchange.budgetMeasured {
		return badInput("--budget measured: the simulator's links carry no writes to measure; give auto (from the modelled links), 0 or a byte count")
	}
	// --budget auto shares what the slowest modelled link carries in an
	// exchange's period (--local-steps auto was resolved with the settings).
	training.exchange.resolveBudget(link, exchangePeriod(linkRound(link), *computeTime, training.exchange.localSteps), *nodes, *topology, settings.Codec, settings.ErrorFeedback, false)
	settings.LocalSteps = training.exchange.localSteps
	settings.Staleness = training.exchange.staleness(training.staleness, flagGiven(fs, "staleness"))
	var scenario *sim.Scenario
	if *faults != "" {
		f, err := os.Open(*faults)
		if err != nil {
			return usageError{fmt.Errorf("--faults: %w", err)}
		}
		scenario, err = sim.ParseScenario(f, *faults)
		f.Close()
		if err != nil {
			return usageError{fmt.Errorf("--faults: %w", err)}
		}
	}
	train, test, err := loadData(*data, *testData, *seed, settings.HashBits, training.format)
	if err != nil {
		return err
	}
	if _, err := model.NewModel(settings.Model, settings.L2, train); err != nil {
		return modelError(train, err)
	}
	if settings, err = withDefaultRate(settings, train); err != nil {
		return err
	}
	lr := settings.LearningRate
	logger, err := newLogger(stderr, training.logLevel)
	if err != nil {
		return err
	}
	warnSparseIDs(logger, train, *nodes)
	cfg := sim.Config{
		Nodes: *nodes, Train: train, Test: test, Training: training.trainingOf(settings, *seed),
		Topology: *topology, Sites: *sites, WAN: link,
		ComputeTime: *computeTime, FlushDelay: *relayWindow, Faults: scenario,
		Sync:      node.SyncConfig{History: *history},
		EvalEvery: int(training.evalInterval(settings.Iterations)),
		Workers:   *workers,
	}
	fmt.Fprintf(stderr, "simulate: %d nodes, %s on %s, %s overlay, network %s, staleness %d, %s, %d iterations, seed %d, %d workers\n",
		cfg.Nodes, cfg.Model, train.Name, cfg.Topology, *wan, cfg.Staleness, training.exchange.describe(), cfg.Iterations, cfg.Seed, cfg.Workers)
	if strings.HasPrefix(*data, dataset.SynthPrefix) {
		fmt.Fprintf(stderr, "test data: %s\n", test.Name)
	}
	if limit := limitMemory(); limit > 0 {
		fmt.Fprintf(stderr, "memory: soft limit %.1f GiB, nine tenths of what is available (GOMEMLIMIT sets another)\n", float64(limit)/(1<<30))
	}
	start := time.Now()
	lastLine := start
	cfg.Heartbeat = func() bool { return time.Since(lastLine) >= simulateStatusEvery }
	var watch model.LossWatch
	cfg.Progress = func(p sim.Progress) {
		lastLine = time.Now()
		if p.Heartbeat {
			if p.Built < cfg.Nodes {
				fmt.Fprintf(stderr, "building cores %d/%d  wall %.1fs\n", p.Built, cfg.Nodes, time.Since(start).Seconds())
				return
			}
			clocks := "no live node"
			if p.Live > 0 {
				clocks = fmt.Sprintf("iterations %d to %d", p.Iteration, p.Fastest)
			}
			fmt.Fprintf(stderr, "running  %s  simulated %.2fs  live %d  sent %s (membership %s)  wall %.1fs\n",
				clocks, p.SimulatedSeconds, p.Live, humanBytes(float64(p.BytesSent)), humanBytes(float64(p.MembershipBytes)), time.Since(start).Seconds())
			return
		}
		if p.Step == "" {
			if msg := watch.Observe(p.TestLoss); msg != "" {
				defer logger.Warn(msg, "iteration", p.Iteration, "lr", lr)
			}
		}
		acc := ""
		if !math.IsNaN(p.TestAccuracy) {
			acc = fmt.Sprintf("  test_acc %6.2f%%", 100*p.TestAccuracy)
		}
		step := ""
		if p.Step != "" {
			step = "  [" + p.Step + "]"
		}
		fmt.Fprintf(stderr, "iter %4d/%d  simulated %.2fs  live %d  test_loss %.4f%s  sent %s  wall %.1fs%s\n",
			p.Iteration, cfg.Iterations, p.SimulatedSeconds, p.Live, p.TestLoss, acc, humanBytes(float64(p.BytesSent)), time.Since(start).Seconds(), step)
	}
	rep, err := sim.Run(ctx, cfg)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false) // assertion steps hold <= and >=
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		joined := ""
		if rep.Joined > 0 {
			joined = fmt.Sprintf(", %d joined", rep.Joined)
		}
		fmt.Fprintf(stdout, "%d nodes (%d live at the end%s), %d iterations: %.2f simulated seconds in %.2f wall seconds, %.0f node-iterations per wall second\n",
			rep.Nodes, rep.LiveNodes, joined, rep.Iterations, rep.SimulatedSeconds, rep.WallSeconds, rep.NodeIterationsPerSecond)
		fmt.Fprintf(stdout, "final test accuracy %s, test loss %.4f (mean over live nodes)\n", pct(rep.FinalTestAccuracy), rep.FinalTestLoss)
		fmt.Fprintf(stdout, "per node per iteration: %.2f messages, %s; staleness max %d, mean %.2f; %.2f s blocked per node\n",
			rep.MessagesPerNodePerIteration, humanBytes(rep.BytesPerNodePerIteration), rep.StalenessObservedMax, rep.StalenessObservedMean, rep.BlockedSecondsPerNode)
		inv := rep.Invariants
		fmt.Fprintf(stdout, "invariants: applied twice %d, max read staleness %d, undelivered %d, stalled %v -> ok %v\n",
			inv.AppliedTwice, inv.MaxReadStaleness, inv.UndeliveredAfterHeal, inv.Stalled, inv.OK)
		fmt.Fprintf(stdout, "view digests: %d compared, %d differed (nonzero only where members disagreed on who was live when they committed a row)\n",
			rep.ViewDigestsCompared, inv.ViewDivergence)
		for _, a := range rep.Assertions {
			fmt.Fprintf(stdout, "line %d: %s at iteration %d: %v (value %g)\n", a.Line, a.Step, a.Iteration, map[bool]string{true: "passed", false: "FAILED"}[a.Passed], a.Value)
		}
		fmt.Fprintf(stdout, "trace hash %s (seed %d, %d workers)\n", rep.TraceHash, rep.Seed, rep.Workers)
	}
	if !rep.Invariants.OK {
		return fmt.Errorf("invariants violated: %+v", rep.Invariants)
	}
	for _, a := range rep.Assertions {
		if !a.Passed {
			return fmt.Errorf("assertion on line %d failed: %s (value %g)", a.Line, a.Step, a.Value)
		}
	}
	return nil
}
