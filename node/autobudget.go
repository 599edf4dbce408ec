package node

import (
	"math"
	"time"
)

// Choosing the budget.
//
// An exchange's frames must cross a link before the next exchange needs
// them, or the link, not the round, sets the pace: on a slow link every
// exchange waits for the bytes of the one before, and the wait grows with
// the frames. AutoBudget bounds a frame so that the frames one link
// carries in an exchange take at most the exchange's period (the round it
// waits for, or its local steps' compute if longer) at the slowest link's
// bandwidth; the update prioritization then sends the largest changes and
// keeps the rest in the residual. Where links are fast the bound is far
// above any frame and cuts nothing, so the default is the training of
// before there (a budget that no frame reaches changes no byte). Like the
// local steps, its inputs are figures the driver feeds it and it is a pure
// function of them; unlike them it is each node's own choice (receivers
// apply whatever frame arrives), so it needs no agreement.

// AutoBudget returns the byte budget of one update's frame for links of
// bandwidth bytes per second, exchanges period apart and framesPerLink
// frames on a link each exchange: bandwidth × period / framesPerLink, at
// least least (one frame of the codec, MinBudgetBytes). It returns 0, no
// bound, when a figure is not known (zero or less): links that are not
// modelled or measured take no budget.
func AutoBudget(bandwidth float64, period time.Duration, framesPerLink float64, least int) int {
	if !(bandwidth > 0) || period <= 0 || !(framesPerLink > 0) || math.IsInf(bandwidth, 0) {
		return 0
	}
	b := bandwidth * period.Seconds() / framesPerLink
	if b >= math.MaxInt32 {
		return 0 // no frame is that large
	}
	return max(int(b), least)
}

// FramesPerLink is how many frames one link carries in an exchange of p
// members whose overlay gives each degree next hops: every update reaches
// every other member once, P·(P−1) sends spread over P·degree links. 0 for
// a mesh of one.
func FramesPerLink(p, degree int) float64 {
	if p < 2 || degree < 1 {
		return 0
	}
	return float64(p-1) / float64(min(degree, p-1))
}

// LinkRate estimates a link's throughput from what it carries, for a
// driver whose links are not modelled (a real mesh): the driver reports
// every message it wrote, how long the write took and whether more waited
// behind it, with the time it ended. A write with a backlog behind it ran
// at the link's pace, not the sender's, so such writes, summed over at
// least RateWindow of writing, make a sample (bytes over the time they
// took), and the estimate is the mean of the last one and the sample. A
// link that does not back up says only that it keeps up: after each
// RateWindow without a backlog the estimate grows by an eighth, so a
// budget that follows it lets the traffic grow until the link backs up
// again and is measured anew (else a budget that keeps its link below
// saturation would keep an old, low figure for ever). Writes into a socket
// buffer with room return at once: backlogged bursts shorter than the
// buffer read as fast, which errs toward no budget. It reads no clock;
// the zero value knows nothing (Rate 0).
type LinkRate struct {
	busyBytes int64
	busy      time.Duration
	rate      float64
	// lastBusy is when a write last ended with a backlog, or when the
	// estimate last grew.
	lastBusy time.Time
}

// RateWindow is how much backlogged writing makes one LinkRate sample,
// and how long a link without a backlog waits before its estimate grows.
const RateWindow = 200 * time.Millisecond

// Observe records one write of bytes that took took and ended at end,
// backlogged when more waited to be written behind it.
func (r *LinkRate) Observe(bytes int, took time.Duration, backlogged bool, end time.Time) {
	if !backlogged {
		if r.rate > 0 && end.Sub(r.lastBusy) >= RateWindow {
			r.rate *= 1.125
			r.lastBusy = end
		}
		return
	}
	r.lastBusy = end
	r.busyBytes += int64(bytes)
	r.busy += max(took, 0)
	if r.busy < RateWindow {
		return
	}
	sample := float64(r.busyBytes) / r.busy.Seconds()
	if r.rate > 0 {
		sample = (r.rate + sample) / 2
	}
	r.rate, r.busyBytes, r.busy = sample, 0, 0
}

// Rate is the estimated throughput in bytes per second, 0 when no sample
// has been taken.
func (r *LinkRate) Rate() float64 { return r.rate }
