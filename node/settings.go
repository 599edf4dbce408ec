package node

import (
	"fmt"
	"math"
	"slices"

	"github.com/sketchmesh/sketchmesh/codec"
	"github.com/sketchmesh/sketchmesh/dataset"
	"github.com/sketchmesh/sketchmesh/model"
	"github.com/sketchmesh/sketchmesh/wire"
)

// Settings are the training hyper-parameters every member of a mesh must
// share: two members that disagree on any of them would add up updates
// that do not mean the same thing. A joiner takes them from the mesh.
type Settings struct {
	Model         model.Kind
	MaxFeature    uint64    // the model's dimension D
	Classes       []float64 // softmax label values, ascending
	L2            float64
	Optimizer     model.OptimizerKind
	LearningRate  float64
	Staleness     int
	Codec         string
	ErrorFeedback bool
	Factors       FactorMode
	// Iterations is where every member stops; 0 trains until stopped.
	Iterations uint64
	// HashBits is 0 when feature ids are the model's keys, and B when
	// every id is hashed into 2^B keys (dataset.HashFunction); then
	// MaxFeature is 2^B.
	HashBits uint
	// LocalSteps, Outer and OuterRate are the local-step settings
	// (Config.LocalSteps); their zero values mean 1, sgd and 1.
	LocalSteps int
	Outer      OuterKind
	OuterRate  float64
}

// Setting names, as Conflict reports them and as a joiner lists the
// settings it was given explicitly. They match the command-line flags.
const (
	SettingModel         = "model"
	SettingDimension     = "dim"
	SettingClasses       = "classes"
	SettingL2            = "l2"
	SettingOptimizer     = "optimizer"
	SettingLearningRate  = "lr"
	SettingStaleness     = "staleness"
	SettingCodec         = "codec"
	SettingErrorFeedback = "error-feedback"
	SettingFactors       = "sfb"
	SettingIterations    = "iterations"
	SettingHashBits      = "hash-bits"
	SettingLocalSteps    = "local-steps"
	SettingOuter         = "outer"
	SettingOuterRate     = "outer-lr"
)

// SettingNames lists every setting name, in a fixed order.
func SettingNames() []string {
	return []string{SettingModel, SettingDimension, SettingClasses, SettingL2, SettingOptimizer,
		SettingLearningRate, SettingStaleness, SettingCodec, SettingErrorFeedback, SettingFactors, SettingIterations, SettingHashBits,
		SettingLocalSteps, SettingOuter, SettingOuterRate}
}

// Value returns the setting called name as text, as Conflict compares and
// reports it ("" for an unknown name).
func (s Settings) Value(name string) string {
	switch name {
	case SettingModel:
		return string(s.Model)
	case SettingDimension:
		return fmt.Sprint(s.MaxFeature)
	case SettingClasses:
		return fmt.Sprint(s.Classes)
	case SettingL2:
		return fmt.Sprint(s.L2)
	case SettingOptimizer:
		return string(s.Optimizer)
	case SettingLearningRate:
		return fmt.Sprint(s.LearningRate)
	case SettingStaleness:
		return fmt.Sprint(s.Staleness)
	case SettingCodec:
		return s.Codec
	case SettingErrorFeedback:
		return fmt.Sprint(s.ErrorFeedback)
	case SettingFactors:
		return string(s.Factors)
	case SettingIterations:
		return fmt.Sprint(s.Iterations)
	case SettingHashBits:
		return fmt.Sprint(s.HashBits)
	case SettingLocalSteps:
		return fmt.Sprint(max(s.LocalSteps, 1))
	case SettingOuter:
		if s.Outer == "" {
			return string(OuterSGD)
		}
		return string(s.Outer)
	case SettingOuterRate:
		if s.OuterRate == 0 {
			return "1"
		}
		return fmt.Sprint(s.OuterRate)
	}
	return ""
}

// Conflict compares the settings a joiner was explicitly given (by name)
// with the mesh's, and names the first that differs; nil when none does.
func (s Settings) Conflict(mesh Settings, explicit []string) error {
	for _, name := range SettingNames() {
		if !slices.Contains(explicit, name) {
			continue
		}
		if mine, theirs := s.Value(name), mesh.Value(name); mine != theirs {
			return fmt.Errorf("setting %s differs: this node was given %s, the mesh trains with %s", name, mine, theirs)
		}
	}
	return nil
}

// Build returns the model, optimizer and codec the settings describe,
// once Validate passes and the learning rate and dimension are known.
func (s Settings) Build() (*model.Model, model.Optimizer, codec.Codec, error) {
	if err := s.Validate(); err != nil {
		return nil, nil, nil, err
	}
	if s.HashBits > 0 && s.MaxFeature != 1<<s.HashBits {
		return nil, nil, nil, fmt.Errorf("dimension %d does not match %d hash bits (2^%d)", s.MaxFeature, s.HashBits, s.HashBits)
	}
	m, err := model.New(model.Config{Kind: s.Model, MaxFeature: s.MaxFeature, Classes: s.Classes, L2: s.L2})
	if err != nil {
		return nil, nil, nil, err
	}
	opt, err := model.NewOptimizer(s.Optimizer, s.LearningRate, m.NumParams())
	if err != nil {
		return nil, nil, nil, err
	}
	c, err := codec.ByName(s.Codec)
	if err != nil {
		return nil, nil, nil, err
	}
	return m, opt, c, nil
}

// Limits on what a peer may claim in settings and snapshots.
const (
	maxClasses   = 1 << 16
	maxNameBytes = 64
	// MaxMembers bounds the members a snapshot or a membership list may
	// name.
	MaxMembers = 1 << 16
	// MaxParams bounds a snapshot's view: 2^27 float64 values, 1 GiB.
	MaxParams = 1 << 27
)

// WriteTo appends the settings to w as one msgpack array: eleven fields;
// a twelfth, the hash bits, when ids are hashed; and three more, local
// steps, outer step and outer rate (the hash bits then 0 when ids are not
// hashed), when they are not 1, sgd and 1. Members and checkpoints of
// meshes without hashing or local steps read as they did before either.
func (s Settings) WriteTo(w *wire.Writer) {
	local := !s.defaultLocal()
	switch {
	case local:
		w.Array(15)
	case s.HashBits > 0:
		w.Array(12)
	default:
		w.Array(11)
	}
	w.String(string(s.Model))
	w.Uint(s.MaxFeature)
	w.Floats(s.Classes)
	w.Float(s.L2)
	w.String(string(s.Optimizer))
	w.Float(s.LearningRate)
	w.Uint(uint64(s.Staleness))
	w.String(s.Codec)
	w.Bool(s.ErrorFeedback)
	w.String(string(s.Factors))
	w.Uint(s.Iterations)
	if s.HashBits > 0 || local {
		w.Uint(uint64(s.HashBits))
	}
	if local {
		w.Uint(uint64(max(s.LocalSteps, 1)))
		w.String(s.Value(SettingOuter))
		rate := s.OuterRate
		if rate == 0 {
			rate = 1
		}
		w.Float(rate)
	}
}

// defaultLocal reports whether the local-step settings are the defaults:
// one step, sgd at rate 1.
func (s Settings) defaultLocal() bool {
	return s.LocalSteps <= 1 && (s.Outer == "" || s.Outer == OuterSGD) && (s.OuterRate == 0 || s.OuterRate == 1)
}

// ReadSettings reads settings written by Settings.WriteTo.
func ReadSettings(r *wire.Reader) (Settings, error) {
	var s Settings
	fields, err := r.Array("settings", 1)
	if err != nil {
		return s, err
	}
	if fields != 11 && fields != 12 && fields != 15 {
		return s, fmt.Errorf("%w: settings have %d fields, want 11, 12 or 15", wire.ErrMalformed, fields)
	}
	var str string
	read := func(f func() error) {
		if err == nil {
			err = f()
		}
	}
	read(func() error { str, err = r.String("model", maxNameBytes); s.Model = model.Kind(str); return err })
	read(func() error { s.MaxFeature, err = r.Uint("dimension"); return err })
	read(func() error { s.Classes, err = r.Floats("classes", maxClasses); return err })
	read(func() error { s.L2, err = r.Float("l2"); return err })
	read(func() error {
		str, err = r.String("optimizer", maxNameBytes)
		s.Optimizer = model.OptimizerKind(str)
		return err
	})
	read(func() error { s.LearningRate, err = r.Float("learning rate"); return err })
	read(func() error {
		var v uint64
		v, err = r.Uint("staleness")
		if err == nil && v > math.MaxInt32 {
			err = fmt.Errorf("%w: staleness %d", wire.ErrMalformed, v)
		}
		s.Staleness = int(v)
		return err
	})
	read(func() error { s.Codec, err = r.String("codec", maxNameBytes); return err })
	read(func() error { s.ErrorFeedback, err = r.Bool("error feedback"); return err })
	read(func() error { str, err = r.String("factors", maxNameBytes); s.Factors = FactorMode(str); return err })
	read(func() error { s.Iterations, err = r.Uint("iterations"); return err })
	if fields >= 12 {
		read(func() error {
			var v uint64
			v, err = r.Uint("hash bits")
			// Fifteen fields carry the hash bits as 0 when ids are not hashed.
			if err == nil && (v == 0 && fields == 12 || v > dataset.MaxHashBits) {
				err = fmt.Errorf("%w: hash bits %d, want 1 to %d", wire.ErrMalformed, v, dataset.MaxHashBits)
			}
			s.HashBits = uint(v)
			return err
		})
	}
	if fields == 15 {
		read(func() error { s.LocalSteps, s.Outer, s.OuterRate, err = readLocalSettings(r); return err })
	}
	if len(s.Classes) == 0 {
		s.Classes = nil
	}
	return s, err
}

// readLocalSettings reads the local-step fields of settings, in the zero
// values' form for the defaults (one step, sgd, rate 1), as a mesh that
// never set them holds them.
func readLocalSettings(r *wire.Reader) (steps int, outer OuterKind, rate float64, err error) {
	v, err := r.Uint("local steps")
	if err != nil {
		return 0, "", 0, err
	}
	if v == 0 || v > MaxLocalSteps {
		return 0, "", 0, fmt.Errorf("%w: local steps %d, want 1 to %d", wire.ErrMalformed, v, MaxLocalSteps)
	}
	name, err := r.String("outer step", maxNameBytes)
	if err != nil {
		return 0, "", 0, err
	}
	if outer = OuterKind(name); !slices.Contains(OuterKinds, outer) {
		return 0, "", 0, fmt.Errorf("%w: outer step %q, want one of %v", wire.ErrMalformed, name, OuterKinds)
	}
	if rate, err = r.Float("outer rate"); err != nil {
		return 0, "", 0, err
	}
	if !(rate > 0) || math.IsInf(rate, 0) {
		return 0, "", 0, fmt.Errorf("%w: outer rate %v, want a finite rate > 0", wire.ErrMalformed, rate)
	}
	if steps = int(v); steps == 1 {
		steps = 0
	}
	if outer == OuterSGD {
		outer = ""
	}
	if rate == 1 {
		rate = 0
	}
	return steps, outer, rate, nil
}
