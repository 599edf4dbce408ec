package sim

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkSimQueue pops and pushes one event at a time on a queue of a
// million, as a worker does while a mesh of 10,000 says hello: each event
// handled schedules one a link latency later.
func BenchmarkSimQueue(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	var q simQueue
	seq := uint64(0)
	for range 1 << 20 {
		seq++
		q.push(simEvent{at: rng.Int64N(1e6), seq: seq})
	}
	for b.Loop() {
		e := q.pop()
		seq++
		q.push(simEvent{at: e.at + 1e5 + rng.Int64N(1e5), seq: seq})
	}
}
