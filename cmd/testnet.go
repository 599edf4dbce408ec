package cmd

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sketchmesh/sketchmesh/dataset"
	"github.com/sketchmesh/sketchmesh/mesh"
	"github.com/sketchmesh/sketchmesh/model"
	"github.com/sketchmesh/sketchmesh/netmodel"
	"github.com/sketchmesh/sketchmesh/node"
	"github.com/sketchmesh/sketchmesh/testnet"
)

// testnetFlags are the flags of the testnet command.
type testnetFlags struct {
	nodes    int
	data     string
	testData string
	seed     uint64
	// errorFeedbackSet records that the user gave --error-feedback.
	errorFeedbackSet bool
	json             bool
	training         trainingFlags
	wan              string
	topology         string
	sites            string
	relayWindow      time.Duration
	stragglers       int
	slowdown         float64
	computeTime      time.Duration
	sweepStale       string
	compare          string
	targetLoss       float64
	plot             string
	attack           string
	robust           string
	sign             bool
	psk              string
	allowList        bool
	saveModel        string
	ui               uiFlags
	stream           streamFlags
	// fs is the parsed flag set, for flags whose meaning depends on
	// whether they were given.
	fs *flag.FlagSet
	// loaded, when set, is the data config uses instead of loading it (a
	// comparison loads it once for all its runs).
	loaded *[2]*dataset.Dataset
	// stalenessSet records that the staleness was given (on the command
	// line, or in a --compare item).
	stalenessSet bool
}

func (f *testnetFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&f.nodes, "nodes", 4, "number of nodes, each a libp2p host on 127.0.0.1 (1-256)")
	fs.StringVar(&f.data, "data", "rcv1", "training data: a built-in set ("+strings.Join(dataset.BuiltinNames(), ", ")+") or a LIBSVM file (plain or .gz)")
	fs.StringVar(&f.testData, "test-data", "", "test data, a LIBSVM file (default: the built-in set's test split, or 20% of --data held out)")
	f.training.register(fs, testnetCommand)
	fs.Uint64Var(&f.seed, "seed", 1, "seed for the shuffle, the shards and mini-batch sampling")
	fs.StringVar(&f.topology, "topology", "halton", "overlay: halton (O(log P) links per node, updates relayed along broadcast trees) or full (everyone sends to everyone)")
	fs.StringVar(&f.sites, "sites", "auto", sitesHelp)
	f.relayWindow = mesh.AutoRelayWindow
	fs.Var(relayWindowFlag{&f.relayWindow}, "relay-window", relayWindowHelp)
	fs.StringVar(&f.wan, "wan", "lan", "links between nodes: lan (loopback TCP, no shaping), geo3 (3 sites: 1 ms and 1 Gbit/s inside, 40/80/120 ms and 100 Mbit/s between), or latency=50ms,bandwidth=100Mbit")
	fs.IntVar(&f.stragglers, "stragglers", 0, "number of nodes that run --slowdown times slower")
	fs.Float64Var(&f.slowdown, "slowdown", 3, "how many times slower each straggler computes (>= 1)")
	fs.DurationVar(&f.computeTime, "compute-time", 0, "extra time per iteration on every node, emulating a heavier model (e.g. 20ms)")
	fs.StringVar(&f.sweepStale, "sweep-staleness", "", "run once per staleness in this list (e.g. 0,1,3,10) and compare the runs")
	fs.StringVar(&f.compare, "compare", "", "run once per item in this comma-separated list and compare the runs; an item is NAME[:flag=value]..., NAME a codec or default (the project's defaults of --codec, --error-feedback, --local-steps, --outer, --outer-lr, --budget, --priority and --staleness), each flag=value a testnet flag for that run, e.g. raw:local-steps=1,uniform8:local-steps=1,default")
	fs.Float64Var(&f.targetLoss, "target-loss", 0, "test loss the comparison times runs to (0 = 1.01 × the first run's final loss)")
	fs.StringVar(&f.plot, "plot", "", "with --sweep-staleness or --compare: draw test loss against wall time (and, with --compare, against bytes sent) to this .svg, .png or .pdf file")
	fs.BoolVar(&f.json, "json", false, "print one JSON report on stdout instead of the table")
	fs.BoolVar(&f.sign, "sign", false, "sign every update with its origin's libp2p key and verify every update before applying it")
	fs.StringVar(&f.psk, "psk", "", "pre-shared key file (swarm.key format, 32 bytes): the testnet runs as a private network, over TCP only")
	fs.BoolVar(&f.allowList, "allow-list", false, "give every host an allow list of the members, so no other peer can connect")
	fs.StringVar(&f.robust, "robust", "off", "screen of incoming updates beyond the NaN check and the norm bound: off, or clip (centered clipping)")
	f.stream.register(fs)
	fs.StringVar(&f.saveModel, "save-model", "", "write node 0's final model to this file (see sketchmesh predict and export)")
	f.ui.register(fs)
	fs.StringVar(&f.attack, "attack", "", "run a hostile peer of this kind against the mesh while it trains ("+strings.Join(testnet.AttackKinds, ", ")+"); turns on --sign, a PSK and --allow-list, and first runs the same mesh without the attacker to compare")
}

// config validates the flags and loads the data.
func (f *testnetFlags) config(stderr io.Writer) (testnet.Config, error) {
	var cfg testnet.Config
	s, err := f.training.settings(f.errorFeedbackSet, f.stalenessSet)
	if err != nil {
		return cfg, err
	}
	if err := oneOf("topology", f.topology, netmodel.Topologies...); err != nil {
		return cfg, err
	}
	if err := oneOf("sites", f.sites, netmodel.SitesModes...); err != nil {
		return cfg, err
	}
	switch {
	case f.nodes < 1 || f.nodes > 256:
		return cfg, badInput("--nodes %d: want 1 to 256", f.nodes)
	case f.stragglers < 0 || f.stragglers > f.nodes:
		return cfg, badInput("--stragglers %d: want 0 to --nodes (%d)", f.stragglers, f.nodes)
	case !(f.slowdown >= 1) || math.IsInf(f.slowdown, 0):
		return cfg, badInput("--slowdown %v: want a finite factor >= 1", f.slowdown)
	case f.computeTime < 0:
		return cfg, badInput("--compute-time %v: want >= 0", f.computeTime)
	case f.targetLoss < 0:
		return cfg, badInput("--target-loss %v: want >= 0", f.targetLoss)
	case f.plot != "" && f.sweepStale == "" && f.compare == "":
		return cfg, badInput("--plot needs --sweep-staleness or --compare")
	case f.sweepStale != "" && f.compare != "":
		return cfg, badInput("--sweep-staleness and --compare cannot be combined")
	case f.saveModel != "" && (f.sweepStale != "" || f.compare != ""):
		return cfg, badInput("--save-model saves one run's model; it cannot be combined with --sweep-staleness or --compare")
	}
	if err := oneOf("robust", f.robust, "off", "clip"); err != nil {
		return cfg, err
	}
	if f.attack != "" {
		if err := oneOf("attack", f.attack, testnet.AttackKinds...); err != nil {
			return cfg, err
		}
		if f.sweepStale != "" || f.compare != "" {
			return cfg, badInput("--attack cannot be combined with --sweep-staleness or --compare")
		}
	}
	var psk []byte
	if f.psk != "" {
		var err error
		if psk, err = mesh.LoadPSK(f.psk); err != nil {
			return cfg, usageError{fmt.Errorf("--psk: %w", err)}
		}
	}
	wan, err := testnet.ParseWAN(f.wan)
	if err != nil {
		return cfg, usageError{fmt.Errorf("--wan: %w", err)}
	}
	logger, err := newLogger(stderr, f.training.logLevel)
	if err != nil {
		return cfg, err
	}
	var train, test *dataset.Dataset
	var stream *streamed
	if f.stream.on {
		if stream, err = f.stream.prepare(f.fs, f.data, f.testData, f.training.format, f.training.model, s.HashBits, 0, &f.training.batch); err != nil {
			return cfg, err
		}
		train, test = stream.train, stream.test
	} else if f.loaded != nil {
		train, test = f.loaded[0], f.loaded[1]
	} else if train, test, err = loadData(f.data, f.testData, f.seed, s.HashBits, f.training.format); err != nil {
		return cfg, err
	}
	warnSparseIDs(logger, train, f.nodes)
	rateRows := train
	if stream != nil {
		// The test rows stand for the stream's in the default SGD rate.
		rateRows = test
	}
	if s, err = withDefaultRate(s, rateRows); err != nil {
		return cfg, err
	}
	if stream == nil && len(train.Rows) < f.nodes {
		return cfg, badInput("--nodes %d: %s has only %d training rows", f.nodes, train.Name, len(train.Rows))
	}
	cfg = testnet.Config{
		Nodes:       f.nodes,
		Train:       train,
		Test:        test,
		Training:    f.training.trainingOf(s, f.seed),
		Topology:    f.topology,
		Sites:       f.sites,
		RelayWindow: f.relayWindow,
		Factors:     s.Factors,
		WAN:         wan,
		Stragglers:  f.stragglers,
		Slowdown:    f.slowdown,
		ComputeTime: f.computeTime,
		EvalEvery:   int(f.training.evalInterval(s.Iterations)),
		Logger:      logger,
		Sign:        f.sign,
		PSK:         psk,
		AllowList:   f.allowList,
		Robust:      node.RobustConfig{Clip: f.robust == "clip"},
		Attack:      f.attack,
	}
	if stream != nil {
		cfg.Batches = func(i int) (testnet.StreamSource, error) {
			return stream.open(i, cfg.Nodes, int(cfg.Batch), cfg.Seed)
		}
	}
	if _, err := model.NewModel(cfg.Model, cfg.L2, train); err != nil {
		return cfg, modelError(train, err)
	}
	cfg.BudgetFromLinks = f.training.exchange.budgetMeasured
	if ex := &f.training.exchange; ex.budgetAuto && wan.Emulated() {
		// Unshaped links are loopback: no bound.
		factors := f.training.sfb != string(node.FactorsOff)
		ex.resolveBudget(wan, exchangePeriod(linkRound(wan), stepTime(cfg), ex.localSteps), cfg.Nodes, cfg.Topology, cfg.Codec, cfg.ErrorFeedback, factors)
		cfg.Exchange = ex.exchange()
	}
	return cfg, nil
}

// loadData resolves --data and --test-data in the given format (detected
// from --data for "auto", LIBSVM when empty): a built-in name brings its own
// test split; a file without --test-data holds out a seeded 20%. With
// hashBits above 0 every feature id is hashed (see fitData); Criteo and VW
// data need it.
func loadData(data, testData string, seed uint64, hashBits uint, format string) (train, test *dataset.Dataset, err error) {
	if spec, ok := strings.CutPrefix(data, dataset.SynthPrefix); ok {
		return synthData(spec, testData, format, hashBits)
	}
	f, err := dataFormat(format, data, hashBits)
	if err != nil {
		return nil, nil, err
	}
	opts := dataset.Options{Format: f, HashBits: hashBits}
	if testData == "" && !f.HashesFeatures() {
		// An error here only means data is not a built-in name.
		train, test, _ = dataset.Builtin(data)
	}
	load := func(spec string) (*dataset.Dataset, error) {
		if f.HashesFeatures() {
			return dataset.ReadFileWith(spec, opts)
		}
		return dataset.Load(spec)
	}
	if train == nil {
		if train, err = load(data); err != nil {
			return nil, nil, usageError{fmt.Errorf("--data: %w", err)}
		}
		if testData != "" {
			if test, err = load(testData); err != nil {
				return nil, nil, usageError{fmt.Errorf("--test-data: %w", err)}
			}
		}
	}
	if train, test, err = fitData(train, test, hashBits, f); err != nil {
		return nil, nil, err
	}
	if test == nil {
		return holdOut(train, seed)
	}
	return train, test, nil
}

// dataFormat is --format for the data at path: the format named, or for
// "auto" the one its first lines show (a built-in set is LIBSVM). A format
// of string features needs hashBits.
func dataFormat(name, path string, hashBits uint) (dataset.Format, error) {
	f, err := resolveFormat(name, path)
	if err != nil {
		return "", err
	}
	if f.HashesFeatures() && hashBits == 0 {
		if name == string(dataset.Auto) {
			return "", badInput("--format auto: %s reads as %s, whose features are strings and must be hashed; give --hash-bits B (e.g. 18)", path, f)
		}
		return "", badInput("--format %s: its features are strings and must be hashed; give --hash-bits B (e.g. 18)", f)
	}
	return f, nil
}

// resolveFormat is the format --format names, or the one Detect finds in
// path for "auto".
func resolveFormat(name, path string) (dataset.Format, error) {
	switch name {
	case "":
		return dataset.LIBSVM, nil
	case string(dataset.Auto):
		f, err := dataset.DetectFile(path)
		switch {
		case errors.Is(err, dataset.ErrAmbiguousFormat), errors.Is(err, dataset.ErrUnknownFormat):
			return "", badInput("--format auto: %v; give --format libsvm, criteo or vw", err)
		case err != nil:
			return "", usageError{fmt.Errorf("--data: %w", err)}
		}
		return f, nil
	}
	f, err := dataset.ParseFormat(name)
	if err != nil {
		return "", badInput("--format %q: want auto, libsvm, criteo or vw", name)
	}
	return f, nil
}

// holdOut splits off a seeded fifth of d as test data.
func holdOut(d *dataset.Dataset, seed uint64) (train, test *dataset.Dataset, err error) {
	if len(d.Rows) < 2 {
		return nil, nil, badInput("--data: %s has %d rows, too few to hold out test rows; give --test-data", d.Name, len(d.Rows))
	}
	s := d.Shuffled(int64(seed))
	cut := max(1, len(s.Rows)/5)
	test = &dataset.Dataset{Name: d.Name + " (20% held out)", Rows: s.Rows[:cut], MaxFeature: d.MaxFeature}
	train = &dataset.Dataset{Name: d.Name + " (80%)", Rows: s.Rows[cut:], MaxFeature: d.MaxFeature, MaxFeatureLine: d.MaxFeatureLine}
	return train, test, nil
}

func runTestnet(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("testnet", "testnet [flags]", "Runs a local mesh of real libp2p nodes (TCP, Noise, yamux on 127.0.0.1), each training on its own shard, and reports the result.", stderr)
	var f testnetFlags
	f.register(fs)
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	f.errorFeedbackSet, f.fs = flagGiven(fs, "error-feedback"), fs
	f.stalenessSet = flagGiven(fs, "staleness")
	cfg, err := f.config(stderr)
	if err != nil {
		return err
	}
	uiListener, err := f.ui.listen()
	if err != nil {
		return err
	}
	finished := false
	if uiListener != nil {
		cfg.Live = testnet.NewLiveView()
		say := func(url string) { fmt.Fprintf(stderr, "live view: %s\n", url) }
		url, stop := serveUI(uiListener, cfg.Live, f.ui.public, say, cfg.Logger)
		defer stop()
		defer func() {
			// A run that ended can be looked at, until Ctrl-C.
			if finished && ctx.Err() == nil {
				fmt.Fprintf(stderr, "live view: the run is over; still serving %s until Ctrl-C\n", url)
				<-ctx.Done()
			}
		}()
	}
	var compared []testnet.Config
	var items []string
	if f.compare != "" {
		// Every item is checked before the first run starts.
		if compared, items, err = compareConfigs(args, f.compare, cfg.Train, cfg.Test, stderr); err != nil {
			return err
		}
	}
	codecs, staleness := "codec "+cfg.Codec+", "+f.training.exchange.describe(), "staleness "+strconv.Itoa(cfg.Staleness)
	switch {
	case f.compare != "":
		codecs = "runs " + f.compare + " (one run each)"
	case f.sweepStale != "":
		staleness = "staleness " + f.sweepStale + " (one run each)"
	}
	if (f.compare != "" || f.sweepStale != "") && f.training.evalEvery == 0 {
		// A comparison is read from its curves: draw them finely.
		cfg.EvalEvery = max(1, cfg.Iterations/40)
	}
	rows := fmt.Sprintf("%d train / %d test rows", len(cfg.Train.Rows), len(cfg.Test.Rows))
	if cfg.Batches != nil {
		rows = fmt.Sprintf("batches of %d rows through a buffer of %d per node, %d test rows", int(cfg.Batch), f.stream.buffer, len(cfg.Test.Rows))
	}
	fmt.Fprintf(stderr, "testnet: %d nodes, %s on %s (%s, %d features), %s lr %.4g, %s, %s, %s overlay, links %s, %d iterations\n",
		cfg.Nodes, cfg.Model, cfg.Train.Name, rows, cfg.Train.MaxFeature, cfg.Optimizer, cfg.LR, codecs, staleness, cfg.Topology, cfg.WAN.Name, cfg.Iterations)
	switch {
	case f.sweepStale != "":
		values, err := parseStalenessList(f.sweepStale)
		if err != nil {
			return err
		}
		labels := make([]string, len(values))
		for i, v := range values {
			labels[i] = strconv.Itoa(v)
		}
		err = runSweep(ctx, cfg, "staleness", labels, func(c *testnet.Config, i int) { c.Staleness = values[i] },
			f.targetLoss, f.plot, f.json, stdout, stderr)
		finished = err == nil
		return err
	case f.compare != "":
		err = runSweep(ctx, cfg, compareParam, items, func(c *testnet.Config, i int) { *c = compared[i] },
			f.targetLoss, f.plot, f.json, stdout, stderr)
		finished = err == nil
		return err
	}
	var watch model.LossWatch
	cfg.Progress = func(p testnet.Progress) {
		printProgress(stderr, cfg.Iterations, p)
		if msg := watch.Observe(p.TestLoss); msg != "" {
			cfg.Logger.Warn(msg, "iteration", p.Iteration, "lr", cfg.LR)
		}
	}
	run := testnet.Run
	if cfg.Attack != "" {
		fmt.Fprintf(stderr, "attack %s: the baseline first (the same mesh with a quiet member in the attacker's place, or without an outsider), then the attack\n", cfg.Attack)
		run = testnet.RunAttack
	}
	rep, err := run(ctx, cfg)
	if rep == nil || (err != nil && ctx.Err() == nil) {
		return dataError(err)
	}
	if f.saveModel != "" {
		if err := saveTestnetModel(f.saveModel, cfg, f.training.hashBits, rep); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "saved node 0's model (clock %d) to %s\n", rep.PerNode[0].Clock, f.saveModel)
	}
	if f.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		printSummary(stdout, rep)
		printAttack(stdout, rep.Attack)
	}
	if err != nil {
		return errInterrupted
	}
	finished = true
	return nil
}

// saveTestnetModel writes node 0's final view as a model file.
func saveTestnetModel(path string, cfg testnet.Config, hashBits uint, rep *testnet.Report) error {
	mdl, err := model.NewModel(cfg.Model, cfg.L2, cfg.Train)
	if err != nil {
		return err
	}
	mc := mdl.Config()
	s := node.Settings{
		Model: cfg.Model, MaxFeature: mc.MaxFeature, Classes: mc.Classes, L2: cfg.L2, Optimizer: cfg.Optimizer,
		LearningRate: cfg.LR, Staleness: cfg.Staleness, Codec: cfg.Codec, ErrorFeedback: cfg.ErrorFeedback,
		Factors: cfg.Factors, Iterations: uint64(cfg.Iterations), HashBits: hashBits,
		LocalSteps: cfg.Exchange.LocalSteps, Outer: cfg.Exchange.Outer, OuterRate: cfg.Exchange.OuterRate,
	}
	meshName := cfg.MeshName
	if meshName == "" {
		meshName = "testnet"
	}
	n0 := rep.PerNode[0]
	return writeModel(path, savedModel(s, rep.FinalView, meshName, n0.ID, n0.Clock, cfg.Train.Name, cfg.Test.Name))
}

func printProgress(w io.Writer, total int, p testnet.Progress) {
	acc := ""
	if !math.IsNaN(p.TestAccuracy) {
		acc = fmt.Sprintf("  test_acc %6.2f%%", 100*p.TestAccuracy)
	}
	fmt.Fprintf(w, "iter %4d/%d  train_loss %.4f  test_loss %.4f%s  sent %s  %.1fs\n",
		p.Iteration, total, p.TrainLoss, p.TestLoss, acc, humanBytes(float64(p.BytesSent)), p.Elapsed.Seconds())
}

func printSummary(w io.Writer, r *testnet.Report) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "node\ttrain rows\ttest acc\ttest loss\tsent\tmessages\tblocked\t")
	for i, n := range r.PerNode {
		fmt.Fprintf(tw, "%d\t%d\t%s\t%.4f\t%s\t%d\t%.2fs\t\n", i, n.TrainRows, pct(n.TestAccuracy), n.TestLoss, humanBytes(float64(n.BytesSent)), n.MessagesSent, n.BlockedSeconds)
	}
	_ = tw.Flush()
	if r.Interrupted {
		fmt.Fprintf(w, "\n%d nodes, %s, %s, codec %s, interrupted at iteration %d/%d after %.2fs\n", r.Nodes, r.Model, r.Dataset, r.Codec, r.PerNode[0].Clock, r.Iterations, r.WallSeconds)
	} else {
		fmt.Fprintf(w, "\n%d nodes, %s, %s, codec %s, %d iterations in %.2fs\n", r.Nodes, r.Model, r.Dataset, r.Codec, r.Iterations, r.WallSeconds)
	}
	auc := ""
	if r.FinalTestAUC != nil {
		auc = fmt.Sprintf(", AUC %.4f", *r.FinalTestAUC)
	}
	fmt.Fprintf(w, "final test accuracy %s, test loss %.4f%s (mean over nodes)\n", pct(r.FinalTestAccuracy), r.FinalTestLoss, auc)
	overlay := r.Topology
	if r.Sites > 1 {
		overlay = fmt.Sprintf("%s over %d sites", r.Topology, r.Sites)
	}
	fmt.Fprintf(w, "sent %s in all, %s and %.1f messages per node per iteration; %s overlay, %.1f links per node, %.2f hops per update\n",
		humanBytes(float64(r.BytesSentTotal)), humanBytes(r.BytesSentPerNodePerIteration), r.MessagesPerNodePerIteration, overlay, r.LinksPerNode, r.MeanUpdateHops)
	// The bound and the reads count exchanges, iterations with one step.
	unit := "iterations"
	if r.LocalSteps > 1 {
		unit = "exchanges"
	}
	fmt.Fprintf(w, "staleness bound %d: reads were at most %d and on average %.2f %s stale; %.2fs blocked per node; views identical: %v\n",
		r.Staleness, r.StalenessObservedMax, r.StalenessObservedMean, unit, r.BlockedSecondsPerNode, r.ViewsIdentical)
}

func pct(v *float64) string {
	if v == nil {
		return "n/a"
	}
	return fmt.Sprintf("%.2f%%", 100**v)
}

// humanBytes formats a byte count with a binary unit.
func humanBytes(b float64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	i := 0
	for b >= 1024 && i < len(units)-1 {
		b /= 1024
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%.0f %s", b, units[i])
	}
	return fmt.Sprintf("%.2f %s", b, units[i])
}
