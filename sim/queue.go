package sim

// The event queue: every event of a run in virtual-time order, and the
// trace hash over them that replays compare.

type simEvent struct {
	at   int64 // virtual nanoseconds
	seq  uint64
	data []byte
	kind uint8
	node int32
	from int32
	tag  uint32 // the node's incarnation or stall epoch the event belongs to; an admission's donor; a leaver's last clock
}

// simQueue is a binary min-heap of events by (at, seq).
type simQueue []simEvent

func (q simQueue) less(i, j int) bool {
	return q[i].at < q[j].at || q[i].at == q[j].at && q[i].seq < q[j].seq
}

func (q *simQueue) push(e simEvent) {
	*q = append(*q, e)
	h := *q
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if !h.less(i, p) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

func (q *simQueue) pop() simEvent {
	h := *q
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h[last] = simEvent{}
	h = h[:last]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(h) && h.less(l, m) {
			m = l
		}
		if r < len(h) && h.less(r, m) {
			m = r
		}
		if m == i {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	*q = h
	return top
}

// simTrace is FNV-64a over the run's events, fed eight bytes per word.
type simTrace uint64

func (t *simTrace) words(ws ...uint64) {
	h := uint64(*t)
	for _, w := range ws {
		for range 8 {
			h ^= w & 0xff
			h *= 1099511628211
			w >>= 8
		}
	}
	*t = simTrace(h)
}

// Trace record kinds.
const (
	trDeliver = iota + 1
	trDrop
	trTrain
	trStep
	trDetect
	trJoin
)
