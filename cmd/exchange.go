package cmd

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"time"

	"github.com/sketchmesh/sketchmesh/codec"
	"github.com/sketchmesh/sketchmesh/netmodel"
	"github.com/sketchmesh/sketchmesh/node"
)

// autoSetting is the default of --local-steps and --budget: the driver decides.
// The mesh takes the local steps node.AutoLocalSteps picks for the run's
// length, whatever its links (see resolveAuto): node.MaxAutoLocalSteps,
// fewer in a short run; a node takes the budget node.AutoBudget picks from
// its links (see resolveBudget).
const autoSetting = "auto"

// stepStaleness is how many optimizer steps behind a read may be by
// default: the staleness bound of 2 exchanges of one step.
const stepStaleness = 2

// defaultStaleness is the staleness bound, in exchanges, a mesh of h local
// steps takes when none is given: 2 with one step (a read about
// stepStaleness optimizer steps behind), and 1 with more. A read at the
// start of an exchange misses up to s exchanges of the other members, for
// which the node's copy takes its own update as a stand-in (node,
// standInForMissing): with it, s = 1 hides a round behind the next
// exchange's steps at the accuracy of s = 0 (simulator, 8 nodes, geo3,
// h = 8: a9a 85.01 % against 85.04 %; without the stand-in 82.51 %). s = 2
// hides a second round but took news20.binary past the target loss (h = 6
// over 50 ms links: 1.0117 × the loss of an exchange every step, against
// 1.0077 × at s = 1).
func defaultStaleness(h int) int {
	if h <= 1 {
		return stepStaleness
	}
	return 1
}

// stalenessHelp is the help of --staleness.
const stalenessHelp = "SSP staleness bound s in exchanges, 0 = bulk-synchronous (default: 2 with --local-steps 1, 1 with more, where an exchange that starts with rows in flight stands the node's own update in for the missing ones)"

// exchangeFlags are the local-step flags of testnet, run and simulate.
type exchangeFlags struct {
	// localSteps is the H a run takes: the one given, or once resolveAuto
	// ran, the one it picked; auto records that none was given.
	localSteps int
	auto       bool
	outer      string
	outerLR    float64
	// budget is the frame budget a run takes: the one given, or once
	// resolveBudget ran, the one it picked; budgetAuto records that none
	// was given, budgetMeasured that it follows the links' measured
	// throughput (--budget measured, and run's auto).
	budget         int
	budgetAuto     bool
	budgetMeasured bool
	priority       string
}

// budgetMeasuredSetting is the --budget that follows the throughput each
// node measures on its links (mesh.DaemonConfig.BudgetFromLinks).
const budgetMeasuredSetting = "measured"

// budgetValue is --budget: auto, measured or a byte count.
type budgetValue struct{ f *exchangeFlags }

func (v budgetValue) String() string {
	switch {
	case v.f == nil || v.f.budgetAuto:
		return autoSetting
	case v.f.budgetMeasured:
		return budgetMeasuredSetting
	}
	return strconv.Itoa(v.f.budget)
}

func (v budgetValue) Set(s string) error {
	v.f.budgetMeasured = s == budgetMeasuredSetting
	if v.f.budgetMeasured {
		v.f.budget, v.f.budgetAuto = 0, false
		return nil
	}
	return autoCount{&v.f.budget, &v.f.budgetAuto, 0, "want auto, measured, 0 (no bound) or a byte count"}.Set(s)
}

func (f *exchangeFlags) register(fs *flag.FlagSet, suffix string) {
	f.localSteps, f.auto = 1, true
	fs.Var(autoCount{&f.localSteps, &f.auto, 1, fmt.Sprintf("want auto or a count of steps, 1 to %d", node.MaxLocalSteps)}, "local-steps", fmt.Sprintf("optimizer steps each node takes on its own data between two exchanges, 1 to %d, or auto: %d, fewer so that a run keeps %d exchanges, and 1 with sufficient factors (a joiner takes the mesh's); --iterations counts optimizer steps, the staleness bound exchanges", node.MaxLocalSteps, node.MaxAutoLocalSteps, node.MinAutoExchanges)+suffix)
	fs.StringVar(&f.outer, "outer", string(node.OuterAdaptive), "outer step applied to the change of an exchange's local steps (none with one step): adaptive (a key's rate rises from 1 to 2 while the mesh's combined change of the key keeps its sign, and is back to 1 when it flips), sgd (one rate for every key) or nesterov (momentum 0.9)"+suffix)
	fs.Float64Var(&f.outerLR, "outer-lr", 1, "outer step's rate (> 0), a factor on the adaptive step's rates: 1 with sgd sends the local steps' change as it is"+suffix)
	f.budgetAuto = true
	fs.Var(budgetValue{f}, "budget", "bytes one update's frame may take, 0 for no bound, auto or measured; auto: what the slowest modelled link carries in an exchange's period, shared by the frames it carries (no bound on unshaped links), and in run, whose links are not modelled, measured; measured: the same from the throughput each node measures on the links to its next hops once they back up, none before (testnet and run); a larger update sends the keys of highest --priority that fit and keeps the rest in the error feedback residual")
	fs.StringVar(&f.priority, "priority", string(node.PriorityAbsolute), "which keys an update cut to --budget sends: absolute (largest |change|), relative (largest |change|/|weight|) or off (lowest keys)")
}

// resolveBudget picks the budget of --budget auto for a mesh of nodes on
// links of profile p whose exchanges are period apart, with the overlay
// topology: node.AutoBudget over the slowest link, no bound on unshaped
// links and wherever a budget cannot apply (sufficient factors, no error
// feedback, a codec with no frame bound). It changes nothing when --budget
// was given.
func (f *exchangeFlags) resolveBudget(p netmodel.LinkProfile, period time.Duration, nodes int, topology, codecName string, errorFeedback, factors bool) {
	if !f.budgetAuto {
		return
	}
	f.budget = 0
	if !p.Emulated() || factors || !errorFeedback {
		return
	}
	least, err := leastBudget(codecName)
	if err != nil {
		return
	}
	slowest := p.MinBandwidth()
	degree := bits.Len(uint(max(nodes-1, 1))) // ⌈log2 P⌉ next hops on the halton overlay
	if topology == "full" {
		degree = nodes - 1
	}
	f.budget = node.AutoBudget(slowest, period, node.FramesPerLink(nodes, degree), least)
}

// exchangePeriod is how far apart a mesh's exchanges are at best: the
// round they wait for, or their local steps' compute when that is longer.
func exchangePeriod(round, step time.Duration, localSteps int) time.Duration {
	return max(round, time.Duration(localSteps)*max(step, 0))
}

// staleness is the staleness bound a run takes: the one given, else the
// default for its local steps.
func (f *exchangeFlags) staleness(given int, explicit bool) int {
	if explicit {
		return given
	}
	return defaultStaleness(f.localSteps)
}

// autoCount is a flag that takes auto or a count: the count goes to
// *value, and *auto records whether auto was given (*value is then
// whenAuto until the driver resolves it). want is what a bad value is told.
type autoCount struct {
	value    *int
	auto     *bool
	whenAuto int
	want     string
}

func (v autoCount) String() string {
	if v.auto == nil || *v.auto {
		return autoSetting
	}
	return strconv.Itoa(*v.value)
}

func (v autoCount) Set(s string) error {
	if s == autoSetting {
		*v.value, *v.auto = v.whenAuto, true
		return nil
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return errors.New(v.want)
	}
	*v.value, *v.auto = n, false
	return nil
}

// resolveAuto picks the local steps of --local-steps auto for a run of
// iterations optimizer steps (0: no end): node.AutoLocalSteps, and 1 with
// sufficient factors, which need one step. It changes nothing when
// --local-steps was given.
func (f *exchangeFlags) resolveAuto(iterations uint64, factors bool) {
	if !f.auto {
		return
	}
	f.localSteps = 1
	if !factors {
		f.localSteps = node.AutoLocalSteps(iterations)
	}
}

// linkRound is the round an exchange waits for on links of profile p: an
// update crosses up to two hops of the overlay, each at most the profile's
// longest one-way latency. 0 on unshaped links.
func linkRound(p netmodel.LinkProfile) time.Duration {
	var longest time.Duration
	for _, row := range p.Latency {
		for _, l := range row {
			longest = max(longest, l)
		}
	}
	return 2 * longest
}

func (f *exchangeFlags) check() error {
	switch {
	case f.localSteps < 1 || f.localSteps > node.MaxLocalSteps:
		return badInput("--local-steps %d: want 1 to %d", f.localSteps, node.MaxLocalSteps)
	case !(f.outerLR > 0) || math.IsInf(f.outerLR, 0):
		return badInput("--outer-lr %v: want a finite rate > 0", f.outerLR)
	}
	if err := oneOf("outer", f.outer, node.OuterNames()...); err != nil {
		return err
	}
	return oneOf("priority", f.priority, string(node.PriorityOff), string(node.PriorityAbsolute), string(node.PriorityRelative))
}

// leastBudget is the smallest budget the codec named can honour: one of
// its frames (node.MinBudgetBytes).
func leastBudget(codecName string) (int, error) {
	c, err := codec.ByName(codecName)
	if err != nil {
		return 0, usageError{err}
	}
	return node.MinBudgetBytes(c)
}

// checkBudget checks --budget against the codec's smallest frame and the
// error feedback that keeps what a budget cuts.
func (f *exchangeFlags) checkBudget(codecName string, errorFeedback bool) error {
	if f.budgetMeasured && !errorFeedback {
		return badInput("--budget measured: what a budget cuts is kept in the error feedback residual; drop --error-feedback=false")
	}
	if f.budget == 0 {
		return nil
	}
	least, err := leastBudget(codecName)
	if err != nil {
		return err
	}
	switch {
	case f.budget < least:
		return badInput("--budget %d: want auto, measured, 0 (no bound) or at least one frame (%d bytes with --codec %s)", f.budget, least, codecName)
	case !errorFeedback:
		return badInput("--budget %d: what a budget cuts is kept in the error feedback residual; drop --error-feedback=false", f.budget)
	}
	return nil
}

func (f *exchangeFlags) exchange() netmodel.Exchange {
	return netmodel.Exchange{LocalSteps: f.localSteps, Outer: node.OuterKind(f.outer), OuterRate: f.outerLR,
		BudgetBytes: f.budget, Priority: node.PriorityMode(f.priority)}
}

// describe names the exchange settings for a run's banner.
func (f *exchangeFlags) describe() string {
	picked := ""
	if f.auto {
		picked = " (auto)"
	}
	steps := "an exchange every step" + picked
	if f.localSteps > 1 {
		steps = fmt.Sprintf("%d local steps per exchange%s, outer %s at %g", f.localSteps, picked, f.outer, f.outerLR)
	}
	if f.budgetMeasured {
		return fmt.Sprintf("%s, frames cut to what the links are measured to carry by %s priority", steps, f.priority)
	}
	if f.budget == 0 {
		return steps
	}
	picked = ""
	if f.budgetAuto {
		picked = " (auto)"
	}
	return fmt.Sprintf("%s, frames of at most %d bytes%s by %s priority", steps, f.budget, picked, f.priority)
}
