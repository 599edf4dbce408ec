package sim

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sketchmesh/sketchmesh/netmodel"
)

// TestSimScale produces the simulator's figures. It is skipped unless
// SKETCHMESH_SIM_SCALE names what to run, comma-separated:
//
//	big      1024 nodes, logistic regression on rcv1, 50 iterations
//	traffic  messages and bytes per node-iteration against P, full and halton
//	         (SKETCHMESH_SIM_SIZES=16,64 picks the sizes; default 16 to 1024)
//	geo      staleness and blocked time against P on geo3, with and without 1% loss
//	faults   testdata/scenarios/faults.txt against a fault-free run, at lr 10
//	         and 5
//	join     testdata/scenarios/join.txt against a fault-free run
//	all      everything
//
// for example SKETCHMESH_SIM_SCALE=traffic go test -run TestSimScale -v
// -timeout 2h ./testnet/
func TestSimScale(t *testing.T) {
	want := strings.Split(os.Getenv("SKETCHMESH_SIM_SCALE"), ",")
	if want[0] == "" {
		t.Skip("set SKETCHMESH_SIM_SCALE to big, traffic, geo, faults, join or all")
	}
	run := func(name string) bool { return slices.Contains(want, name) || slices.Contains(want, "all") }
	// SGD at a rate the batch size keeps stable; with batch 0.5 a node of
	// a large mesh trains on its one row.
	base := func(nodes, iterations int) Config {
		cfg := simConfig(t, nodes, iterations, 1)
		cfg.LR, cfg.Batch = 10, 0.5
		return cfg
	}
	simulate := func(t *testing.T, cfg Config) *Report {
		t.Helper()
		r, err := Run(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	line := func(label string, r *Report) {
		t.Logf("%-24s P=%-5d %-6s s=%d wall %7.1fs  sim %6.3fs  %8.0f node-it/s wall  %9.0f node-it/s sim  msgs/node-it %7.1f  KB/node-it %7.1f  stale max %d mean %.2f  blocked/node %.3fs  loss %.4f  resent %d  ok %v",
			label, r.Nodes, r.Topology, r.Staleness, r.WallSeconds, r.SimulatedSeconds, r.NodeIterationsPerSecond,
			r.SimulatedNodeIterationsPerSecond, r.MessagesPerNodePerIteration, r.BytesPerNodePerIteration/1024,
			r.StalenessObservedMax, r.StalenessObservedMean, r.BlockedSecondsPerNode, r.FinalTestLoss, r.UpdatesResent, r.Invariants.OK)
	}
	if run("big") {
		cfg := base(1024, 50)
		cfg.FlushDelay = time.Millisecond
		line("big (lan, flush 1ms)", simulate(t, cfg))
	}
	if run("traffic") {
		sizes := []int{16, 64, 256, 1024}
		if v := os.Getenv("SKETCHMESH_SIM_SIZES"); v != "" {
			sizes = sizes[:0]
			for _, f := range strings.Split(v, ",") {
				p, err := strconv.Atoi(f)
				if err != nil {
					t.Fatalf("SKETCHMESH_SIM_SIZES: %v", err)
				}
				sizes = append(sizes, p)
			}
		}
		for _, p := range sizes {
			for _, topo := range []string{"full", "halton"} {
				for _, flush := range []time.Duration{0, time.Millisecond} {
					if topo == "full" && flush > 0 {
						continue // nothing to batch: every message is one update
					}
					cfg := base(p, 10)
					cfg.Topology, cfg.FlushDelay = topo, flush
					line("traffic flush "+flush.String(), simulate(t, cfg))
				}
			}
		}
	}
	if run("geo") {
		for _, net := range []string{"geo3", "geo3,loss=0.01"} {
			wan, err := netmodel.ParseLinkProfile(net)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range []int{16, 64, 256} {
				for _, topo := range []string{"full", "halton"} {
					for _, s := range []int{0, 2} {
						cfg := base(p, 30)
						cfg.WAN, cfg.Staleness, cfg.Topology = wan, s, topo
						cfg.LR = 1 // stale reads at rate 10 diverge
						if topo == "halton" {
							cfg.FlushDelay = time.Millisecond
						}
						line(net, simulate(t, cfg))
					}
				}
			}
		}
	}
	against := func(script string, lr float64) {
		sc := loadScenario(t, script)
		for _, p := range []int{64, 256} {
			cfg := base(p, 50)
			cfg.LR, cfg.FlushDelay = lr, time.Millisecond
			clean := simulate(t, cfg)
			line(fmt.Sprintf("fault-free, lr %g", lr), clean)
			cfg.Faults = sc
			r := simulate(t, cfg)
			line(fmt.Sprintf("%s, lr %g", script, lr), r)
			t.Logf("%-24s loss ratio %.3f; live %d, joined %d, dropped %v, rejected %v, assertions %+v", "",
				r.FinalTestLoss/clean.FinalTestLoss, r.LiveNodes, r.Joined, r.Dropped, r.Rejected, r.Assertions)
		}
	}
	if run("faults") {
		// At lr 10 the fault-free loss swings from one iteration to the
		// next; at lr 5 it falls steadily.
		against("faults.txt", 10)
		against("faults.txt", 5)
	}
	if run("join") {
		against("join.txt", 10)
	}
}

// Of the cores that commit the same rows, one computes each shared view
// and the others take it: a view no core holds any more is kept for the
// cores behind (node.RowStore). When it was not, the first core to reach
// a view moved on before the next came, and nearly every core computed
// every view itself (at P = 128 about one per node and iteration, 768
// here).
func TestSimCoresComputeEachViewOnce(t *testing.T) {
	const p, iters = 128, 6
	cfg := simConfig(t, p, iters, 1)
	s, r := runSim(t, cfg)
	if !r.Invariants.OK {
		t.Fatalf("invariants: %+v", r.Invariants)
	}
	// A fold point every 64 updates: p/64 a row, iters rows.
	want := uint64(p / 64 * iters)
	rows := s.workers[0].rows
	if rows.Computed > 2*want || rows.Taken < uint64(p*iters) {
		t.Fatalf("%d views computed, %d taken; want at most %d computed (one per fold point and row: %d) and at least %d taken", rows.Computed, rows.Taken, 2*want, want, p*iters)
	}
}
