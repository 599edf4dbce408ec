package cmd

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/sketchmesh/sketchmesh/mesh"
)

func parseLevel(level string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return l, badInput("--log-level %q: want debug, info, warn or error", level)
	}
	return l, nil
}

// sitesHelp is the help of --sites in testnet, simulate and run.
const sitesHelp = "site-aware overlay (halton only): auto groups members into sites by measured round-trip time and, when there are 2 or more, sends each update across at most one inter-site link; off keeps the flat Halton overlay"

// flagGroups sorts every command's flags into the groups its help lists
// them under, in this order.
var flagGroups = []struct {
	name  string
	flags []string
}{
	{"Data and model", []string{"data", "test-data", "format", "hash-bits", "stream", "shuffle-buffer", "holdout-rows", "max-dropped", "shard", "model", "dim", "l2", "nodes", "seed", "workers", "faults"}},
	{"Training", []string{"optimizer", "lr", "batch", "iterations", "staleness", "local-steps", "outer", "outer-lr", "budget", "priority", "codec", "error-feedback", "sfb", "keep-best",
		"wait-members", "min-iteration-time", "compute-time", "stragglers", "slowdown", "target-loss"}},
	{"Network", []string{"listen", "join", "mesh", "announce", "relay", "relay-service", "topology", "sites", "relay-window", "wan",
		"heartbeat", "dead-after", "history"}},
	{"Security", []string{"key", "psk", "allow", "allow-list", "sign", "robust", "attack"}},
	{"Output", []string{"eval-every", "progress", "json", "log-level", "log-format", "metrics", "ui", "ui-public", "checkpoint-dir", "checkpoint-every", "save-model",
		"compare", "sweep-staleness", "plot", "config"}},
}

// groupOf names the help group of a flag ("Other" for none).
func groupOf(name string) string {
	for _, g := range flagGroups {
		for _, f := range g.flags {
			if f == name {
				return g.name
			}
		}
	}
	return "Other"
}

// printFlags writes fs's flags group by group, in the order each group
// lists them.
func printFlags(w io.Writer, fs *flag.FlagSet) {
	byGroup := map[string][]*flag.Flag{}
	fs.VisitAll(func(fl *flag.Flag) { byGroup[groupOf(fl.Name)] = append(byGroup[groupOf(fl.Name)], fl) })
	order := map[string]int{}
	for _, g := range flagGroups {
		for i, f := range g.flags {
			order[f] = i
		}
	}
	for _, g := range append(flagGroups, struct {
		name  string
		flags []string
	}{name: "Other"}) {
		flags := byGroup[g.name]
		if len(flags) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s:\n", g.name)
		slices.SortStableFunc(flags, func(a, b *flag.Flag) int { return cmp.Compare(order[a.Name], order[b.Name]) })
		for _, fl := range flags {
			printFlag(w, fl)
		}
	}
}

// printFlag prints one flag as flag.PrintDefaults does, with two dashes.
func printFlag(w io.Writer, fl *flag.Flag) {
	typ, usage := flag.UnquoteUsage(fl)
	line := "  --" + fl.Name
	if typ != "" {
		line += " " + typ
	}
	fmt.Fprintf(w, "%s\n    \t%s", line, strings.ReplaceAll(usage, "\n", "\n    \t"))
	if def := fl.DefValue; def != "" && def != "0" && def != "false" && def != "0s" {
		if typ == "string" {
			def = fmt.Sprintf("%q", def)
		}
		fmt.Fprintf(w, " (default %s)", def)
	}
	fmt.Fprintln(w)
}

// relayWindowFlag is --relay-window of run and testnet: auto (the
// default, mesh.AutoRelayWindow) or a duration of at least 0. Relays that
// arrive while the node can train leave with its own update; the window
// batches the rest. A fixed 5 ms kept 16 testnet nodes within 2⌈log2 P⌉
// messages per node and iteration but not 32 (11.1–12.5, bound 10); half
// the node's iteration keeps both (README, "Relays batch").
type relayWindowFlag struct{ window *time.Duration }

// relayWindowHelp is --relay-window's help, less what the command adds.
var relayWindowHelp = fmt.Sprintf("how long a node collects arrivals before forwarding them in one message per next hop, or auto: half the node's own iteration interval, %v to %v (%v before its second step); relays held when the node trains leave with its own update (0 = forward at once)",
	mesh.MinAutoRelayWindow, mesh.MaxAutoRelayWindow, mesh.FirstAutoRelayWindow)

func (v relayWindowFlag) String() string {
	if v.window == nil || *v.window == mesh.AutoRelayWindow {
		return autoSetting
	}
	return v.window.String()
}

func (v relayWindowFlag) Set(s string) error {
	if s == autoSetting {
		*v.window = mesh.AutoRelayWindow
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return errors.New("want auto or a duration of at least 0, such as 10ms")
	}
	*v.window = d
	return nil
}
