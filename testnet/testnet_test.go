package testnet

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/sketchmesh/sketchmesh/dataset"
	"github.com/sketchmesh/sketchmesh/model"
	"github.com/sketchmesh/sketchmesh/netmodel"
	"github.com/sketchmesh/sketchmesh/node"
)

func builtin(t *testing.T, name string) (train, test *dataset.Dataset) {
	t.Helper()
	train, test, err := dataset.Builtin(name)
	if err != nil {
		t.Fatal(err)
	}
	return train, test
}

func run(t *testing.T, cfg Config) *Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// Four real libp2p nodes under bulk-synchronous steps end every run with
// bit-identical views, having applied every update exactly once.
func TestFourNodesBitIdentical(t *testing.T) {
	train, test := builtin(t, "rcv1")
	rep := run(t, Config{
		Nodes: 4, Train: train, Test: test, Training: netmodel.Training{
			Model: model.LogisticRegression, Optimizer: model.Adam, LR: 0.02, L2: 1e-4,
			Batch: 0.1, Iterations: 20, Seed: 1, Codec: "raw",
		}, Topology: "full",
	})
	if !rep.ViewsIdentical {
		t.Fatal("views differ after 20 bulk-synchronous iterations")
	}
	for i, n := range rep.PerNode {
		if n.Clock != 20 || n.UpdatesApplied != 4*20 {
			t.Fatalf("node %d: clock %d, applied %d; want 20 and 80", i, n.Clock, n.UpdatesApplied)
		}
		if n.MessagesSent != 3*20 {
			t.Fatalf("node %d sent %d messages, want 60 (one per peer per iteration)", i, n.MessagesSent)
		}
	}
	if len(rep.Rejected) != 0 {
		t.Fatalf("rejected %v", rep.Rejected)
	}
	if rep.BytesSentTotal == 0 || rep.BytesSentPerNodePerIteration != float64(rep.BytesSentTotal)/4/20 {
		t.Fatalf("bytes: total %d, per node per iteration %v", rep.BytesSentTotal, rep.BytesSentPerNodePerIteration)
	}
}

// Four nodes reach the accuracy of one node trained on all the data with the
// same settings. Plain SGD makes the claim exact in expectation: the mesh
// averages four shard gradients, one node takes the same total batch.
func TestFourNodesMatchSingleNode(t *testing.T) {
	cases := []struct {
		data  string
		lr    float64
		batch float64
		iters int
	}{
		{data: "rcv1", lr: 10, batch: 0.1, iters: 800},
		{data: "a9a", lr: 1, batch: 0.01, iters: 400},
	}
	for _, c := range cases {
		t.Run(c.data, func(t *testing.T) {
			train, test := builtin(t, c.data)
			cfg := Config{
				Train: train, Test: test, Training: netmodel.Training{
					Model: model.LogisticRegression, Optimizer: model.SGD, LR: c.lr, L2: 1e-4,
					Batch: c.batch, Iterations: c.iters, Seed: 1, Codec: "raw",
				},
			}
			cfg.Nodes = 4
			mesh := run(t, cfg)
			cfg.Nodes = 1
			single := run(t, cfg)
			ma, sa := *mesh.FinalTestAccuracy, *single.FinalTestAccuracy
			t.Logf("%s: 4 nodes %.4f, 1 node %.4f", c.data, ma, sa)
			if math.Abs(ma-sa) > 0.01 {
				t.Fatalf("4 nodes reach %.2f%%, one node %.2f%%: more than 1 point apart", 100*ma, 100*sa)
			}
			if sa < 0.8 {
				t.Fatalf("single node reaches only %.2f%%: the comparison is meaningless", 100*sa)
			}
		})
	}
}

// Relaying along the Halton overlay delivers exactly what the full mesh
// delivers: 16 nodes end with the same model, bit for bit, while each node
// holds O(log P) links instead of P-1.
func TestHaltonMatchesFullMeshBitForBit(t *testing.T) {
	train, test := builtin(t, "rcv1")
	cfg := Config{
		Nodes: 16, Train: train, Test: test, Training: netmodel.Training{
			Model: model.LogisticRegression, Optimizer: model.Adam, LR: 0.02, L2: 1e-4,
			Batch: 0.2, Iterations: 15, Seed: 4, Codec: "raw",
		},
	}
	cfg.Topology = "full"
	full := run(t, cfg)
	cfg.Topology = "halton"
	relayed := run(t, cfg)
	if !full.ViewsIdentical || !relayed.ViewsIdentical {
		t.Fatalf("views identical: full %v, halton %v", full.ViewsIdentical, relayed.ViewsIdentical)
	}
	for i := range full.PerNode {
		f, h := full.PerNode[i], relayed.PerNode[i]
		if f.TestLoss != h.TestLoss || f.UpdatesApplied != 16*15 || h.UpdatesApplied != 16*15 {
			t.Fatalf("node %d: test loss %v (full) vs %v (halton), applied %d and %d", i, f.TestLoss, h.TestLoss, f.UpdatesApplied, h.UpdatesApplied)
		}
	}
	var relays uint64
	for _, n := range relayed.PerNode {
		relays += n.UpdatesRelayed
	}
	if relays == 0 {
		t.Fatal("no update was relayed on the halton overlay")
	}
	if relayed.LinksPerNode >= full.LinksPerNode || relayed.MessagesPerNodePerIteration >= full.MessagesPerNodePerIteration {
		t.Fatalf("halton: %.1f links and %.1f messages per node per iteration; full: %.1f and %.1f",
			relayed.LinksPerNode, relayed.MessagesPerNodePerIteration, full.LinksPerNode, full.MessagesPerNodePerIteration)
	}
	if len(relayed.Rejected) != 0 {
		t.Fatalf("halton run rejected %v", relayed.Rejected)
	}
}

func TestValidateRejectsBadConfig(t *testing.T) {
	train, test := builtin(t, "rcv1")
	good := Config{Nodes: 2, Train: train, Test: test, Training: netmodel.Training{
		Model: model.LogisticRegression, Optimizer: model.SGD, LR: 1, Batch: 0.1,
		Iterations: 1, Codec: "raw",
	}}
	cases := map[string]func(c *Config){
		"no nodes":        func(c *Config) { c.Nodes = 0 },
		"too many nodes":  func(c *Config) { c.Nodes = 257 },
		"zero batch":      func(c *Config) { c.Batch = 0 },
		"fractional rows": func(c *Config) { c.Batch = 2.5 },
		"no iterations":   func(c *Config) { c.Iterations = 0 },
		"unknown codec":   func(c *Config) { c.Codec = "gzip9" },
		"no test data":    func(c *Config) { c.Test = nil },
		"negative s":      func(c *Config) { c.Staleness = -1 },
		"unknown overlay": func(c *Config) { c.Topology = "ring" },
	}
	for name, mutate := range cases {
		c := good
		mutate(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if err := good.Validate(); err != nil {
		t.Fatalf("good config refused: %v", err)
	}
}

// SketchML with error feedback trains as well as the raw codec while sending
// several times fewer bytes.
func TestSketchMLMatchesRaw(t *testing.T) {
	for _, data := range []string{"rcv1", "a9a"} {
		t.Run(data, func(t *testing.T) {
			train, test := builtin(t, data)
			cfg := Config{
				Nodes: 4, Train: train, Test: test, Training: netmodel.Training{
					Model: model.LogisticRegression, Optimizer: model.Adam, LR: 0.01, L2: 1e-4,
					Batch: 0.1, Iterations: 150, Seed: 1, ErrorFeedback: true,
				},
			}
			if data == "a9a" {
				cfg.Batch = 0.01
			}
			cfg.Codec = "raw"
			raw := run(t, cfg)
			cfg.Codec = "sketchml"
			sk := run(t, cfg)
			ra, sa := *raw.FinalTestAccuracy, *sk.FinalTestAccuracy
			t.Logf("%s: raw %.4f (%.0f B/node/iter), sketchml %.4f (%.0f B/node/iter)", data, ra, raw.BytesSentPerNodePerIteration, sa, sk.BytesSentPerNodePerIteration)
			if math.Abs(ra-sa) > 0.01 {
				t.Fatalf("sketchml reaches %.2f%%, raw %.2f%%", 100*sa, 100*ra)
			}
			if sk.BytesSentPerNodePerIteration*2 > raw.BytesSentPerNodePerIteration {
				t.Fatalf("sketchml sends %.0f bytes per node per iteration, raw %.0f: not even half", sk.BytesSentPerNodePerIteration, raw.BytesSentPerNodePerIteration)
			}
			if !sk.ViewsIdentical || sk.CompressionRatio < 2 {
				t.Fatalf("sketchml: views identical %v, compression ratio %.2f", sk.ViewsIdentical, sk.CompressionRatio)
			}
		})
	}
}

func digits(t *testing.T) (train, test *dataset.Dataset) {
	t.Helper()
	all, err := dataset.ReadFile("testdata/digits.libsvm.gz")
	if err != nil {
		t.Fatal(err)
	}
	s := all.Shuffled(7)
	cut := len(s.Rows) / 5
	return &dataset.Dataset{Name: "digits.train", Rows: s.Rows[cut:], MaxFeature: all.MaxFeature},
		&dataset.Dataset{Name: "digits.test", Rows: s.Rows[:cut], MaxFeature: all.MaxFeature}
}

// Softmax with sufficient factors: views stay bit-identical under
// bulk-synchronous steps with a lossless codec, small batches travel as
// factors and large ones as the matrix delta, and the mesh trains as well as
// one node.
func TestSoftmaxSufficientFactors(t *testing.T) {
	train, test := digits(t)
	base := Config{
		Nodes: 4, Train: train, Test: test, Training: netmodel.Training{
			Model: model.Softmax, Optimizer: model.SGD, LR: 0.3, Batch: 4, Iterations: 400,
			Seed: 2, Codec: "raw",
		}, Factors: node.FactorsAuto,
	}
	small := run(t, base)
	if !small.ViewsIdentical {
		t.Fatal("views differ with factor frames under staleness 0")
	}
	if small.SFBFramesSent != 4*400 || small.DeltaFramesSent != 0 {
		t.Fatalf("batch 4: %d factor and %d delta frames; factors are smaller and should always win", small.SFBFramesSent, small.DeltaFramesSent)
	}
	big := base
	big.Batch = 300
	large := run(t, big)
	if large.DeltaFramesSent != 4*400 {
		t.Fatalf("batch 300: %d factor and %d delta frames; the delta is smaller and should always win", large.SFBFramesSent, large.DeltaFramesSent)
	}
	off := base
	off.Factors = node.FactorsOff
	delta := run(t, off)
	if small.BytesSentPerNodePerIteration >= delta.BytesSentPerNodePerIteration {
		t.Fatalf("batch 4: factors %.0f B/node/iter, delta %.0f", small.BytesSentPerNodePerIteration, delta.BytesSentPerNodePerIteration)
	}
	single := base
	single.Nodes = 1
	single.Batch = 16
	one := run(t, single)
	ma, sa := *small.FinalTestAccuracy, *one.FinalTestAccuracy
	t.Logf("4 nodes with factors %.4f, one node %.4f, delta-only mesh %.4f", ma, sa, *delta.FinalTestAccuracy)
	if math.Abs(ma-sa) > 0.01 || sa < 0.85 {
		t.Fatalf("4 nodes reach %.2f%%, one node %.2f%%", 100*ma, 100*sa)
	}
}

func TestFactorsRefuseAdam(t *testing.T) {
	train, test := digits(t)
	_, err := Run(context.Background(), Config{
		Nodes: 2, Train: train, Test: test, Training: netmodel.Training{
			Model: model.Softmax, Optimizer: model.Adam, LR: 0.05, Batch: 4, Iterations: 1,
			Codec: "raw",
		}, Factors: node.FactorsAuto,
	})
	if !errors.Is(err, node.ErrFactorConfig) || !strings.Contains(err.Error(), "adam") {
		t.Fatalf("err = %v, want ErrFactorConfig naming adam", err)
	}
}
