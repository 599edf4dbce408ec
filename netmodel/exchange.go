package netmodel

import "github.com/sketchmesh/sketchmesh/node"

// Exchange is how often and how a run's nodes exchange: the local-step
// settings of node.Config. The zero value is one exchange per optimizer
// step.
type Exchange struct {
	// LocalSteps is H, the optimizer steps between exchanges (0 means 1).
	LocalSteps int
	// Outer and OuterRate are the outer step and its rate (sgd and 1 when
	// zero).
	Outer     node.OuterKind
	OuterRate float64
	// BudgetBytes and Priority cut updates (node.Config.BudgetBytes).
	BudgetBytes int
	Priority    node.PriorityMode
}

// Apply sets the exchange settings of a node's configuration.
func (e Exchange) Apply(c *node.Config) {
	c.LocalSteps, c.Outer, c.OuterRate = e.LocalSteps, e.Outer, e.OuterRate
	c.BudgetBytes, c.Priority = e.BudgetBytes, e.Priority
}
