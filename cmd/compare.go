package cmd

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/sketchmesh/sketchmesh/codec"
	"github.com/sketchmesh/sketchmesh/dataset"
	"github.com/sketchmesh/sketchmesh/testnet"
)

// compareDefault is the --compare item of the project's defaults.
const compareDefault = "default"

// managedFlags are the flags `default` resets to their defaults, whatever
// the command line gave: the ones that decide how nodes communicate.
var managedFlags = []string{"codec", "error-feedback", "local-steps", "outer", "outer-lr", "budget", "priority"}

// fixedFlags are the flags a --compare item may not set: they define the
// comparison itself or the data every run shares.
var fixedFlags = []string{"compare", "sweep-staleness", "plot", "json", "target-loss", "save-model", "attack",
	"data", "test-data", "format", "hash-bits"}

// compareConfigs builds one testnet configuration per --compare item,
// NAME[:flag=value]...: NAME is a codec, or `default` for the project's
// defaults of the managed flags; each flag=value then sets a testnet flag
// for that run alone. Every run starts from the command line's flags and
// trains on the data already loaded.
func compareConfigs(args []string, list string, train, test *dataset.Dataset, stderr io.Writer) ([]testnet.Config, []string, error) {
	items, err := parseList("compare", list)
	if err != nil {
		return nil, nil, err
	}
	cfgs := make([]testnet.Config, len(items))
	for i, item := range items {
		if cfgs[i], err = compareConfig(args, item, train, test, stderr); err != nil {
			return nil, nil, err
		}
	}
	return cfgs, items, nil
}

func compareConfig(args []string, item string, train, test *dataset.Dataset, stderr io.Writer) (testnet.Config, error) {
	parts := strings.Split(item, ":")
	name := parts[0]
	var f testnetFlags
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f.register(fs)
	if err := fs.Parse(args); err != nil {
		return testnet.Config{}, usageError{err}
	}
	switch {
	case name == compareDefault:
		for _, m := range append(managedFlags, "staleness") {
			if err := fs.Set(m, fs.Lookup(m).DefValue); err != nil {
				return testnet.Config{}, err
			}
		}
	case slices.Contains(codec.Names(), name):
		if err := fs.Set("codec", name); err != nil {
			return testnet.Config{}, err
		}
	default:
		return testnet.Config{}, badInput("--compare item %q: %q is neither %s nor a codec (%s)", item, name, compareDefault, strings.Join(codec.Names(), ", "))
	}
	for _, p := range parts[1:] {
		k, v, ok := strings.Cut(p, "=")
		if !ok {
			return testnet.Config{}, badInput("--compare item %q: %q is not flag=value", item, p)
		}
		if fs.Lookup(k) == nil || slices.Contains(fixedFlags, k) {
			return testnet.Config{}, badInput("--compare item %q: unknown flag %q (an item may set any testnet flag but %s)", item, k, strings.Join(fixedFlags, ", "))
		}
		if err := fs.Set(k, v); err != nil {
			return testnet.Config{}, badInput("--compare item %q: %s=%s: %v", item, k, v, err)
		}
	}
	fs.Visit(func(fl *flag.Flag) { f.errorFeedbackSet = f.errorFeedbackSet || fl.Name == "error-feedback" })
	// The staleness counts as given when the command line gave it to an
	// item other than default, or the item gives it.
	f.stalenessSet = name != compareDefault && slices.ContainsFunc(args, isStalenessFlag)
	for _, p := range parts[1:] {
		f.stalenessSet = f.stalenessSet || strings.HasPrefix(p, "staleness=")
	}
	f.compare, f.sweepStale, f.plot = "", "", ""
	f.loaded = &[2]*dataset.Dataset{train, test}
	cfg, err := f.config(stderr)
	if err != nil {
		return cfg, usageError{fmt.Errorf("--compare item %q: %w", item, err)}
	}
	if f.training.evalEvery == 0 {
		// A comparison is read from its curves: draw them finely.
		cfg.EvalEvery = max(1, cfg.Iterations/40)
	}
	return cfg, nil
}

// isStalenessFlag reports whether a command-line argument gives
// --staleness.
func isStalenessFlag(arg string) bool {
	name, _, _ := strings.Cut(strings.TrimLeft(arg, "-"), "=")
	return strings.HasPrefix(arg, "-") && name == "staleness"
}
