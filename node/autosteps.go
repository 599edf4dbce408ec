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
// steps. With one outer rate for every key (sgd at 1), more than 6 steps
// cost news20.binary its target loss (8 nodes, 100 steps over geo3: 0.3019
// with 8 steps against a target of 0.3016, 1.01 × the loss of an exchange
// every step), while a9a held to 16. The adaptive outer step (the
// default, outerrate.go) makes up for the drift: over the testnet's geo3
// links news20.binary reaches its target at step 62–72 of 100 with 6 to 10
// steps, at a final loss of 0.244–0.251, and a9a keeps its accuracy (84.9–85.0 % against
// 85.0 %) up to 10 steps, where a9a's time to its target keeps falling
// with more steps (0.54–0.80 s with 6, 0.42–0.53 s with 8, 0.39–0.40 s
// with 10) and news20.binary's stops at 8 (0.84–0.96 s, 0.84–0.92 s,
// 0.80–0.86 s). So 8, the fewer of the two that serve both sets.
const MaxAutoLocalSteps = 8

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
