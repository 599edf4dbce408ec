package node

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/sketchmesh/sketchmesh/codec"
	"github.com/sketchmesh/sketchmesh/dataset"
)

// Local steps and the outer step.
//
// With LocalSteps H > 1 a node takes H optimizer steps on its own data
// between two exchanges, as DiLoCo's workers do: the first step of an
// exchange copies the view (the gate is passed there, once per exchange),
// the next ones read that copy plus the node's own changes since, so that
// what arrives meanwhile waits for the next exchange, and the result does
// not depend on arrival order. At the H-th step (or the run's last) the
// accumulated change Δ, over the union of the keys the steps touched, goes
// through the outer step and error feedback into one additive update with
// the next clock. Iterations keeps counting optimizer steps, so runs with
// different H process the same samples; the clock, the vector clock and the
// staleness bound count exchanges. Under a bound s ≥ 1 an exchange may start
// while rows are in flight; its copy then takes the node's own update as a
// stand-in for each missing one (standInForMissing), so the round is hidden
// behind the next exchange's steps without the copy falling back.
//
// Inner steps are whole steps on the node's copy (scale 1), and the
// exchange sends the node's share (1/k) of their sum: a row of k updates
// moves the model to the mean of the members' copies, as DiLoCo's workers
// average theirs. (Inner steps of a 1/k share each, the first form, read a
// copy that hardly moved, so H steps took H gradients at about one point:
// a step H times too long on stale gradients, which cost a9a 0.4–0.8 point
// at H = 2 and 20 points at H = 32.) The outer step scales Δ by OuterRate
// (sgd), adds Nesterov momentum (μ = 0.9, DiLoCo's), or scales each key by
// a rate the committed rows set (adaptive, outerrate.go). The first two
// are linear in Δ, so applying them per member to its own Δ equals
// applying them to the row's sum; the third's rates are alike at members
// that committed the same rows: members never need to combine their
// changes before the outer step. Momentum is lazy, kept per key and
// applied only to the keys an exchange carries, for the reason error
// feedback's residual is: decaying it on every key would make every update
// dense. H = 1 with sgd at rate 1 is exactly one update per step.

// OuterKind names the outer step.
type OuterKind string

// The outer steps.
const (
	OuterSGD      OuterKind = "sgd"
	OuterNesterov OuterKind = "nesterov"
	OuterAdaptive OuterKind = "adaptive"
)

// OuterKinds lists the outer steps, in the order help texts give them.
var OuterKinds = []OuterKind{OuterAdaptive, OuterSGD, OuterNesterov}

// OuterNames lists OuterKinds as strings, for flag checks and messages.
func OuterNames() []string {
	names := make([]string, len(OuterKinds))
	for i, k := range OuterKinds {
		names[i] = string(k)
	}
	return names
}

// MaxLocalSteps bounds LocalSteps: beyond it a node would go minutes
// without exchanging anything, which no setting of this mesh wants.
const MaxLocalSteps = 1 << 12

// outerMomentum is the Nesterov outer step's momentum (DiLoCo's).
const outerMomentum = 0.9

// ErrLocalSteps is returned by New for local-step settings it cannot honour.
var ErrLocalSteps = errors.New("bad local-step settings")

// localPhase is the state of the exchange in progress.
type localPhase struct {
	h    int
	rate float64
	// steps counts the optimizer steps taken, all exchanges together;
	// inner those of the exchange in progress.
	steps uint64
	inner int
	// model is the view at the exchange's start plus the node's own inner
	// steps; acc their sum per key, over the keys in touched (marked).
	model    []float64
	acc      []float64
	touched  []uint64
	marked   []bool
	momentum []float64
	// rates is the adaptive outer step's state (outerrate.go).
	rates *keyRates
}

// checkLocalSteps validates and fills the local-step settings of cfg.
func checkLocalSteps(cfg *Config) error {
	if err := checkLocalSettings(cfg.LocalSteps, cfg.Outer, cfg.OuterRate); err != nil {
		return err
	}
	if cfg.LocalSteps == 0 {
		cfg.LocalSteps = 1
	}
	if cfg.OuterRate == 0 {
		cfg.OuterRate = 1
	}
	if cfg.Outer == "" {
		cfg.Outer = OuterSGD
	}
	return nil
}

// initLocal sets up the phase state once the node's clock is known.
func (n *Node) initLocal() {
	lp := &n.local
	lp.h, lp.rate = n.cfg.LocalSteps, n.cfg.OuterRate
	lp.steps = n.clock * uint64(lp.h)
	if n.clock != 0 && lp.steps/uint64(lp.h) != n.clock {
		lp.steps = math.MaxUint64
	}
	size := n.cfg.Model.NumParams()
	if lp.h > 1 {
		lp.model = make([]float64, size)
		lp.acc = make([]float64, size)
		lp.marked = make([]bool, size)
	}
	switch {
	case n.cfg.Outer == OuterNesterov:
		lp.momentum = make([]float64, size)
	case n.cfg.Outer == OuterAdaptive && lp.h > 1:
		lp.rates = newKeyRates(size)
	}
}

// lastClock is the clock of the node's last exchange: Iterations steps
// in exchanges of H.
func (n *Node) lastClock() uint64 {
	h := uint64(max(n.local.h, 1))
	last := n.cfg.Iterations / h
	if n.cfg.Iterations%h != 0 {
		last++
	}
	return last
}

// Steps returns the number of optimizer steps the node has taken; Clock
// counts its exchanges.
func (n *Node) Steps() uint64 { return n.local.steps }

// LocalSteps returns H, the optimizer steps of one exchange.
func (n *Node) LocalSteps() int { return max(n.local.h, 1) }

// midExchange reports whether the node has taken some of an exchange's
// local steps and not yet sent it: the gate was passed at its first step.
func (n *Node) midExchange() bool { return n.local.inner > 0 }

// MidExchange reports whether the node's next step is one of an exchange's
// later local steps: it reads the copy the exchange's first step took, and
// passes no gate, so the staleness bound holds at exchange starts only.
func (n *Node) MidExchange() bool { return n.midExchange() }

// localStep takes one optimizer step of an exchange with H > 1, and at its
// last step makes the exchange's update.
func (n *Node) localStep() error {
	lp := &n.local
	if lp.inner == 0 {
		n.observeStaleness()
		copy(lp.model, n.view())
		n.standInForMissing(lp.model)
	}
	batch, err := n.nextBatch()
	if err != nil {
		return fmt.Errorf("node %s: mini-batch %d: %w", n.cfg.ID, lp.steps+1, err)
	}
	g, loss := n.cfg.Model.Gradient(lp.model, batch, n.scratch)
	delta := n.cfg.Optimizer.Update(g, 1)
	for i, k := range g.Keys {
		lp.model[k] += delta[i]
		lp.acc[k] += delta[i]
		if !lp.marked[k] {
			lp.marked[k] = true
			lp.touched = append(lp.touched, k)
		}
	}
	lp.inner++
	lp.steps++
	n.stats.LastLoss = loss
	if lp.inner < lp.h && lp.steps < n.cfg.Iterations {
		return nil
	}
	slices.Sort(lp.touched)
	keys := slices.Clone(lp.touched)
	change := make([]float64, len(keys))
	share := n.stepScale()
	for i, k := range keys {
		change[i] = share * lp.acc[k]
		lp.acc[k], lp.marked[k] = 0, false
	}
	lp.touched, lp.inner = lp.touched[:0], 0
	return n.exchange(nil, nil, n.withResidual(keys, n.outerStep(keys, change)))
}

// standInForMissing adds to model, for each clock up to the node's own
// whose row still lacks updates of live members (possible only under a
// staleness bound s ≥ 1), the node's own update of that clock once per
// missing member: its change stands in for theirs until they land, as the
// eager updates of overlapped DiLoCo do. Without it a copy taken while a
// row is in flight held the node's own last H steps at their 1/k share and
// the others' not at all, and fell back by most of an exchange: in the
// simulator (8 nodes, geo3, H = 8, s = 1) a9a ended at 82.51 % against
// 85.04 % at s = 0, and with it at 85.01 %. (The others' latest updates as
// stand-ins, or the own update on their keys only, did worse on both a9a
// and news20.binary.) The stand-in enters only the node's copy, never the
// view or what it sends (the exchange's change is the sum of its steps),
// and the next copy holds the members' own updates once they are in. At
// s = 0 every row is complete when an exchange starts and it adds nothing.
// Its cost is the own update's keys, once per incomplete clock.
func (n *Node) standInForMissing(model []float64) {
	for c := n.committedClock + 1; c <= n.clock; c++ {
		own, held := n.pendingOf(c, n.cfg.ID)
		if !held {
			continue
		}
		present := 0
		for q := range n.pendingRow(c) {
			if n.live.at(q) == liveUp {
				present++
			}
		}
		missing := len(n.liveList) - present
		if missing <= 0 {
			continue
		}
		scale := float64(missing)
		if own.Dense() {
			for k, v := range own.Values {
				model[k] += scale * float64(v)
			}
			continue
		}
		for i, k := range own.Keys {
			model[k] += scale * float64(own.Values[i])
		}
	}
}

// pendingOf returns origin's pending update of clock c.
func (n *Node) pendingOf(c uint64, origin string) (codec.Sparse, bool) {
	row, q := n.pending[c], n.vc.slot(origin)
	if q < 0 || q >= len(row) || row[q] == nil {
		return codec.Sparse{}, false
	}
	return *row[q], true
}

// outerStep turns the accumulated change at keys into the update's change,
// in place: η·Δ for sgd (Δ itself at rate 1, bit for bit), η·(Δ + μ·m) with
// m ← μ·m + Δ for Nesterov, η·r_k·Δ_k for the adaptive step (outerrate.go).
func (n *Node) outerStep(keys []uint64, change []float64) []float64 {
	lp := &n.local
	if lp.rates != nil {
		lp.rates.scale(keys, change)
	}
	if lp.momentum != nil {
		for i, k := range keys {
			m := outerMomentum*lp.momentum[k] + change[i]
			lp.momentum[k] = m
			change[i] += outerMomentum * m
		}
	}
	if lp.rate != 1 {
		for i := range change {
			change[i] *= lp.rate
		}
	}
	return change
}

// exchange encodes intended as the update of the next clock, applies what
// its receivers will decode and queues it for its next hops; view and batch
// are the step's, for sufficient factors (nil with local steps).
func (n *Node) exchange(view []float64, batch []dataset.Row, intended codec.Sparse) error {
	t := n.clock + 1
	frame, err := n.encode(view, batch, intended)
	if err != nil {
		return fmt.Errorf("node %s: encode update %d: %w", n.cfg.ID, t, err)
	}
	sent, frame, err := n.fitBudget(intended, frame)
	if err != nil {
		return fmt.Errorf("node %s: cut update %d to the budget: %w", n.cfg.ID, t, err)
	}
	decoded, reason := n.decode(frame, -1, t)
	if reason != "" {
		return fmt.Errorf("node %s: own update %d does not decode (%s)", n.cfg.ID, t, reason)
	}
	if n.residual != nil {
		for i, k := range intended.Keys {
			*n.residual.At(k) = float64(intended.Values[i])
		}
		for i, k := range decoded.Keys {
			*n.residual.At(k) -= float64(decoded.Values[i])
		}
	}
	n.clock = t
	n.stats.FrameBytes += uint64(len(frame))
	n.stats.PairsEncoded += uint64(len(sent.Values))
	n.add(n.cfg.ID, t, decoded)
	if err := n.sendOwn(t, frame, *decoded); err != nil {
		return err
	}
	n.commit()
	return nil
}

// CheckLocalSteps checks local-step settings as New does, for a driver
// that wants to refuse them before it builds any node.
func CheckLocalSteps(steps int, outer OuterKind, rate float64) error {
	return checkLocalSettings(steps, outer, rate)
}
