package node

import "maps"

// RejectReason names why the node refused an input: one of the Reject*
// constants (RejectReasons lists them), the keys of Stats.Rejected.
type RejectReason string

// Tracer observes a node's core as it runs, after go-libp2p-pubsub's
// RawTracer: the core calls it at the points where it applies and where it
// refuses, on its own goroutine and synchronously, so an implementation
// must be quick and must not call back into the node. Metrics, reports
// and traces can count the same events through it instead of each keeping
// a tally of its own.
type Tracer interface {
	// Apply is called when origin's update of clock enters the view (this
	// node's own included), once per update.
	Apply(origin string, clock uint64)
	// Reject is called for every input the node refuses, once per count in
	// Stats.Rejected.
	Reject(reason RejectReason)
}

// NoTracer ignores every event.
type NoTracer struct{}

// Apply implements Tracer.
func (NoTracer) Apply(string, uint64) {}

// Reject implements Tracer.
func (NoTracer) Reject(RejectReason) {}

// RejectTally is a Tracer that counts refusals by reason. Given as the
// Tracer of several cores it is the one tally of their refusals that a
// report reads, cores that a run replaced (a rejoin builds a new one)
// included. The zero value is ready; it is not safe for concurrent use.
type RejectTally struct {
	counts map[RejectReason]uint64
}

// Apply implements Tracer.
func (*RejectTally) Apply(string, uint64) {}

// Reject implements Tracer: it counts the refusal under its reason.
func (t *RejectTally) Reject(reason RejectReason) {
	if t.counts == nil {
		t.counts = map[RejectReason]uint64{}
	}
	t.counts[reason]++
}

// Counts returns a copy of the tally, by reason (empty, not nil, before the
// first refusal).
func (t *RejectTally) Counts() map[RejectReason]uint64 {
	out := make(map[RejectReason]uint64, len(t.counts))
	maps.Copy(out, t.counts)
	return out
}

// Add adds o's counts to t's.
func (t *RejectTally) Add(o *RejectTally) {
	for reason, n := range o.counts {
		if t.counts == nil {
			t.counts = map[RejectReason]uint64{}
		}
		t.counts[reason] += n
	}
}

var _ Tracer = (*RejectTally)(nil)
