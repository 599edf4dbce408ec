package node

// Choosing the local steps.
//
// With an exchange every step, a step costs its compute plus the wait for
// the round (the slowest member's update crossing the overlay): on a WAN
// the round is tens to hundreds of times the compute, and nodes spend most
// of their time at the gate. H local steps pay one round for H steps. The
// fewest steps whose compute covers the round, ⌈round / step⌉, bring the
// wait to at most half of the time; more would shave the rest at the cost
// of accuracy (each member's steps go unseen by the others for longer).
// So AutoLocalSteps takes that count, bounded: by MaxAutoLocalSteps, past
// which measured accuracy fell (README, "Managed communication"), and so
// that a run keeps at least MinAutoExchanges exchanges. On a LAN or
// loopback the round is below one step and the answer is 1: the training
// of before, bit for bit.
//
// The decision is one number the whole mesh must share, since the clock
// counts exchanges and the staleness bound is in exchanges: the driver
// takes it once, before the mesh trains (the testnet and the simulator
// from their link profile and the compute of a step; run, whose links are
// not measured before it trains, takes 1), and a joiner takes it with the
// other mesh settings.

// MaxAutoLocalSteps bounds AutoLocalSteps. The default staleness bound
// with local steps is 1, which hides one round behind the next exchange's
// steps: at 8 nodes and 100 steps over geo3 (simulator), news20.binary's
// test loss ended at 0.3012 with 6 steps and 0.3019 with 8, where an
// exchange every step ends at 0.2986 and the target counted as reaching it
// is 1.01 × that, 0.3016; a9a held to 16. (At s = 0, 8 steps ended
// news20.binary at 0.3007; s = 1 with 6 steps took 2.00 simulated seconds
// where s = 0 with 8 took 2.91.)
const MaxAutoLocalSteps = 6

// MinAutoExchanges is the fewest exchanges AutoLocalSteps leaves a run:
// with fewer, the members' models are averaged too seldom for the last
// average to be near where a shared model would be.
const MinAutoExchanges = 6

// AutoLocalSteps returns the local steps for a mesh whose round (the wait
// for an exchange, in any unit) and step (the compute of one optimizer
// step, in the same unit) were measured by the driver, for a run of
// iterations optimizer steps: ⌈round / step⌉, at least 1, at most
// MaxAutoLocalSteps and at most iterations / MinAutoExchanges. A step of 0
// counts as 1 unit. It is a pure function of its inputs, so every driver
// that feeds it the same figures gets the same H.
func AutoLocalSteps(round, step, iterations uint64) int {
	step = max(step, 1)
	h := round / step
	if round%step != 0 {
		h++
	}
	h = min(h, MaxAutoLocalSteps, iterations/MinAutoExchanges)
	return int(max(h, 1))
}
