package model

import (
	"fmt"
	"math"
)

// OptimizerKind names an optimizer.
type OptimizerKind string

// The optimizers sketchmesh offers.
const (
	SGD  OptimizerKind = "sgd"
	Adam OptimizerKind = "adam"
)

// OptimizerKinds lists the optimizer names a user may select.
func OptimizerKinds() []OptimizerKind { return []OptimizerKind{SGD, Adam} }

// Adam's constants, as in Kingma and Ba.
const (
	AdamBeta1   = 0.9
	AdamBeta2   = 0.999
	AdamEpsilon = 1e-8
)

// Optimizer turns a gradient into an additive update. Each node owns its
// optimizer state; what travels is the update, never the state.
type Optimizer interface {
	// Update returns the change to make to the view for gradient g, as
	// values aligned with g.Keys, scaled by scale (the node's share of the
	// mesh-wide step).
	Update(g Gradient, scale float64) []float64
	// Kind names the optimizer.
	Kind() OptimizerKind
	// Rate is the learning rate.
	Rate() float64
	// State returns a copy of the optimizer's state, and Restore puts one
	// back: a node that resumes from a checkpoint keeps its step count and
	// moments rather than restarting them.
	State() OptimizerState
	Restore(OptimizerState) error
}

// OptimizerState is what an optimizer carries from one step to the next.
// SGD has none; Adam has its step count and its two moment vectors.
type OptimizerState struct {
	Kind  OptimizerKind
	Steps uint64
	M, V  []float64
}

// NewOptimizer returns an optimizer for a model with numParams parameters.
func NewOptimizer(kind OptimizerKind, lr float64, numParams int) (Optimizer, error) {
	if !(lr > 0) || math.IsInf(lr, 0) {
		return nil, fmt.Errorf("%w: learning rate must be a finite value > 0, got %v", ErrConfig, lr)
	}
	switch kind {
	case SGD:
		return &sgd{lr: lr}, nil
	case Adam:
		return &adam{lr: lr, n: numParams, m: newPagedVec(numParams), v: newPagedVec(numParams)}, nil
	}
	return nil, fmt.Errorf("%w: unknown optimizer %q (known: sgd, adam)", ErrConfig, kind)
}

type sgd struct{ lr float64 }

func (o *sgd) Kind() OptimizerKind { return SGD }
func (o *sgd) Rate() float64       { return o.lr }

func (o *sgd) State() OptimizerState { return OptimizerState{Kind: SGD} }

func (o *sgd) Restore(s OptimizerState) error {
	if s.Kind != SGD {
		return fmt.Errorf("%w: cannot restore %q state into sgd", ErrConfig, s.Kind)
	}
	return nil
}

func (o *sgd) Update(g Gradient, scale float64) []float64 {
	out := make([]float64, len(g.Values))
	for i, v := range g.Values {
		out[i] = -o.lr * scale * v
	}
	return out
}

// adam touches only the keys of each gradient ("lazy" Adam), the usual
// form for sparse data: a coordinate's moments decay only when it is
// updated. The moments of n parameters are paged: untouched keys cost
// nothing.
type adam struct {
	lr    float64
	n     int
	m, v  PagedVec
	steps int
}

func (o *adam) Kind() OptimizerKind { return Adam }
func (o *adam) Rate() float64       { return o.lr }

func (o *adam) State() OptimizerState {
	return OptimizerState{Kind: Adam, Steps: uint64(o.steps), M: o.m.dense(o.n), V: o.v.dense(o.n)}
}

func (o *adam) Restore(s OptimizerState) error {
	switch {
	case s.Kind != Adam:
		return fmt.Errorf("%w: cannot restore %q state into adam", ErrConfig, s.Kind)
	case len(s.M) != o.n || len(s.V) != o.n:
		return fmt.Errorf("%w: adam state has %d and %d moments, the model has %d parameters", ErrConfig, len(s.M), len(s.V), o.n)
	}
	for _, v := range s.V {
		if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("%w: adam second moment %v is not a finite value >= 0", ErrConfig, v)
		}
	}
	o.steps = int(s.Steps)
	o.m.load(s.M)
	o.v.load(s.V)
	return nil
}

func (o *adam) Update(g Gradient, scale float64) []float64 {
	o.steps++
	c1 := 1 - math.Pow(AdamBeta1, float64(o.steps))
	c2 := 1 - math.Pow(AdamBeta2, float64(o.steps))
	out := make([]float64, len(g.Values))
	for i, k := range g.Keys {
		gv := g.Values[i]
		pm, pv := o.m.At(k), o.v.At(k)
		m := AdamBeta1**pm + (1-AdamBeta1)*gv
		v := AdamBeta2**pv + (1-AdamBeta2)*gv*gv
		*pm, *pv = m, v
		out[i] = -o.lr * scale * (m / c1) / (math.Sqrt(v/c2) + AdamEpsilon)
	}
	return out
}
