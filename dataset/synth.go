package dataset

// Synthetic data, for meshes larger than any built-in set: with P members
// and a few rows each, rcv1's 1,000 training rows leave each member of a
// thousand with one. Real data sets remain the reference for every
// accuracy claim; synthetic data shows how a mesh scales and how close it
// gets to the model that made the labels.

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
)

// SynthPrefix starts a data name that asks for synthetic data, as in
// "synth:rows=100000,features=65536,seed=1" (see ParseSynth).
const SynthPrefix = "synth:"

// Bounds of a synthetic set, checked before anything is allocated.
const (
	MaxSynthRows     = 50_000_000
	MaxSynthFeatures = 1 << 30
	MaxSynthPerRow   = 1000
	// MaxSynthNonzeros bounds rows × per-row non-zeros: 12 bytes each,
	// 6 GB at the bound.
	MaxSynthNonzeros = 500_000_000
)

// SynthConfig describes a click-log-like synthetic set: every row holds
// PerRow distinct features of value 1, drawn with power-law (Zipf)
// frequencies, so that a few features are in most rows and most features
// are rare, as with hashed click-log ids; its label is drawn from a planted
// logistic model.
type SynthConfig struct {
	// Rows is the number of training rows; TestRows (default Rows/5, at
	// least 1) more are drawn the same way for the test split.
	Rows, TestRows int
	// Features is the number of feature ids, 1..Features; id 1 is the most
	// frequent.
	Features int
	// PerRow is the number of non-zeros of a row (default 20, at most
	// Features).
	PerRow int
	// Zipf is the exponent s > 1 of the feature frequencies: feature k is
	// drawn with probability proportional to 1/(k+1)^s (default 1.1).
	Zipf float64
	// Scale sets the spread of the planted model's margin (default 4):
	// each weight is normal with variance Scale²/PerRow, the bias standard
	// normal. Larger separates the classes better.
	Scale float64
	Seed  uint64
}

// ParseSynth parses the part of a data name after SynthPrefix:
// comma-separated key=value pairs, rows and features required, perrow,
// zipf, scale, test and seed optional. Every value is checked against the
// bounds before anything is drawn.
func ParseSynth(spec string) (SynthConfig, error) {
	c := SynthConfig{PerRow: 20, Zipf: 1.1, Scale: 4, Seed: 1, TestRows: -1}
	if len(spec) > 256 {
		return c, fmt.Errorf("synthetic data %q: spec longer than 256 bytes", spec[:32]+"...")
	}
	seen := map[string]bool{}
	for field := range strings.SplitSeq(spec, ",") {
		key, value, ok := strings.Cut(field, "=")
		if !ok {
			return c, fmt.Errorf("synthetic data: %q is not key=value (want e.g. rows=100000,features=65536,seed=1)", field)
		}
		if seen[key] {
			return c, fmt.Errorf("synthetic data: %s given twice", key)
		}
		seen[key] = true
		var err error
		switch key {
		case "rows":
			c.Rows, err = strconv.Atoi(value)
		case "test":
			c.TestRows, err = strconv.Atoi(value)
		case "features":
			c.Features, err = strconv.Atoi(value)
		case "perrow":
			c.PerRow, err = strconv.Atoi(value)
		case "zipf":
			c.Zipf, err = strconv.ParseFloat(value, 64)
		case "scale":
			c.Scale, err = strconv.ParseFloat(value, 64)
		case "seed":
			c.Seed, err = strconv.ParseUint(value, 10, 64)
		default:
			return c, fmt.Errorf("synthetic data: unknown key %q (want rows, features, perrow, zipf, scale, test, seed)", key)
		}
		if err != nil {
			return c, fmt.Errorf("synthetic data: %s: %w", key, err)
		}
	}
	if !seen["rows"] || !seen["features"] {
		return c, errors.New("synthetic data: rows and features are required, e.g. synth:rows=100000,features=65536")
	}
	if c.TestRows < 0 {
		c.TestRows = max(1, c.Rows/5)
	}
	return c, c.validate()
}

func (c SynthConfig) validate() error {
	switch {
	case c.Rows < 1 || c.Rows > MaxSynthRows:
		return fmt.Errorf("synthetic data: rows %d: want 1 to %d", c.Rows, MaxSynthRows)
	case c.TestRows < 1 || c.TestRows > MaxSynthRows:
		return fmt.Errorf("synthetic data: test %d: want 1 to %d", c.TestRows, MaxSynthRows)
	case c.Features < 1 || c.Features > MaxSynthFeatures:
		return fmt.Errorf("synthetic data: features %d: want 1 to %d", c.Features, MaxSynthFeatures)
	case c.PerRow < 1 || c.PerRow > MaxSynthPerRow || c.PerRow > c.Features:
		return fmt.Errorf("synthetic data: perrow %d: want 1 to %d and at most features (%d)", c.PerRow, MaxSynthPerRow, c.Features)
	case !(c.Zipf > 1 && c.Zipf <= 10):
		return fmt.Errorf("synthetic data: zipf %v: want above 1, at most 10", c.Zipf)
	case !(c.Scale > 0 && c.Scale <= 100):
		return fmt.Errorf("synthetic data: scale %v: want above 0, at most 100", c.Scale)
	case (c.Rows+c.TestRows)*c.PerRow > MaxSynthNonzeros:
		return fmt.Errorf("synthetic data: %d rows of %d non-zeros: above the bound of %d non-zeros", c.Rows+c.TestRows, c.PerRow, MaxSynthNonzeros)
	}
	return nil
}

// Planted is the logistic model that drew a synthetic set's labels.
type Planted struct {
	Bias float64
	// Weights[k-1] is feature k's weight.
	Weights []float64
}

// Margin is the planted model's margin on r.
func (p *Planted) Margin(r Row) float64 {
	m := p.Bias
	for j, k := range r.Keys {
		if k >= 1 && k <= uint64(len(p.Weights)) {
			m += p.Weights[k-1] * float64(r.Values[j])
		}
	}
	return m
}

// Accuracy is the share of d's rows whose label (1 or -1) the sign of the
// planted margin gives: the best a linear model can expect on average,
// since the labels are drawn, not decided, from the planted probabilities.
func (p *Planted) Accuracy(d *Dataset) float64 {
	if len(d.Rows) == 0 {
		return math.NaN()
	}
	right := 0
	for _, r := range d.Rows {
		if (p.Margin(r) > 0) == (r.Label > 0) {
			right++
		}
	}
	return float64(right) / float64(len(d.Rows))
}

// LogLoss is the planted model's mean log loss on d.
func (p *Planted) LogLoss(d *Dataset) float64 {
	if len(d.Rows) == 0 {
		return math.NaN()
	}
	var sum float64
	for _, r := range d.Rows {
		m := p.Margin(r)
		if r.Label <= 0 {
			m = -m
		}
		// log(1+e^-m), stable for large |m|.
		if m > 0 {
			sum += math.Log1p(math.Exp(-m))
		} else {
			sum += -m + math.Log1p(math.Exp(m))
		}
	}
	return sum / float64(len(d.Rows))
}

// Synthetic draws the training and test sets c describes and the model
// that labelled them. The same configuration gives the same sets, row for
// row. Labels are 1 or -1; MaxFeature is Features in both sets.
func Synthetic(c SynthConfig) (train, test *Dataset, planted *Planted, err error) {
	if err := c.validate(); err != nil {
		return nil, nil, nil, err
	}
	rng := rand.New(rand.NewPCG(c.Seed, pcgStream))
	planted = &Planted{Bias: rng.NormFloat64(), Weights: make([]float64, c.Features)}
	sd := c.Scale / math.Sqrt(float64(c.PerRow))
	for k := range planted.Weights {
		planted.Weights[k] = rng.NormFloat64() * sd
	}
	zipf := rand.NewZipf(rng, c.Zipf, 1, uint64(c.Features-1))
	name := fmt.Sprintf("%srows=%d,features=%d,perrow=%d,zipf=%g,scale=%g,seed=%d", SynthPrefix, c.Rows, c.Features, c.PerRow, c.Zipf, c.Scale, c.Seed)
	draw := func(rows int, split string) *Dataset {
		keys := make([]uint64, rows*c.PerRow)
		values := make([]float32, rows*c.PerRow)
		for i := range values {
			values[i] = 1
		}
		// Both splits span every feature id, so that a model sized by
		// the training set covers the test set.
		d := &Dataset{Name: name + split, Rows: make([]Row, rows), MaxFeature: uint64(c.Features)}
		for i := range d.Rows {
			row := keys[i*c.PerRow : (i+1)*c.PerRow : (i+1)*c.PerRow]
			for j := range row {
				// Distinct features: draw again on a repeat, a few times;
				// then take the next free id, so that a steep Zipf with
				// many features per row still ends.
				k := zipf.Uint64() + 1
				for try := 0; slices.Contains(row[:j], k); try++ {
					if try < 16 {
						k = zipf.Uint64() + 1
					} else {
						k = k%uint64(c.Features) + 1
					}
				}
				row[j] = k
			}
			slices.Sort(row)
			r := Row{Keys: row, Values: values[i*c.PerRow : (i+1)*c.PerRow : (i+1)*c.PerRow]}
			if rng.Float64() < 1/(1+math.Exp(-planted.Margin(r))) {
				r.Label = 1
			} else {
				r.Label = -1
			}
			d.Rows[i] = r
		}
		return d
	}
	train = draw(c.Rows, "")
	test = draw(c.TestRows, " (test)")
	return train, test, planted, nil
}
