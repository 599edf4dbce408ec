package cmd

import (
	"encoding/json"
	"strings"
	"testing"
)

// Bad local-step settings and --compare items get one line and exit 2,
// before anything runs.
func TestExchangeBadInput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"testnet", "--local-steps", "0"}, "--local-steps 0: want 1 to 4096"},
		{[]string{"testnet", "--local-steps", "5000"}, "--local-steps 5000: want 1 to 4096"},
		{[]string{"testnet", "--local-steps", "many"}, `invalid value "many" for flag --local-steps: want auto or a count of steps, 1 to 4096`},
		{[]string{"testnet", "--outer-lr", "0"}, "--outer-lr 0: want a finite rate > 0"},
		{[]string{"testnet", "--outer-lr", "-0.5"}, "--outer-lr -0.5: want a finite rate > 0"},
		{[]string{"testnet", "--outer", "adam"}, `--outer "adam": want one of adaptive, sgd, nesterov`},
		{[]string{"testnet", "--model", "softmax", "--optimizer", "sgd", "--l2", "0", "--sfb", "auto", "--local-steps", "4"}, "--sfb auto: the change of 4 local steps has no sufficient factors"},
		{[]string{"testnet", "--compare", "raw:foo=1"}, `--compare item "raw:foo=1": unknown flag "foo"`},
		{[]string{"testnet", "--compare", "raw,default:data=a9a"}, `--compare item "default:data=a9a": unknown flag "data"`},
		{[]string{"testnet", "--compare", "raw:local-steps=0"}, `--compare item "raw:local-steps=0": --local-steps 0: want 1 to 4096`},
		{[]string{"testnet", "--compare", "raw:local-steps"}, `--compare item "raw:local-steps": "local-steps" is not flag=value`},
		{[]string{"testnet", "--compare", "lz4"}, `--compare item "lz4": "lz4" is neither default nor a codec`},
		{[]string{"testnet", "--compare", "raw:outer-lr=x"}, `--compare item "raw:outer-lr=x": outer-lr=x: parse error`},
		{[]string{"testnet", "--budget", "3"}, "--budget 3: want auto, measured, 0 (no bound) or at least one frame (13 bytes with --codec sketchml)"},
		{[]string{"testnet", "--budget", "-1", "--codec", "raw"}, "--budget -1: want auto, measured, 0 (no bound) or at least one frame"},
		{[]string{"testnet", "--budget", "4096", "--error-feedback=false"}, "--budget 4096: what a budget cuts is kept in the error feedback residual"},
		{[]string{"testnet", "--budget", "lots"}, `invalid value "lots" for flag --budget: want auto, measured, 0 (no bound) or a byte count`},
		{[]string{"testnet", "--budget", "measured", "--error-feedback=false"}, "--budget measured: what a budget cuts is kept in the error feedback residual"},
		{[]string{"simulate", "--budget", "measured"}, "--budget measured: the simulator's links carry no writes to measure"},
		{[]string{"testnet", "--priority", "max"}, `--priority "max": want one of off, absolute, relative`},
		{[]string{"testnet", "--compare", "default:budget=2"}, `--compare item "default:budget=2": --budget 2: want auto, measured, 0 (no bound) or at least one frame`},
		{[]string{"simulate", "--budget", "1"}, "--budget 1: want auto, measured, 0 (no bound) or at least one frame"},
		{[]string{"simulate", "--local-steps", "0"}, "--local-steps 0: want 1 to 4096"},
		{[]string{"simulate", "--outer-lr", "0"}, "--outer-lr 0: want a finite rate > 0"},
		{[]string{"run", "--data", "rcv1", "--local-steps", "0"}, "--local-steps 0: want 1 to 4096"},
		{[]string{"run", "--data", "rcv1", "--outer-lr", "-1"}, "--outer-lr -1: want a finite rate > 0"},
		{[]string{"testnet", "--relay-window", "-3ms"}, `invalid value "-3ms" for flag --relay-window: want auto or a duration of at least 0`},
		{[]string{"run", "--data", "rcv1", "--relay-window", "soon"}, `invalid value "soon" for flag --relay-window: want auto or a duration of at least 0`},
	} {
		code, out, errOut := runMain(tc.args...)
		if code != 2 || out != "" || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and one line with %q", tc.args, code, out, errOut, tc.want)
		}
	}
}

// Each --compare item runs with its own settings on top of the command
// line's: the labels are the items as written, default takes the
// project's codec and local steps, and a run that reached the target
// reports iterations, seconds and bytes to it.
func TestCompareItemsCarrySettings(t *testing.T) {
	items := []string{"raw:local-steps=1", "default", "uniform8:local-steps=4:outer=nesterov", "default:wan=geo3"}
	code, out, errOut := runMain("testnet", "--nodes", "2", "--iterations", "12", "--local-steps", "3", "--codec", "zstd", "--staleness", "3",
		"--compare", strings.Join(items, ","), "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rep struct {
		Parameter string `json:"parameter"`
		Runs      []struct {
			Label              string   `json:"label"`
			IterationsToTarget *uint64  `json:"iterations_to_target"`
			SecondsToTarget    *float64 `json:"seconds_to_target"`
			BytesToTarget      *uint64  `json:"bytes_to_target"`
			Report             struct {
				Codec          string `json:"codec"`
				Staleness      int    `json:"staleness"`
				LocalSteps     int    `json:"local_steps"`
				BytesSentTotal uint64 `json:"bytes_sent_total"`
				PerNode        []struct {
					Clock uint64 `json:"clock"`
				} `json:"per_node"`
			} `json:"report"`
		} `json:"runs"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if rep.Parameter != "run" || len(rep.Runs) != len(items) {
		t.Fatalf("parameter %q, %d runs", rep.Parameter, len(rep.Runs))
	}
	// The command line's staleness holds for the items but default, which
	// takes the default bound of its local steps. Those are auto, on
	// loopback as over geo3: as many as the run's 12 steps allow with
	// node.MinAutoExchanges exchanges, 2.
	for i, want := range []struct {
		codec     string
		clocks    uint64
		staleness int
	}{{"raw", 12, 3}, {"sketchml", 6, defaultStaleness(2)}, {"uniform8", 3, 3}, {"sketchml", 6, defaultStaleness(2)}} {
		r := rep.Runs[i]
		if r.Label != items[i] || r.Report.Codec != want.codec || r.Report.PerNode[0].Clock != want.clocks || r.Report.Staleness != want.staleness ||
			uint64(r.Report.LocalSteps) != (12+want.clocks-1)/want.clocks {
			t.Errorf("run %d: label %q, codec %s, %d exchanges of %d steps, staleness %d; want %q, %s, %d, %d",
				i, r.Label, r.Report.Codec, r.Report.PerNode[0].Clock, r.Report.LocalSteps, r.Report.Staleness, items[i], want.codec, want.clocks, want.staleness)
		}
	}
	base := rep.Runs[0]
	if base.IterationsToTarget == nil || base.SecondsToTarget == nil || base.BytesToTarget == nil {
		t.Fatalf("the baseline never reached 1.01 × its own final loss: %+v", base)
	}
	if *base.IterationsToTarget > 12 || *base.BytesToTarget == 0 || *base.BytesToTarget > base.Report.BytesSentTotal {
		t.Fatalf("baseline reached the target at iteration %d after %d bytes of %d", *base.IterationsToTarget, *base.BytesToTarget, base.Report.BytesSentTotal)
	}
}

// Without --staleness one exchange a step reads 2 steps behind, and local
// steps read one exchange behind, whose rows in flight the node's own
// update stands in for.
func TestDefaultStalenessFollowsLocalSteps(t *testing.T) {
	for h, want := range map[int]int{1: 2, 2: 1, 3: 1, 4: 1, 32: 1} {
		if got := defaultStaleness(h); got != want {
			t.Errorf("%d local steps: staleness %d, want %d", h, got, want)
		}
	}
	f := exchangeFlags{localSteps: 4}
	if f.staleness(5, true) != 5 || f.staleness(2, false) != 1 {
		t.Errorf("a given staleness is kept, a default one follows the local steps: got %d and %d", f.staleness(5, true), f.staleness(2, false))
	}
}

// The simulator takes --local-steps auto from the run's length, whatever
// its modelled links: as many as 24 steps allow with
// node.MinAutoExchanges exchanges, 4, at staleness 1, on the LAN profile
// as over geo3; a given count stands.
func TestSimulateDecidesLocalSteps(t *testing.T) {
	for _, tc := range []struct{ wan, want string }{
		{"lan", "staleness 1, 4 local steps per exchange (auto),"},
		{"geo3", "staleness 1, 4 local steps per exchange (auto),"},
		{"geo3", "staleness 2, 3 local steps per exchange, outer adaptive at 1,"},
	} {
		args := []string{"simulate", "--nodes", "4", "--iterations", "24", "--wan", tc.wan, "--json"}
		if !strings.Contains(tc.want, "(auto)") {
			args = append(args, "--local-steps", "3", "--staleness", "2")
		}
		code, out, errOut := runMain(args...)
		if code != 0 || !strings.Contains(errOut, tc.want) {
			t.Fatalf("%v: exit %d, stderr %q; want a banner with %q", args, code, errOut, tc.want)
		}
		var rep struct {
			Staleness      int    `json:"staleness"`
			NodeIterations uint64 `json:"node_iterations"`
		}
		if err := json.Unmarshal([]byte(out), &rep); err != nil || rep.NodeIterations != 4*24 {
			t.Fatalf("%v: report %+v (%v): want 96 node iterations", args, rep, err)
		}
	}
}
