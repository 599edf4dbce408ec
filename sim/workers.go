package sim

// Workers: the run's nodes dealt over goroutines that advance together in
// windows of virtual time.
//
// Every core receives, screens, routes and overlays every update, P² an
// iteration, and one goroutine did all of it: P = 4096 used one of the
// machine's cores. Node i belongs to worker i mod W, which alone runs its
// events (its deliveries, ticks, training, windows) and owns its outgoing
// links (their busy times and queues), its cores' shared caches (decode
// cache, row store, slot table, pools, gradient scratch), its random
// source, its counters and its trace hash.
//
// The workers advance in windows as long as the least one-way latency of
// the network, the lookahead: a message sent inside a window lands at
// least one latency after it was sent, so after the window, and nothing a
// worker does inside a window can reach another worker's nodes before the
// window ends. A message for another worker's node waits in the sender's
// outbox and joins that worker's queue at the window's end. What reads or
// changes the run as a whole (the script's steps, a node's stop or rejoin,
// the checks for the end, progress) happens between windows, with every
// worker stopped, at the window's end; a window also ends at the next
// periodic check.
//
// Events are ordered by (virtual time, sequence), a worker's sequence
// numbers being its own count interleaved with the other workers' (count
// × W + worker), so the order, and the run, depend on the seed and W
// only: the same seed and number of workers give the same trace hash on
// any machine. With W = 1 there is one worker and windows still end at
// the lookahead.

import (
	"math/rand/v2"
	"sync"

	"github.com/sketchmesh/sketchmesh/model"
	"github.com/sketchmesh/sketchmesh/node"
)

// MaxWorkers bounds Config.Workers.
const MaxWorkers = 64

// tally is what a worker counts for the report.
type tally struct {
	msgs, bytes, syncMsgs, syncBytes, dups uint64
	// sentBy counts the update protocol's messages by cause.
	sentBy [numCauses]uint64
	// memberMsgs and memberBytes count the membership protocol's
	// messages (hellos, admits, leaves, acks), apart from msgs and bytes.
	memberMsgs, memberBytes   uint64
	dropped                   map[string]uint64
	staleMax, staleSum, reads uint64
	nodeIters                 uint64
	lastTrain                 int64
	events                    uint64
	// divergences are the view divergences the cores reported
	// (node.EventDiverged).
	divergences []Divergence
	// rejected is every core's Tracer: the one tally of their refusals.
	rejected node.RejectTally
}

// add adds o's counts to t's.
func (t *tally) add(o *tally) {
	t.msgs += o.msgs
	t.bytes += o.bytes
	t.syncMsgs += o.syncMsgs
	t.syncBytes += o.syncBytes
	t.dups += o.dups
	for c := range t.sentBy {
		t.sentBy[c] += o.sentBy[c]
	}
	t.memberMsgs += o.memberMsgs
	t.memberBytes += o.memberBytes
	for k, v := range o.dropped {
		t.dropped[k] += v
	}
	t.staleMax = max(t.staleMax, o.staleMax)
	t.staleSum += o.staleSum
	t.reads += o.reads
	t.nodeIters += o.nodeIters
	t.lastTrain = max(t.lastTrain, o.lastTrain)
	t.events += o.events
	t.divergences = append(t.divergences, o.divergences...)
	t.rejected.Add(&o.rejected)
}

// worker runs the events of its share of the nodes. It embeds the run: the
// fields it declares itself (the time, the queue, the links, the caches,
// the counters, the trace) are its own and hide the run's of the same
// name, the rest (the nodes, the configuration, the network) it reads, and
// changes only for its own nodes.
type worker struct {
	*sim
	id  int
	now int64
	q   simQueue
	seq uint64
	// cause is why the messages being sent now leave (a cause constant).
	cause int
	rng   *rand.Rand
	trace simTrace
	tally
	// busy is when a directed link (linkKey) from one of the worker's
	// nodes is free again, for the links still busy at the last sweep or
	// sent on since: a link free by now is the same as one never used,
	// and every node broadcasts to every other, so a table of all P²
	// links would be dense.
	busy     map[uint64]int64
	busyKept int
	// waiting holds the queues of the busy links something waits for
	// (links.go).
	waiting map[uint64]*linkQueue
	// What the worker's cores share.
	cache   *node.DecodeCache
	rows    *node.RowStore
	scratch model.Scratch
	queues  node.QueuePool
	slots   *node.SlotTable
	// out holds, by worker, the events for other workers' nodes scheduled
	// in this window.
	out [][]simEvent
	// trained is set when a node trained in this window (the script's
	// steps and progress follow the slowest clock); stops and rejoins are
	// what the window asked of the run, done at its end in order.
	trained bool
	stops   []*simNode
	rejoins []*simNode
	// err is the error that stopped the worker.
	err error
}

func newWorker(s *sim, id int) *worker {
	p := s.p
	w := &worker{
		sim:   s,
		id:    id,
		seq:   uint64(id),
		rng:   rand.New(rand.NewPCG(s.cfg.Seed, 0x5eed_51a7+uint64(id))),
		trace: simTrace(14695981039346656037),
		tally: tally{dropped: map[string]uint64{}},
		busy:  map[uint64]int64{}, waiting: map[uint64]*linkQueue{},
		// Every receiver decodes the same frame to the same update; one
		// cache a worker turns P² decodes an iteration into P per
		// worker. It holds the frames of the iterations that can be in
		// flight at once.
		cache: node.NewDecodeCache(p * (s.cfg.Staleness + 3)),
		// Cores that committed the same updates share one committed
		// view; the store remembers the digests of the updates the
		// cache holds, which are those the cores add to their rows but
		// for late ones.
		rows:  node.NewRowStore(s.mdl.NumParams(), p*(s.cfg.Staleness+3)),
		slots: node.NewSlotTable(p),
		out:   make([][]simEvent, s.cfg.Workers),
	}
	return w
}

// workerOf returns the worker that runs node i.
func (s *sim) workerOf(i int32) *worker { return s.workers[int(i)%len(s.workers)] }

// handler returns the worker that handles an event of kind for node n from
// node from: n's, but a link's next message is its sender's.
func (s *sim) handler(kind uint8, n, from int32) *worker {
	if kind == evLinkFree {
		return s.workerOf(from)
	}
	return s.workerOf(n)
}

// schedule queues an event: on this worker's queue when it is for one of
// its nodes (a link's next message is its sender's), else in its outbox
// for the window's end; a check is the run's.
func (w *worker) schedule(at int64, kind uint8, n, from int32, tag uint32, data []byte) {
	w.seq += uint64(len(w.workers))
	ev := simEvent{at: at, seq: w.seq, kind: kind, node: n, from: from, tag: tag, data: data}
	if to := w.handler(kind, n, from); to != w {
		w.out[to.id] = append(w.out[to.id], ev)
		return
	}
	w.q.push(ev)
}

// runUntil handles the worker's events before end.
func (w *worker) runUntil(end int64) {
	for w.err == nil && len(w.q) > 0 && w.q[0].at < end {
		ev := w.q.pop()
		w.now = ev.at
		w.events++
		w.handle(ev)
	}
}

// window runs every worker up to end, in parallel when more than one has
// events before it, and hands each the events the others scheduled for
// its nodes.
func (s *sim) window(end int64) {
	busy := 0
	for _, w := range s.workers {
		if len(w.q) > 0 && w.q[0].at < end {
			busy++
		}
	}
	if busy > 1 {
		var wg sync.WaitGroup
		for _, w := range s.workers {
			wg.Go(func() { w.runUntil(end) })
		}
		wg.Wait()
	} else {
		for _, w := range s.workers {
			w.runUntil(end)
		}
	}
	for _, w := range s.workers {
		for to, evs := range w.out {
			for _, ev := range evs {
				s.workers[to].q.push(ev)
			}
			clear(evs)
			w.out[to] = evs[:0]
		}
	}
}

// nextEvent returns the time of the earliest event queued, false when
// there is none.
func (s *sim) nextEvent() (int64, bool) {
	at, ok := int64(0), false
	for _, w := range s.workers {
		if len(w.q) > 0 && (!ok || w.q[0].at < at) {
			at, ok = w.q[0].at, true
		}
	}
	if len(s.checks) > 0 && (!ok || s.checks[0].at < at) {
		at, ok = s.checks[0].at, true
	}
	return at, ok
}

// setNow sets the run's and every worker's time, between windows.
func (s *sim) setNow(t int64) {
	s.now = t
	for _, w := range s.workers {
		w.now = t
	}
}

// lastTraining is when a node last trained.
func (s *sim) lastTraining() int64 {
	var last int64
	for _, w := range s.workers {
		last = max(last, w.lastTrain)
	}
	return last
}

// total returns the workers' counts added up.
func (s *sim) total() *tally {
	t := &tally{dropped: map[string]uint64{}}
	for _, w := range s.workers {
		t.add(&w.tally)
	}
	return t
}

// traceHash combines the run's trace (its steps, joins and checks) with
// the workers', in worker order.
func (s *sim) traceHash() uint64 {
	t := s.trace
	for _, w := range s.workers {
		t.words(uint64(w.trace))
	}
	return uint64(t)
}
