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
		return &adam{lr: lr, m: make([]float64, numParams), v: make([]float64, numParams)}, nil
	}
	return nil, fmt.Errorf("%w: unknown optimizer %q (known: sgd, adam)", ErrConfig, kind)
}

type sgd struct{ lr float64 }

func (o *sgd) Kind() OptimizerKind { return SGD }
func (o *sgd) Rate() float64       { return o.lr }

func (o *sgd) Update(g Gradient, scale float64) []float64 {
	out := make([]float64, len(g.Values))
	for i, v := range g.Values {
		out[i] = -o.lr * scale * v
	}
	return out
}

// adam keeps dense moment estimates but touches only the keys of each
// gradient ("lazy" Adam), the usual form for sparse data: a coordinate's
// moments decay only when it is updated.
type adam struct {
	lr    float64
	m, v  []float64
	steps int
}

func (o *adam) Kind() OptimizerKind { return Adam }
func (o *adam) Rate() float64       { return o.lr }

func (o *adam) Update(g Gradient, scale float64) []float64 {
	o.steps++
	c1 := 1 - math.Pow(AdamBeta1, float64(o.steps))
	c2 := 1 - math.Pow(AdamBeta2, float64(o.steps))
	out := make([]float64, len(g.Values))
	for i, k := range g.Keys {
		gv := g.Values[i]
		m := AdamBeta1*o.m[k] + (1-AdamBeta1)*gv
		v := AdamBeta2*o.v[k] + (1-AdamBeta2)*gv*gv
		o.m[k], o.v[k] = m, v
		out[i] = -o.lr * scale * (m / c1) / (math.Sqrt(v/c2) + AdamEpsilon)
	}
	return out
}
