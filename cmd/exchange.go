package cmd

import (
	"flag"
	"fmt"
	"math"

	"github.com/sketchmesh/sketchmesh/codec"
	"github.com/sketchmesh/sketchmesh/node"
	"github.com/sketchmesh/sketchmesh/testnet"
)

// defaultLocalSteps is the local steps a mesh takes when none are given.
// Measured on news20.binary and a9a over geo3 and 20 Mbit/s links (README:
// "Managed communication"), two local steps end a9a 0.4 to 0.8 point of
// accuracy below an exchange every step, past the half point a default may
// cost, and gain little time on news20; eight to sixteen are 1.8 to 3×
// faster on news20 and lose a9a several points. So they are off by default,
// and the README says where to turn them on.
const defaultLocalSteps = 1

// stepStaleness is how many optimizer steps behind a read may be by
// default: the staleness bound of 2 exchanges of one step.
const stepStaleness = 2

// defaultStaleness is the staleness bound, in exchanges, a mesh of h local
// steps takes when none is given: the largest that keeps a read about
// stepStaleness optimizer steps behind, ⌈(stepStaleness+1)/h⌉ − 1. A read
// at the start of an exchange is behind by up to (s+1)·h − 1 steps of the
// other members, and measured convergence follows that product, not s or
// h alone (a9a at s = 2 and h = 2 loses a point and a half of accuracy).
func defaultStaleness(h int) int {
	h = max(h, 1)
	return max(0, (stepStaleness+h)/h-1)
}

// stalenessHelp is the help of --staleness.
const stalenessHelp = "SSP staleness bound s in exchanges, 0 = bulk-synchronous (default: 2 with --local-steps 1, 1 with 2, 0 with 3 or more, so that a read is about 2 optimizer steps behind)"

// exchangeFlags are the local-step flags of testnet, run and simulate.
type exchangeFlags struct {
	localSteps int
	outer      string
	outerLR    float64
	budget     int
	priority   string
}

func (f *exchangeFlags) register(fs *flag.FlagSet, suffix string) {
	fs.IntVar(&f.localSteps, "local-steps", defaultLocalSteps, fmt.Sprintf("optimizer steps each node takes on its own data between two exchanges, 1 to %d; --iterations counts optimizer steps, the staleness bound exchanges", node.MaxLocalSteps)+suffix)
	fs.StringVar(&f.outer, "outer", "sgd", "outer step applied to the change of an exchange's local steps: sgd, or nesterov (momentum 0.9)"+suffix)
	fs.Float64Var(&f.outerLR, "outer-lr", 1, "outer step's rate (> 0): 1 with sgd sends the local steps' change as it is"+suffix)
	fs.IntVar(&f.budget, "budget", 0, "bytes one update's frame may take (0 = no bound); a larger update sends the keys of highest --priority that fit and keeps the rest in the error feedback residual")
	fs.StringVar(&f.priority, "priority", string(node.PriorityAbsolute), "which keys an update cut to --budget sends: absolute (largest |change|), relative (largest |change|/|weight|) or off (lowest keys)")
}

// staleness is the staleness bound a run takes: the one given, else the
// default for its local steps.
func (f *exchangeFlags) staleness(given int, explicit bool) int {
	if explicit {
		return given
	}
	return defaultStaleness(f.localSteps)
}

func (f *exchangeFlags) check() error {
	switch {
	case f.localSteps < 1 || f.localSteps > node.MaxLocalSteps:
		return badInput("--local-steps %d: want 1 to %d", f.localSteps, node.MaxLocalSteps)
	case !(f.outerLR > 0) || math.IsInf(f.outerLR, 0):
		return badInput("--outer-lr %v: want a finite rate > 0", f.outerLR)
	}
	if err := oneOf("outer", f.outer, string(node.OuterSGD), string(node.OuterNesterov)); err != nil {
		return err
	}
	return oneOf("priority", f.priority, string(node.PriorityOff), string(node.PriorityAbsolute), string(node.PriorityRelative))
}

// checkBudget checks --budget against the codec's smallest frame and the
// error feedback that keeps what a budget cuts.
func (f *exchangeFlags) checkBudget(codecName string, errorFeedback bool) error {
	if f.budget == 0 {
		return nil
	}
	c, err := codec.ByName(codecName)
	if err != nil {
		return usageError{err}
	}
	least, err := node.MinBudgetBytes(c)
	if err != nil {
		return err
	}
	switch {
	case f.budget < least:
		return badInput("--budget %d: want 0 (no bound) or at least one frame (%d bytes with --codec %s)", f.budget, least, codecName)
	case !errorFeedback:
		return badInput("--budget %d: what a budget cuts is kept in the error feedback residual; drop --error-feedback=false", f.budget)
	}
	return nil
}

func (f *exchangeFlags) exchange() testnet.Exchange {
	return testnet.Exchange{LocalSteps: f.localSteps, Outer: node.OuterKind(f.outer), OuterRate: f.outerLR,
		BudgetBytes: f.budget, Priority: node.PriorityMode(f.priority)}
}

// describe names the exchange settings for a run's banner.
func (f *exchangeFlags) describe() string {
	if f.localSteps == 1 {
		return "an exchange every step"
	}
	return fmt.Sprintf("%d local steps per exchange, outer %s at %g", f.localSteps, f.outer, f.outerLR)
}
