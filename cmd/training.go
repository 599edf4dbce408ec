package cmd

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"strings"

	"github.com/sketchmesh/sketchmesh/codec"
	"github.com/sketchmesh/sketchmesh/dataset"
	"github.com/sketchmesh/sketchmesh/model"
	"github.com/sketchmesh/sketchmesh/netmodel"
	"github.com/sketchmesh/sketchmesh/node"
)

// trainingCommand names a command that trains: the training flags are the
// same in each, apart from the defaults and help texts that say what the
// command does with them.
type trainingCommand string

const (
	testnetCommand  trainingCommand = "testnet"
	runCommand      trainingCommand = "run"
	simulateCommand trainingCommand = "simulate"
)

// trainingFlags are the training flags run, testnet and simulate share,
// declared once (register) and turned into node.Settings once (settings).
type trainingFlags struct {
	command       trainingCommand
	model         string
	optimizer     string
	lr            float64
	l2            float64
	batch         float64
	iterations    uint64
	codec         string
	errorFeedback bool
	sfb           string
	staleness     int
	hashBits      uint
	format        string
	evalEvery     int
	logLevel      string
	exchange      exchangeFlags
}

// modelNames lists the models, as help texts name them: "lr, svm, linear
// or softmax", or with described set, "lr (logistic regression), ...".
func modelNames(described bool) string {
	kinds := model.Kinds()
	names := make([]string, len(kinds))
	for i, k := range kinds {
		names[i] = string(k)
		if described {
			names[i] += " (" + k.Describe() + ")"
		}
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// register declares the training flags of f.command on fs.
func (f *trainingFlags) register(fs *flag.FlagSet, command trainingCommand) {
	f.command = command
	// wide ends the help of a setting the mesh holds; run's joiner takes
	// the mesh's.
	wide := ""
	if command == runCommand {
		wide = meshWide
	}
	switch command {
	case testnetCommand:
		fs.StringVar(&f.model, "model", "lr", "model: "+modelNames(true))
	default:
		fs.StringVar(&f.model, "model", "lr", "model: "+modelNames(false)+wide)
	}
	optimizerHelp := "optimizer: sgd or adam (β1 0.9, β2 0.999, ε 1e-8)"
	if command == simulateCommand {
		optimizerHelp += "; sgd keeps no per-node moments, which saves memory at a thousand nodes"
	}
	fs.StringVar(&f.optimizer, "optimizer", "adam", optimizerHelp+wide)
	fs.Float64Var(&f.lr, "lr", 0, fmt.Sprintf("learning rate; 0 = the optimizer's default: adam %g; sgd 1 for lr and svm, 10 for softmax, 0.5 for linear, divided by the training rows' mean squared norm when it is above 1", model.AdamDefaultRate)+wide)
	fs.Float64Var(&f.l2, "l2", 1e-4, "L2 regularisation strength (>= 0)"+wide)
	fs.Float64Var(&f.batch, "batch", 0.1, "mini-batch per node: a fraction of its training rows when below 1 (rounded up), else a row count")
	switch command {
	case runCommand:
		fs.Uint64Var(&f.iterations, "iterations", 0, "iteration at which every member stops, 0 = train until stopped"+wide)
	case simulateCommand:
		fs.Uint64Var(&f.iterations, "iterations", 50, "optimizer steps (iterations) each node takes (>= 1)")
	default:
		fs.Uint64Var(&f.iterations, "iterations", 200, "optimizer steps (iterations) each node takes (>= 1)")
	}
	fs.StringVar(&f.codec, "codec", "sketchml", "update codec: "+strings.Join(codec.Names(), ", ")+" (sketchml sends an update as a uniform8 frame where that costs fewer bits, as updates of a few hundred pairs do)"+wide)
	fs.BoolVar(&f.errorFeedback, "error-feedback", true, "carry what a lossy codec dropped into the next update"+wide)
	switch command {
	case testnetCommand:
		fs.StringVar(&f.sfb, "sfb", "off", "sufficient factor broadcasting for softmax: off (send the matrix delta), always (send the factors), auto (whichever encodes smaller, per frame); needs --optimizer sgd and --l2 0, and turns error feedback off")
	case runCommand:
		fs.StringVar(&f.sfb, "sfb", "off", "sufficient factors for softmax: off, auto or always"+wide)
	default:
		// The simulator sends matrix deltas only.
		f.sfb = string(node.FactorsOff)
	}
	fs.IntVar(&f.staleness, "staleness", stepStaleness, stalenessHelp+wide)
	f.exchange.register(fs, wide)
	hashHelp := hashBitsHelp
	if command == runCommand {
		hashHelp += " (a joiner takes the mesh's)"
	}
	fs.UintVar(&f.hashBits, "hash-bits", 0, hashHelp)
	fs.StringVar(&f.format, "format", "auto", formatHelp)
	fs.IntVar(&f.evalEvery, "eval-every", 0, "iterations between test-set evaluations, each one a progress point (0 = about ten per run, every 100 iterations when the run has no end)")
	fs.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn or error (logs go to stderr)")
}

// settings checks the training flags and returns the settings they give:
// the learning rate is 0 when --lr is not given (WithDefaultRate fills it
// in once the data is read), the dimension and classes are the data's
// business. errorFeedbackGiven and stalenessGiven say whether the user
// gave --error-feedback and --staleness: factors turn error feedback off
// unless it was asked for, and the staleness bound follows the local steps
// unless given.
func (f *trainingFlags) settings(errorFeedbackGiven, stalenessGiven bool) (node.Settings, error) {
	if err := f.exchange.check(); err != nil {
		return node.Settings{}, err
	}
	f.exchange.resolveAuto(f.iterations, node.FactorMode(f.sfb) != node.FactorsOff)
	s := node.Settings{
		Model: model.Kind(f.model), Optimizer: model.OptimizerKind(f.optimizer), LearningRate: f.lr, L2: f.l2,
		Staleness: f.exchange.staleness(f.staleness, stalenessGiven), Codec: f.codec, ErrorFeedback: f.errorFeedback,
		Factors: node.FactorMode(f.sfb), Iterations: f.iterations, HashBits: f.hashBits,
		LocalSteps: f.exchange.localSteps, Outer: node.OuterKind(f.exchange.outer), OuterRate: f.exchange.outerLR,
	}
	if s.Factors != node.FactorsOff && !errorFeedbackGiven {
		s.ErrorFeedback = false
	}
	if err := s.Validate(); err != nil {
		return s, settingError(err)
	}
	if err := node.CheckBatch(f.batch); err != nil {
		return s, settingError(err)
	}
	switch {
	case f.iterations < 1 && f.command != runCommand:
		return s, badInput("--iterations %d: want >= 1", f.iterations)
	case f.iterations > math.MaxInt32 && f.command != runCommand:
		return s, badInput("--iterations %d: want at most %d", f.iterations, math.MaxInt32)
	case f.evalEvery < 0:
		return s, badInput("--eval-every %d: want >= 0", f.evalEvery)
	}
	if _, err := parseLevel(f.logLevel); err != nil {
		return s, err
	}
	if err := f.exchange.checkBudget(s.Codec, s.ErrorFeedback); err != nil {
		return s, err
	}
	return s, nil
}

// trainingOf is the training of a testnet run or a simulation: the
// settings s (checked, with their learning rate), the flags' batch and
// exchange, and seed.
func (f *trainingFlags) trainingOf(s node.Settings, seed uint64) netmodel.Training {
	return netmodel.Training{
		Model: s.Model, Optimizer: s.Optimizer, LR: s.LearningRate, L2: s.L2,
		Batch: f.batch, Iterations: int(s.Iterations), Seed: seed,
		Codec: s.Codec, ErrorFeedback: s.ErrorFeedback, Staleness: s.Staleness,
		Exchange: f.exchange.exchange(),
	}
}

// settingError is bad input for a setting node refused by name (a flag's
// name), and a usage error for anything else.
func settingError(err error) error {
	var se *node.SettingError
	if errors.As(err, &se) {
		return badInput("--%s", se.Detail())
	}
	return usageError{err}
}

// withDefaultRate fills in the optimizer's default learning rate when
// --lr is not given, for rows (the training rows, or a stream's test rows
// standing for them).
func withDefaultRate(s node.Settings, rows *dataset.Dataset) (node.Settings, error) {
	s, err := s.WithDefaultRate(rows.Rows)
	if err != nil {
		return s, usageError{err}
	}
	return s, nil
}

// evalInterval is --eval-every, or about ten evaluations over iterations
// (every 100 when iterations is 0, a run without end).
func (f *trainingFlags) evalInterval(iterations uint64) uint64 {
	switch {
	case f.evalEvery > 0:
		return uint64(f.evalEvery)
	case iterations == 0:
		return 100
	}
	return max(1, iterations/10)
}
