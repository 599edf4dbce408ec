package sim

// Invariants and assertions: what a run checks while it runs and at its
// end (updates delivered to every live member, none applied twice).

import (
	"fmt"
	"math"
	"slices"
)

// check runs every sync interval: it ends the run once every live node is
// done and anti-entropy has left no gap (or has had 50 intervals to close
// them), and ends a run in which nobody has trained for 200 sync timeouts.
func (s *sim) check() {
	switch {
	case s.allDoneAt >= 0:
		if s.undelivered() == 0 && s.settled() || s.now-s.allDoneAt >= 50*s.interval {
			s.stop = true
			return
		}
	case s.now-s.lastTraining() > 200*s.timeout:
		s.stalled = true
		s.stop = true
		return
	}
	s.schedule(s.now+s.interval, evCheck, 0, 0, 0, nil)
}

func (s *sim) assert(st simStep) {
	var v float64
	switch st.metric {
	case "staleness":
		v = float64(s.total().staleMax)
	case "loss", "accuracy":
		loss, acc := s.meanMetrics()
		v = loss
		if st.metric == "accuracy" {
			v = acc
		}
	case "live":
		v = float64(s.live())
	case "undelivered":
		v = float64(s.undelivered())
	case "applied_twice":
		v = float64(s.appliedTwice())
	}
	var ok bool
	switch st.cmp {
	case "<=":
		ok = v <= st.value
	case "<":
		ok = v < st.value
	case ">=":
		ok = v >= st.value
	case ">":
		ok = v > st.value
	case "==":
		ok = v == st.value
	}
	s.assertions = append(s.assertions, AssertionResult{
		Line:             st.Line,
		Step:             fmt.Sprintf("at %s: %s", atText(st.At), st.Text),
		Iteration:        s.minLiveClock(),
		SimulatedSeconds: float64(s.now) / 1e9,
		Value:            finite(v),
		Passed:           ok,
	})
}

// incarnationSpan names an incarnation's updates: those above entry up to
// clock.
type incarnationSpan struct {
	id           string
	entry, clock uint64
}

// undelivered counts the updates some live node holds and another lacks,
// of every incarnation, those a rejoin replaced included. An origin's
// updates are those above the clock it started at up to its clock; below
// the smallest entry any live node has for an origin, every live node
// holds them all.
func (s *sim) undelivered() uint64 {
	var live []*simNode
	for _, n := range s.nodes {
		if n.member() {
			live = append(live, n)
		}
	}
	origins := slices.Clone(s.retired)
	for _, n := range s.nodes {
		if n.core != nil {
			origins = append(origins, incarnationSpan{id: n.id, entry: n.core.Entry(), clock: n.core.Clock()})
		}
	}
	var count uint64
	for _, origin := range origins {
		held := uint64(math.MaxUint64)
		for _, n := range live {
			held = min(held, n.core.VectorClock().Get(origin.id))
		}
		lo := max(origin.entry, held)
		for c := lo + 1; c <= origin.clock; c++ {
			holders := 0
			for _, n := range live {
				if n.core.VectorClock().Has(origin.id, c) {
					holders++
				}
			}
			if holders > 0 && holders < len(live) {
				count++
			}
		}
	}
	return count
}

// appliedTwice is, over all nodes, how many more updates a core has applied
// (on top of those its starting snapshot held) than the distinct updates it
// holds: nonzero only if one went in twice.
func (s *sim) appliedTwice() uint64 {
	extra := s.retiredTwice
	for _, n := range s.nodes {
		if n.core == nil {
			continue
		}
		base, applied, held := n.core.Ledger()
		if base+applied > held {
			extra += base + applied - held
		}
	}
	return extra
}
