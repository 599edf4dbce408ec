package sim

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/sketchmesh/sketchmesh/netmodel"
)

// BenchmarkSimulate runs the simulator at the defaults of `simulate` (adam,
// sketchml, halton with sites, a 1 ms relay window, staleness 2) on rcv1
// hashed into 2^16 weights, 10 iterations, and reports node-iterations per
// wall second, messages and bytes per node per iteration, and the bytes of
// heap each simulated node adds. SKETCHMESH_SIM_BENCH_NODES=1024 sets P
// (default 256), SKETCHMESH_SIM_BENCH_WORKERS the workers (default 2, as
// simulate's).
func BenchmarkSimulate(b *testing.B) {
	p := 256
	if v := os.Getenv("SKETCHMESH_SIM_BENCH_NODES"); v != "" {
		var err error
		if p, err = strconv.Atoi(v); err != nil {
			b.Fatalf("SKETCHMESH_SIM_BENCH_NODES: %v", err)
		}
	}
	workers := 2
	if v := os.Getenv("SKETCHMESH_SIM_BENCH_WORKERS"); v != "" {
		var err error
		if workers, err = strconv.Atoi(v); err != nil {
			b.Fatalf("SKETCHMESH_SIM_BENCH_WORKERS: %v", err)
		}
	}
	d, err := simData()
	if err != nil {
		b.Fatal(err)
	}
	cfg := Config{
		Nodes: p, Train: d[0].Hashed(16), Test: d[1].Hashed(16), Training: netmodel.Training{
			Model: "lr", Optimizer: "adam", LR: 0.02, L2: 1e-4, Batch: 0.1, Iterations: 10,
			Seed: 1, Codec: "sketchml", ErrorFeedback: true, Staleness: 2,
		}, FlushDelay: time.Millisecond, Workers: workers,
	}
	for b.Loop() {
		r, err := Run(context.Background(), cfg)
		if err != nil {
			b.Fatal(err)
		}
		if !r.Invariants.OK {
			b.Fatalf("invariants: %+v", r.Invariants)
		}
		b.ReportMetric(r.NodeIterationsPerSecond, "node-it/s")
		b.ReportMetric(r.MessagesPerNodePerIteration, "msgs/node-it")
		b.ReportMetric(r.BytesPerNodePerIteration, "B/node-it")
		b.ReportMetric(r.HeapBytesPerNode, "heap-B/node")
	}
}
