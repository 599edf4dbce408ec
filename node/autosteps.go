package node

// Choosing the local steps.
//
// H local steps cut what an exchange costs per optimizer step by H, and
// an exchange costs more than its wait for the round. Each node decodes
// and applies every other member's update of every exchange, P − 1 of
// them: at P = 8 on news20.binary that is more compute than the node's own
// step, on loopback as over a WAN. And with local steps the adaptive outer
// step (outerrate.go) lowers the loss a step reaches. So H is no longer
// taken from the links: on loopback, where the round is nothing, an
// exchange every step was slower than raw frames on five sets of nine and
// missed the target loss on three, while H = 8 reached it 1.8 to 4.0 times
// sooner than raw and ended at a lower loss on all but a9a, which kept its
// accuracy within 0.1 point (README, "Local steps by default, on any
// links"). Over a WAN H also pays one round per H steps, as it always did.
//
// So AutoLocalSteps is MaxAutoLocalSteps, bounded so that a run keeps at
// least MinAutoExchanges exchanges. It needs no measurement, so run, whose
// links are not measured before it trains, takes it as the testnet and
// the simulator do. It is one number the whole mesh shares, since the
// clock counts exchanges and the staleness bound is in exchanges: the
// founder of a mesh takes it, and a joiner takes it with the other mesh
// settings.

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

// AutoLocalSteps returns the local steps of a run of iterations optimizer
// steps (0: a run with no end): MaxAutoLocalSteps, at most iterations /
// MinAutoExchanges, at least 1.
func AutoLocalSteps(iterations uint64) int {
	h := uint64(MaxAutoLocalSteps)
	if iterations > 0 {
		h = min(h, iterations/MinAutoExchanges)
	}
	return int(max(h, 1))
}
