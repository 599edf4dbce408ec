package node

import (
	"hash/fnv"
	"math/rand/v2"

	"github.com/sketchmesh/sketchmesh/dataset"
)

// BatchSource gives a node its mini-batches; the rows are read during the
// node's Train and may be reused after it.
type BatchSource interface {
	Next() ([]dataset.Row, error)
}

func (n *Node) nextBatch() ([]dataset.Row, error) {
	if n.cfg.Batches != nil {
		return n.cfg.Batches.Next()
	}
	return n.sampler.next(n.cfg.Shard), nil
}

// sampler draws mini-batches without replacement, epoch by epoch, from a
// seeded permutation: the same seed and id give the same batches.
type sampler struct {
	rng   *rand.Rand
	perm  []int
	pos   int
	size  int
	batch []dataset.Row
}

func newSampler(rows, size int, seed uint64, id string) sampler {
	h := fnv.New64a()
	h.Write([]byte(id))
	s := sampler{rng: rand.New(rand.NewPCG(seed, h.Sum64())), perm: make([]int, rows), size: min(size, rows)}
	for i := range s.perm {
		s.perm[i] = i
	}
	s.pos = rows
	return s
}

func (s *sampler) next(shard []dataset.Row) []dataset.Row {
	s.batch = s.batch[:0]
	for len(s.batch) < s.size {
		if s.pos == len(s.perm) {
			s.rng.Shuffle(len(s.perm), func(i, j int) { s.perm[i], s.perm[j] = s.perm[j], s.perm[i] })
			s.pos = 0
		}
		s.batch = append(s.batch, shard[s.perm[s.pos]])
		s.pos++
	}
	return s.batch
}
