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
