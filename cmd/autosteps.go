package cmd

import (
	"math"
	"runtime"
	"slices"
	"time"

	"github.com/sketchmesh/sketchmesh/model"
	"github.com/sketchmesh/sketchmesh/testnet"
)

// stepSamples is how many optimizer steps stepTime times.
const stepSamples = 7

// stepTime measures the compute of one optimizer step of cfg as a testnet
// node sees it: the median of stepSamples gradient and optimizer steps on
// the first shard's batches, times the nodes that share each core, plus
// the emulated compute time. It is 0 when there are no rows to time (a
// streamed run), which leaves --local-steps auto to its bounds.
func stepTime(cfg testnet.Config) time.Duration {
	if cfg.Train == nil || len(cfg.Train.Rows) < cfg.Nodes {
		return cfg.ComputeTime
	}
	mdl, err := model.NewModel(cfg.Model, cfg.L2, cfg.Train)
	if err != nil {
		return cfg.ComputeTime
	}
	opt, err := model.NewOptimizer(cfg.Optimizer, cfg.LR, mdl.NumParams())
	if err != nil {
		return cfg.ComputeTime
	}
	shard := cfg.Train.Shard(0, cfg.Nodes).Rows
	size := min(int(cfg.Batch), len(shard))
	if cfg.Batch < 1 {
		size = max(1, int(math.Ceil(cfg.Batch*float64(len(shard)))))
	}
	view := make([]float64, mdl.NumParams())
	var scratch model.Scratch
	took := make([]time.Duration, stepSamples)
	for i := range took {
		lo := i * size % len(shard)
		batch := shard[lo:min(lo+size, len(shard))]
		start := time.Now()
		g, _ := mdl.Gradient(view, batch, &scratch)
		opt.Update(g, 1)
		took[i] = time.Since(start)
	}
	slices.Sort(took)
	perCore := (cfg.Nodes + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0)
	return took[len(took)/2]*time.Duration(perCore) + cfg.ComputeTime
}
