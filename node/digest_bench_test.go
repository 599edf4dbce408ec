package node

import (
	"fmt"
	"testing"

	"github.com/sketchmesh/sketchmesh/codec"
	"github.com/sketchmesh/sketchmesh/model"
)

// digestBenchParams is the model size the digest's cost is judged at.
const digestBenchParams = 1 << 20

func BenchmarkViewDigest(b *testing.B) {
	view := make([]float64, digestBenchParams)
	for i := range view {
		view[i] = float64(i) * 1e-3
	}
	b.SetBytes(8 * digestBenchParams)
	for i := 0; i < b.N; i++ {
		digestSink ^= digestView(view, uint64(i))
	}
}

// digestSink keeps the compiler from dropping the hashing it measures.
var digestSink uint64

// BenchmarkTrainIteration measures one iteration of a lone node on a
// 2^20-parameter logistic regression (rcv1 rows, SGD, raw frames): with
// every row hashed, and with rows hashed every DigestEvery clocks.
func BenchmarkTrainIteration(b *testing.B) {
	train := testData(b)
	mdl, err := model.New(model.Config{Kind: model.LogisticRegression, MaxFeature: digestBenchParams - 1})
	if err != nil {
		b.Fatal(err)
	}
	for _, batch := range []int{32, 256} {
		for _, every := range []uint64{0, 1, DigestEvery(mdl.NumParams())} {
			name := fmt.Sprintf("batch=%d/digest_every=%d", batch, every)
			if every == 0 {
				name = fmt.Sprintf("batch=%d/no_digest", batch)
			}
			b.Run(name, func(b *testing.B) {
				opt, err := model.NewOptimizer(model.SGD, 0.1, mdl.NumParams())
				if err != nil {
					b.Fatal(err)
				}
				n, err := New(Config{ID: "a", Members: []string{"a"}, Model: mdl, Optimizer: opt, Codec: codec.Raw{},
					BatchSize: batch, Seed: 1, Shard: train.Rows, Iterations: uint64(b.N)})
				if err != nil {
					b.Fatal(err)
				}
				n.digestEvery = every
				if every == 0 {
					n.digestEvery = ^uint64(0)
				}
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if err := n.Train(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
