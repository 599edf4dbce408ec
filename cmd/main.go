package cmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"

	"github.com/sketchmesh/sketchmesh/mesh"
)

// errInterrupted ends a command stopped by SIGINT or SIGTERM after it
// printed what it had: it exits with status 130, as a shell does.
var errInterrupted = errors.New("interrupted")

// usageError marks bad input: it exits with status 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func badInput(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// command is one subcommand.
type command struct {
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

func commands() map[string]command {
	return map[string]command{
		"codec-bench": {"measure the update codecs on real gradients: size, error, speed", runCodecBench},
		"export":      {"write a saved model as JSON or TSV for people and other tools", runExport},
		"predict":     {"score data with a saved model, streaming it, and report accuracy, log loss, AUC, macro-F1 or RMSE", runPredict},
		"run":         {"run one long-lived node that founds or joins a mesh by multiaddr and trains until done or stopped", runRun},
		"simulate":    {"run many node cores as a deterministic discrete-event simulation with faults, replayable by seed", runSimulate},
		"testnet":     {"run a local mesh of real libp2p nodes on one machine and report how it trained", runTestnet},
		"topology":    {"build the Halton overlay for P members and measure it against a full mesh", runTopology},
		"version":     {"print the module version, the commit and the Go version of this binary", runVersion},
	}
}

// Main runs the command line and returns the process exit status.
func Main(args []string, stdout, stderr io.Writer) int {
	cmds := commands()
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr, cmds)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	c, ok := cmds[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "sketchmesh: unknown command %q (run 'sketchmesh help')\n", args[0])
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := c.run(ctx, args[1:], stdout, stderr)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errInterrupted):
		fmt.Fprintf(stderr, "sketchmesh %s: interrupted\n", args[0])
		return 130
	case errors.As(err, new(usageError)):
		fmt.Fprintf(stderr, "sketchmesh %s: %v\n", args[0], err)
		return 2
	default:
		fmt.Fprintf(stderr, "sketchmesh %s: %v\n", args[0], err)
		return 1
	}
}

func runVersion(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("version", "version", "Prints the module version, the commit and the Go version of this binary.", stderr)
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	b := mesh.BuildInfo()
	modified := ""
	if b.Modified {
		modified = " (with local changes)"
	}
	fmt.Fprintf(stdout, "sketchmesh %s\ncommit %s%s\n%s\n", b.Version, b.Commit, modified, b.GoVersion)
	return nil
}

func usage(w io.Writer, cmds map[string]command) {
	fmt.Fprintln(w, "sketchmesh: a peer-to-peer training mesh over libp2p")
	fmt.Fprintln(w, "\nUsage: sketchmesh COMMAND [flags]   (sketchmesh COMMAND -h lists a command's flags)")
	fmt.Fprintln(w, "\nCommands:")
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-12s %s\n", n, cmds[n].summary)
	}
}

// newFlagSet returns a command's flag set, whose usage prints the synopsis,
// what the command does, and its flags.
func newFlagSet(name, synopsis, about string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: sketchmesh %s\n\n%s\n", synopsis, about)
		printFlags(stderr, fs)
	}
	return fs
}

// parseFlags parses args into fs, turning flag errors into bad input of
// one line and refusing stray positional arguments; -h and --help print
// the usage.
func parseFlags(fs *flag.FlagSet, args []string, stderr io.Writer) error {
	usage := fs.Usage
	fs.Usage = func() {}
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	fs.Usage = usage
	fs.SetOutput(stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage()
			return err
		}
		return badInput("%v (see --help)", strings.Replace(err.Error(), " -", " --", 1))
	}
	if fs.NArg() > 0 {
		return badInput("unexpected argument %q", fs.Arg(0))
	}
	return nil
}

// newLogger returns the logger of a command: text on stderr at the level given.
func newLogger(stderr io.Writer, level string) (*slog.Logger, error) {
	l, err := parseLevel(level)
	if err != nil {
		return nil, err
	}
	return slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: l})), nil
}

// oneOf checks that v is among allowed.
func oneOf(flagName, v string, allowed ...string) error {
	for _, a := range allowed {
		if v == a {
			return nil
		}
	}
	return badInput("--%s %q: want one of %s", flagName, v, strings.Join(allowed, ", "))
}
