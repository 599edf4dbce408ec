package model

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"sort"
	"strings"

	"github.com/sketchmesh/sketchmesh/dataset"
)

// Kind names a model.
type Kind string

// The models sketchmesh trains.
const (
	LogisticRegression Kind = "lr"
	LinearSVM          Kind = "svm"
	LinearRegression   Kind = "linear"
	Softmax            Kind = "softmax"
)

// Kinds lists the model names a user may select.
func Kinds() []Kind { return []Kind{LogisticRegression, LinearSVM, LinearRegression, Softmax} }

// KindNames lists Kinds as strings, for flag checks and messages.
func KindNames() []string {
	names := make([]string, 0, len(Kinds()))
	for _, k := range Kinds() {
		names = append(names, string(k))
	}
	return names
}

// Describe names what the model is, for help texts.
func (k Kind) Describe() string {
	switch k {
	case LogisticRegression:
		return "logistic regression"
	case LinearSVM:
		return "linear SVM"
	case LinearRegression:
		return "least squares"
	case Softmax:
		return "multinomial logistic regression"
	}
	return "unknown model"
}

// NewModel returns the model of kind over train: its dimension is the
// largest feature id of the rows, and a softmax model's classes are their
// labels.
func NewModel(kind Kind, l2 float64, train *dataset.Dataset) (*Model, error) {
	mc := Config{Kind: kind, MaxFeature: train.MaxFeature, L2: l2}
	if kind == Softmax {
		mc.Classes = train.Labels()
	}
	return New(mc)
}

// ErrConfig is wrapped by every configuration error.
var ErrConfig = errors.New("invalid model configuration")

// ErrTooLarge is wrapped, with ErrConfig, when the dimension and classes
// ask for more parameters than a model may have (MaxParams).
var ErrTooLarge = errors.New("too many parameters")

// MaxParams bounds a model's parameters: classes × (dimension + 1).
const MaxParams = 1 << 31

// Config defines a model. Every node of a mesh must use the same Config.
type Config struct {
	Kind Kind
	// MaxFeature is the largest feature id the model has a weight for
	// (the dimension D). Features above it are ignored.
	MaxFeature uint64
	// Classes are the label values of a softmax model, ascending; the class
	// index of a label is its position here. Unused by other models.
	Classes []float64
	// L2 is the L2 regularisation strength (added as L2·w to the gradient).
	L2 float64
}

// Model is an immutable model definition with its gradient and evaluation.
type Model struct {
	cfg    Config
	blocks int
	stride uint64
}

// New validates cfg and returns the model.
func New(cfg Config) (*Model, error) {
	if !slices.Contains(Kinds(), cfg.Kind) {
		return nil, fmt.Errorf("%w: unknown model %q (known: %s)", ErrConfig, cfg.Kind, strings.Join(KindNames(), ", "))
	}
	if cfg.MaxFeature == 0 {
		return nil, fmt.Errorf("%w: the data has no features", ErrConfig)
	}
	if cfg.L2 < 0 || math.IsNaN(cfg.L2) || math.IsInf(cfg.L2, 0) {
		return nil, fmt.Errorf("%w: l2 must be a finite value >= 0, got %v", ErrConfig, cfg.L2)
	}
	blocks := 1
	if cfg.Kind == Softmax {
		if len(cfg.Classes) < 2 {
			return nil, fmt.Errorf("%w: softmax needs at least 2 classes, the data has %d", ErrConfig, len(cfg.Classes))
		}
		if !sort.Float64sAreSorted(cfg.Classes) {
			return nil, fmt.Errorf("%w: classes must be sorted", ErrConfig)
		}
		blocks = len(cfg.Classes)
	}
	// Compare before adding 1: a dimension of 2^64−1 would wrap to 0.
	if cfg.MaxFeature >= MaxParams/uint64(blocks) {
		return nil, fmt.Errorf("%w: %w: %d classes × %d features exceeds %d parameters", ErrConfig, ErrTooLarge, blocks, cfg.MaxFeature, MaxParams)
	}
	cfg.Classes = slices.Clone(cfg.Classes)
	return &Model{cfg: cfg, blocks: blocks, stride: cfg.MaxFeature + 1}, nil
}

// Config returns the model's definition.
func (m *Model) Config() Config { return m.cfg }

// NumParams is the length of the parameter view.
func (m *Model) NumParams() int { return m.blocks * int(m.stride) }

// Blocks is the number of output blocks: the classes of a softmax model, 1
// for the others.
func (m *Model) Blocks() int { return m.blocks }

// Stride is the number of keys in one block: the features plus the bias.
func (m *Model) Stride() uint64 { return m.stride }

// ScoreGradients returns, per row, the derivative of the row's loss with
// respect to each block's score (Blocks() values), and the mean loss. The
// mean gradient is (1/len(rows)) Σ_i dz_i ⊗ (1, x_i) plus the L2 term: the
// sufficient factors of the update.
func (m *Model) ScoreGradients(w []float64, rows []dataset.Row) ([][]float64, float64) {
	scores := make([]float64, m.blocks)
	out := make([][]float64, len(rows))
	var loss float64
	for i := range rows {
		out[i] = make([]float64, m.blocks)
		loss += m.rowLoss(w, &rows[i], scores, out[i])
	}
	if len(rows) == 0 {
		return out, 0
	}
	return out, loss / float64(len(rows))
}

// HasAccuracy reports whether the model is a classifier.
func (m *Model) HasAccuracy() bool { return m.cfg.Kind != LinearRegression }

// Gradient is a sparse gradient: Keys ascending, Values aligned.
type Gradient struct {
	Keys   []uint64
	Values []float64
}

// Scratch holds reusable buffers for Gradient, so a training loop allocates
// little. The zero value is ready to use; it is not safe for concurrent use.
type Scratch struct {
	// pages sum the gradient by key; only the pages of keys a gradient
	// touched are allocated (see PagedVec).
	pages []*scratchPage
	// touched lists the pages this gradient touched, in the order it first
	// touched them: sorting them and reading each page's bits in order
	// lists the keys in ascending order for a fraction of the cost of
	// sorting the keys (a key of news20.binary's shares its page with 1 to
	// 63 others).
	touched []uint64
	keys    []uint64
	scores  []float64
}

// scratchPage holds the sums of pageLen keys and which of them this
// gradient touched, one bit each.
type scratchPage struct {
	sum     [pageLen]float64
	touched uint64
}

func (s *Scratch) ensure(n, blocks int) {
	if pages := (n + pageLen - 1) / pageLen; len(s.pages) != pages {
		s.pages = make([]*scratchPage, pages)
		s.touched = s.touched[:0]
	}
	if len(s.scores) != blocks {
		s.scores = make([]float64, blocks)
	}
	s.keys = s.keys[:0]
}

func (s *Scratch) add(k uint64, v float64) {
	page := k >> pageBits
	p := s.pages[page]
	if p == nil {
		p = new(scratchPage)
		s.pages[page] = p
	}
	if p.touched == 0 {
		s.touched = append(s.touched, page)
	}
	p.touched |= 1 << (k & (pageLen - 1))
	p.sum[k&(pageLen-1)] += v
}

// drain returns the keys the gradient touched, ascending (aliasing s), and
// their sums (fresh), and clears them for the next gradient.
func (s *Scratch) drain() ([]uint64, []float64) {
	slices.Sort(s.touched)
	n := 0
	for _, page := range s.touched {
		n += bits.OnesCount64(s.pages[page].touched)
	}
	s.keys = slices.Grow(s.keys[:0], n)
	sums := make([]float64, 0, n)
	for _, page := range s.touched {
		p := s.pages[page]
		for t := p.touched; t != 0; t &= t - 1 {
			i := bits.TrailingZeros64(t)
			s.keys = append(s.keys, page<<pageBits|uint64(i))
			sums = append(sums, p.sum[i])
			p.sum[i] = 0
		}
		p.touched = 0
	}
	s.touched = s.touched[:0]
	return s.keys, sums
}

// dot is the score of row r against block b of w.
func (m *Model) dot(w []float64, b int, r *dataset.Row) float64 {
	base := uint64(b) * m.stride
	z := w[base]
	for i, k := range r.Keys {
		if k > m.cfg.MaxFeature {
			break
		}
		z += w[base+k] * float64(r.Values[i])
	}
	return z
}

// binaryTarget maps a LIBSVM label to {0,1}: positive labels are class 1,
// zero and negative labels class 0, which accepts both ±1 and 0/1 files.
func binaryTarget(label float64) float64 {
	if label > 0 {
		return 1
	}
	return 0
}

func (m *Model) classOf(label float64) int {
	i, ok := slices.BinarySearch(m.cfg.Classes, label)
	if !ok {
		return -1
	}
	return i
}

// rowLoss returns the loss of one row and fills dz with the derivative of
// the loss with respect to each block's score.
func (m *Model) rowLoss(w []float64, r *dataset.Row, scores, dz []float64) float64 {
	switch m.cfg.Kind {
	case LogisticRegression:
		z := m.dot(w, 0, r)
		y := binaryTarget(r.Label)
		p := sigmoid(z)
		dz[0] = p - y
		// log(1+e^z) - y z, computed without overflow.
		return softplus(z) - y*z
	case LinearSVM:
		z := m.dot(w, 0, r)
		y := 2*binaryTarget(r.Label) - 1
		if y*z < 1 {
			dz[0] = -y
			return 1 - y*z
		}
		dz[0] = 0
		return 0
	case LinearRegression:
		d := m.dot(w, 0, r) - r.Label
		dz[0] = d
		return d * d / 2
	default:
		for c := range scores {
			scores[c] = m.dot(w, c, r)
		}
		y := m.classOf(r.Label)
		lse := logSumExp(scores)
		for c := range scores {
			dz[c] = math.Exp(scores[c] - lse)
		}
		if y < 0 {
			// A label the model has no class for contributes no gradient.
			clear(dz)
			return 0
		}
		dz[y]--
		return lse - scores[y]
	}
}

// Gradient returns the mean gradient over rows of the regularised loss at w,
// and the mean loss (without the L2 term). The returned slices alias s and
// are valid until the next call with the same Scratch.
func (m *Model) Gradient(w []float64, rows []dataset.Row, s *Scratch) (Gradient, float64) {
	if len(rows) == 0 {
		return Gradient{}, 0
	}
	s.ensure(m.NumParams(), m.blocks)
	dz := make([]float64, m.blocks)
	inv := 1 / float64(len(rows))
	var loss float64
	for i := range rows {
		r := &rows[i]
		loss += m.rowLoss(w, r, s.scores, dz)
		for b, d := range dz {
			if d == 0 {
				continue
			}
			base := uint64(b) * m.stride
			s.add(base, d*inv)
			for j, k := range r.Keys {
				if k > m.cfg.MaxFeature {
					break
				}
				s.add(base+k, d*inv*float64(r.Values[j]))
			}
		}
	}
	keys, sums := s.drain()
	if m.cfg.L2 > 0 {
		for i, k := range keys {
			if k%m.stride != 0 {
				sums[i] += m.cfg.L2 * w[k]
			}
		}
	}
	return Gradient{Keys: keys, Values: sums}, loss * inv
}

// Evaluate returns the metrics of w on rows (see Evaluator).
func (m *Model) Evaluate(w []float64, rows []dataset.Row) Metrics {
	ev := m.NewEvaluator(w)
	for i := range rows {
		ev.Add(&rows[i])
	}
	return ev.Metrics()
}

func sigmoid(z float64) float64 {
	if z >= 0 {
		return 1 / (1 + math.Exp(-z))
	}
	e := math.Exp(z)
	return e / (1 + e)
}

func softplus(z float64) float64 {
	if z > 30 {
		return z
	}
	return math.Log1p(math.Exp(z))
}

func logSumExp(v []float64) float64 {
	mx := v[argmax(v)]
	var s float64
	for _, x := range v {
		s += math.Exp(x - mx)
	}
	return mx + math.Log(s)
}

func argmax(v []float64) int {
	best := 0
	for i, x := range v {
		if x > v[best] {
			best = i
		}
	}
	return best
}
