package node

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/sketchmesh/sketchmesh/codec"
	"github.com/sketchmesh/sketchmesh/dataset"
	"github.com/sketchmesh/sketchmesh/model"
)

// SettingError is a training setting no mesh can train with: the
// setting's name (a Setting* constant, which is also its flag's name), its
// value as the user wrote it and why it is refused. The command line
// prints its Detail after two dashes, "--lr -1: want ...", so that every
// command refuses the same value with the same line. Value is empty when
// Reason names the value itself.
type SettingError struct {
	Setting string
	Value   string
	Reason  string
	// Rule is ErrFactorConfig or ErrLocalSteps when the value breaks one of
	// their rules, so that errors.Is still tells them apart; else nil.
	Rule error
}

// Error names the rule broken, when there is one, then the setting, its
// value and the reason.
func (e *SettingError) Error() string {
	if e.Rule != nil {
		return e.Rule.Error() + ": " + e.Detail()
	}
	return e.Detail()
}

// Detail is the setting, its value and the reason, without the rule.
func (e *SettingError) Detail() string {
	if e.Value == "" {
		// The reason names the value.
		return e.Setting + ": " + e.Reason
	}
	return e.Setting + " " + e.Value + ": " + e.Reason
}

func (e *SettingError) Unwrap() error { return e.Rule }

// Names of settings that are not mesh-wide (SettingNames) but are checked
// by the same rules.
const (
	// SettingBatch is the mini-batch (CheckBatch).
	SettingBatch = "batch"
)

// maxLearningRate bounds a learning rate; a larger one is a typo.
const maxLearningRate = 1e12

// Validate checks every setting on its own and against the others, by the
// rules New and Build apply, and names the first one at fault with a
// SettingError. Zero values that stand for a default are valid: a learning
// rate of 0 (the optimizer's default, DefaultRate), a dimension of 0 (the
// data's, until the data is read), local steps and outer rate 0 (1), an
// empty outer step or factor mode (sgd, off).
func (s Settings) Validate() error {
	if !slices.Contains(model.Kinds(), s.Model) {
		return oneOf(SettingModel, string(s.Model), model.Kinds())
	}
	if !slices.Contains(model.OptimizerKinds(), s.Optimizer) {
		return oneOf(SettingOptimizer, string(s.Optimizer), model.OptimizerKinds())
	}
	switch {
	case !(s.LearningRate >= 0) || s.LearningRate > maxLearningRate:
		return &SettingError{Setting: SettingLearningRate, Value: fmt.Sprint(s.LearningRate), Reason: "want a finite value > 0, or 0 for the optimizer's default"}
	case !(s.L2 >= 0) || math.IsInf(s.L2, 0):
		return &SettingError{Setting: SettingL2, Value: fmt.Sprint(s.L2), Reason: "want a finite value >= 0"}
	case s.Staleness < 0:
		return &SettingError{Setting: SettingStaleness, Value: fmt.Sprint(s.Staleness), Reason: "want >= 0"}
	}
	if !slices.Contains(codec.Names(), s.Codec) {
		return oneOf(SettingCodec, s.Codec, codec.Names())
	}
	if s.HashBits > 0 {
		if err := dataset.CheckHashBits(s.HashBits); err != nil {
			return &SettingError{Setting: SettingHashBits, Reason: err.Error()}
		}
	}
	if err := checkLocalSettings(s.LocalSteps, s.Outer, s.OuterRate); err != nil {
		return err
	}
	factors := s.Factors
	if factors == "" {
		factors = FactorsOff
	}
	return checkFactors(factors, s.Model, s.Optimizer, s.L2, s.ErrorFeedback, max(s.LocalSteps, 1))
}

// checkLocalSettings checks the local-step settings; zero values stand for
// one step, sgd and rate 1.
func checkLocalSettings(steps int, outer OuterKind, rate float64) error {
	switch {
	case steps < 0 || steps > MaxLocalSteps:
		return &SettingError{Setting: SettingLocalSteps, Value: fmt.Sprint(steps), Reason: fmt.Sprintf("want 1 to %d", MaxLocalSteps), Rule: ErrLocalSteps}
	case !(rate >= 0) || math.IsInf(rate, 0):
		return &SettingError{Setting: SettingOuterRate, Value: fmt.Sprint(rate), Reason: "want a finite rate > 0", Rule: ErrLocalSteps}
	}
	switch outer {
	case "", OuterSGD, OuterNesterov, OuterAdaptive:
		return nil
	}
	err := oneOf(SettingOuter, string(outer), OuterKinds)
	err.Rule = ErrLocalSteps
	return err
}

// checkFactors holds the rules of sufficient factor broadcasting (package
// sfb): factors are the exact update only for a softmax model trained by
// plain SGD without an L2 term, one step per exchange, and leave no
// residual for error feedback to carry.
func checkFactors(mode FactorMode, kind model.Kind, opt model.OptimizerKind, l2 float64, errorFeedback bool, localSteps int) error {
	value := string(mode)
	fail := func(reason string, args ...any) error {
		return &SettingError{Setting: SettingFactors, Value: value, Reason: fmt.Sprintf(reason, args...), Rule: ErrFactorConfig}
	}
	switch mode {
	case FactorsOff:
		return nil
	case FactorsAuto, FactorsAlways:
	default:
		return oneOf(SettingFactors, value, []FactorMode{FactorsOff, FactorsAuto, FactorsAlways})
	}
	switch {
	case kind != model.Softmax:
		return fail("sufficient factors are for model softmax, not %s", kind)
	case opt != model.SGD:
		return fail("factors are exact only for plain SGD; optimizer %s scales each coordinate and breaks the low rank", opt)
	case l2 != 0:
		return fail("an L2 term is not low-rank; use l2 0")
	case errorFeedback:
		return fail("error feedback cannot ride on factors; turn error-feedback off")
	case localSteps > 1:
		return fail("the change of %d local steps has no sufficient factors; use local-steps 1 or sfb off", localSteps)
	}
	return nil
}

// oneOf is the SettingError of a value that is not among allowed.
func oneOf[T ~string](setting, value string, allowed []T) *SettingError {
	names := make([]string, len(allowed))
	for i, a := range allowed {
		names[i] = string(a)
	}
	return &SettingError{Setting: setting, Value: fmt.Sprintf("%q", value), Reason: "want one of " + strings.Join(names, ", ")}
}

// CheckBatch checks a mini-batch setting: a fraction of a node's rows in
// (0, 1], or a whole row count (see BatchRows).
func CheckBatch(batch float64) error {
	if !(batch > 0) || math.IsInf(batch, 0) || (batch > 1 && batch != math.Trunc(batch)) {
		return &SettingError{Setting: SettingBatch, Value: fmt.Sprint(batch), Reason: "want a fraction in (0,1] or a whole row count"}
	}
	return nil
}

// BatchRows is the mini-batch of a node that trains on rows rows: a
// fraction below 1 takes that share of them, rounded up (so a small shard
// still trains on at least one row, and a fraction never rounds to less
// than it asks); a count of 1 or more takes that many rows, at most all of
// them. Every command and harness takes its batch from here.
func BatchRows(batch float64, rows int) int {
	if batch < 1 {
		return max(1, int(math.Ceil(batch*float64(rows))))
	}
	return max(1, min(int(batch), rows))
}

// WithDefaultRate returns s with a learning rate of 0 replaced by the
// optimizer's default for the model (model.DefaultRate), which plain SGD
// scales by the mean squared norm of rows.
func (s Settings) WithDefaultRate(rows []dataset.Row) (Settings, error) {
	if s.LearningRate > 0 {
		return s, nil
	}
	lr, err := model.DefaultRate(s.Optimizer, s.Model, model.MeanSquaredNorm(rows))
	if err != nil {
		return s, fmt.Errorf("default learning rate: %w", err)
	}
	s.LearningRate = lr
	return s, nil
}
