package node

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/sketchmesh/sketchmesh/codec"
)

// Poisoned values.
//
// Every decoded update is screened before it is applied:
//
//   - a value that is NaN or ±Inf rejects the update (RejectNaN); this is a
//     property of the frame alone, checked with decoding;
//   - an update whose L2 norm exceeds NormFactor times the median norm of
//     the last NormWindow updates this node accepted (its own included) is
//     rejected (RejectNorm); the median of a window most of which honest
//     members made cannot be moved far by one member, however large it
//     makes its own updates. By default the bound holds in signed meshes
//     only: there a refused update counts as heard (see sign.go), while in
//     an unsigned mesh a refused honest update would stall the gate for
//     good, and honest norms do swing (plain SGD with a large rate, a
//     partition's halves scaling by their own sizes: a factor of 10 refused
//     honest updates in the simulator's fault scenario);
//   - with Clip, centered clipping (Karimireddy, He and Jaggi, "Learning
//     from History for Byzantine Robust Optimization", ICML 2021) pulls each
//     accepted update x from another member toward a centre v, the running
//     mean of what the node accepted: x' = v + (x − v)·min(1, τ/‖x − v‖),
//     with τ = ClipFactor times the median of recent distances ‖x − v‖. The
//     paper clips worker momenta around the previous aggregate at a server;
//     here each node clips the updates it receives around its own centre.
//     An update within τ of the centre is applied unchanged.
//
// The screen's state is the node's own (its windows and centre depend on
// what it accepted, in arrival order), so it is deterministic for a given
// sequence of events, but two nodes may judge a borderline update
// differently. With Clip on, views are therefore not bit-identical across
// nodes even at staleness 0; without it, honest updates never come near the
// bound and views stay identical.
//
// A node holds no reference before it has accepted or made an update: the
// first update it accepts is checked for finite values only.

// RejectNaN counts updates holding a NaN or infinite value.
const RejectNaN RejectReason = "nan"

// RobustConfig tunes the screen of incoming updates. The zero value is the
// default: NaN refusal, a norm bound of 100 times the recent median in a
// signed mesh (none in an unsigned one), no clipping.
type RobustConfig struct {
	// NormFactor is the bound on an update's norm as a multiple of the
	// median norm of recent accepted updates; 0 means 100 in a signed mesh
	// and no bound in an unsigned one; a positive value applies in both; a
	// negative value turns the bound off.
	NormFactor float64
	// NormWindow is how many recent accepted updates the median is taken
	// over; 0 means 64.
	NormWindow int
	// Clip turns on centered clipping of other members' updates.
	Clip bool
	// ClipFactor sets the clipping radius τ as a multiple of the median
	// distance of recent updates from the centre; 0 means 1, which clips
	// about half of the honest updates a little (measured on rcv1: 1.3 to
	// 1.9 points of accuracy in a mesh without an attacker) and holds a
	// member sending −5 times honest updates to within a point.
	ClipFactor float64
	// ClipMomentum is the weight β of the centre's running mean,
	// v ← β·v + (1−β)·x'; 0 means 0.9.
	ClipMomentum float64
}

// Robust is one node's screen of incoming updates: its settings and the
// history the bounds are derived from. A Robust belongs to one node; give
// each node its own (NewRobust), or leave Config.Robust nil for the
// defaults.
type Robust struct {
	cfg RobustConfig
	// unsignedToo is set when NormFactor was given explicitly.
	unsignedToo bool
	norms       window
	dists       window
	// center is v, dense over the model's parameters once clipping starts;
	// centerSq is ‖v‖².
	center   []float64
	centerSq float64
	clipped  uint64
}

// NewRobust returns a screen with settings c, validated and defaulted.
func NewRobust(c RobustConfig) (*Robust, error) {
	switch {
	case math.IsNaN(c.NormFactor) || math.IsInf(c.NormFactor, 0) || (c.NormFactor > 0 && c.NormFactor < 1):
		return nil, fmt.Errorf("node: norm factor must be >= 1 (or <= 0), got %v", c.NormFactor)
	case c.NormWindow < 0:
		return nil, fmt.Errorf("node: norm window must be >= 0, got %d", c.NormWindow)
	case !(c.ClipFactor >= 0) || math.IsInf(c.ClipFactor, 0):
		return nil, fmt.Errorf("node: clip factor must be finite and >= 0, got %v", c.ClipFactor)
	case !(c.ClipMomentum >= 0 && c.ClipMomentum < 1):
		return nil, fmt.Errorf("node: clip momentum must be in [0, 1), got %v", c.ClipMomentum)
	}
	unsignedToo := c.NormFactor > 0
	if c.NormFactor == 0 {
		c.NormFactor = 100
	}
	if c.NormWindow == 0 {
		c.NormWindow = 64
	}
	if c.ClipFactor == 0 {
		c.ClipFactor = 1
	}
	if c.ClipMomentum == 0 {
		c.ClipMomentum = 0.9
	}
	return &Robust{cfg: c, unsignedToo: unsignedToo, norms: newWindow(c.NormWindow), dists: newWindow(c.NormWindow)}, nil
}

// Config returns the screen's settings, defaults filled in.
func (r *Robust) Config() RobustConfig { return r.cfg }

// Clipped returns how many updates centered clipping has changed.
func (r *Robust) Clipped() uint64 { return r.clipped }

// NormBound returns the norm above which an update is refused now in a
// signed mesh, or 0 when no bound applies (turned off, or no reference
// yet).
func (r *Robust) NormBound() float64 {
	if r.cfg.NormFactor < 0 || r.norms.len() == 0 {
		return 0
	}
	return r.cfg.NormFactor * r.norms.median()
}

// screen returns the node's screen, creating the default one on first use.
func (n *Node) screen() *Robust {
	if n.cfg.Robust == nil {
		// The zero config is valid.
		n.cfg.Robust, _ = NewRobust(RobustConfig{})
	}
	return n.cfg.Robust
}

// frameReason names why the codec refused a frame: RejectNaN when it held
// a value that is not finite, RejectBadFrame for anything else.
func frameReason(err error) RejectReason {
	if errors.Is(err, codec.ErrNotFinite) {
		return RejectNaN
	}
	return RejectBadFrame
}

// finite reports whether every value of u is finite.
func finite(u codec.Sparse) bool {
	for _, v := range u.Values {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return false
		}
	}
	return true
}

func l2(u codec.Sparse) float64 {
	var s float64
	for _, v := range u.Values {
		s += float64(v) * float64(v)
	}
	return math.Sqrt(s)
}

// check screens another member's decoded update u against the norm bound
// (in a signed mesh, or when the factor was given) and, with clipping,
// returns the clipped update to apply. size is the number of model
// parameters. u is not modified (it may be shared through a DecodeCache).
func (r *Robust) check(u codec.Sparse, size int, signed bool) (codec.Sparse, RejectReason) {
	return r.checkNorm(u, l2(u), size, signed)
}

// checkNorm is check for an update whose norm is known (a decode cache
// computes it once for the nodes sharing it).
func (r *Robust) checkNorm(u codec.Sparse, norm float64, size int, signed bool) (codec.Sparse, RejectReason) {
	if reason := r.admitNorm(norm, signed); reason != "" {
		return codec.Sparse{}, reason
	}
	if r.cfg.Clip {
		u = r.clip(u, size, true)
	}
	return u, ""
}

// admitNorm is check's norm bound alone: the norm joins the window unless
// it is refused. What else check does (clipping) needs the update itself,
// which a simulated core that does not clip never reads: the update is
// shared by every core, and its first read by each was a cache miss.
func (r *Robust) admitNorm(norm float64, signed bool) RejectReason {
	if b := r.NormBound(); b > 0 && norm > b && (signed || r.unsignedToo) {
		return RejectNorm
	}
	r.pushNorm(norm)
	return ""
}

// own records the node's own update, which is trusted: its norm joins the
// window and, with clipping, it moves the centre unclipped.
func (r *Robust) own(u codec.Sparse, size int) {
	r.pushNorm(l2(u))
	if r.cfg.Clip {
		r.clip(u, size, false)
	}
}

// pushNorm adds an accepted update's norm to the window. Empty updates
// carry no scale and are left out, so that a member sending nothing cannot
// pull the median to zero.
func (r *Robust) pushNorm(norm float64) {
	if norm > 0 {
		r.norms.push(norm)
	}
}

// clip returns x' = v + (x − v)·min(1, τ/‖x − v‖) (x itself when clip is
// false or x is within τ) and moves the centre toward x'.
func (r *Robust) clip(u codec.Sparse, size int, clip bool) codec.Sparse {
	if r.center == nil {
		r.center = make([]float64, size)
	}
	v := r.center
	// ‖x − v‖² over x's keys plus ‖v‖² off them.
	d2 := r.centerSq
	each(u, func(k int, x float64) {
		d2 += (x-v[k])*(x-v[k]) - v[k]*v[k]
	})
	dist := math.Sqrt(max(d2, 0))
	out := u
	if tau := r.cfg.ClipFactor * r.dists.median(); clip && r.dists.len() > 0 && dist > tau {
		s := tau / dist
		dense := make([]float32, size)
		for i, c := range v {
			dense[i] = float32((1 - s) * c)
		}
		each(u, func(k int, x float64) { dense[k] += float32(s * x) })
		out = codec.Sparse{Values: dense}
		r.clipped++
		dist = tau
	}
	r.dists.push(dist)
	// v ← β·v + (1−β)·x'.
	beta := r.cfg.ClipMomentum
	for i := range v {
		v[i] *= beta
	}
	each(out, func(k int, x float64) { v[k] += (1 - beta) * x })
	var sq float64
	for _, c := range v {
		sq += c * c
	}
	r.centerSq = sq
	return out
}

// each calls f on every (index, value) of u, dense or sparse.
func each(u codec.Sparse, f func(k int, x float64)) {
	if u.Dense() {
		for i, x := range u.Values {
			f(i, float64(x))
		}
		return
	}
	for i, k := range u.Keys {
		f(int(k), float64(u.Values[i]))
	}
}

// window is a ring of the last n values with a median. sorted holds the
// same values in order, kept so on each push (a remove and an insert)
// rather than sorted again for each median: a core asks for the median of
// every update it checks.
type window struct {
	vals   []float64
	next   int
	full   bool
	sorted []float64
}

func newWindow(n int) window {
	return window{vals: make([]float64, n), sorted: make([]float64, 0, n)}
}

func (w *window) len() int {
	if w.full {
		return len(w.vals)
	}
	return w.next
}

func (w *window) push(x float64) {
	if w.full {
		// The value that leaves and the one that comes: only the values
		// between their places move, by one, where a delete and an insert
		// moved up to the whole window twice (every update accepted).
		i, _ := slices.BinarySearch(w.sorted, w.vals[w.next])
		j, _ := slices.BinarySearch(w.sorted, x)
		if j > i {
			copy(w.sorted[i:j-1], w.sorted[i+1:j])
			w.sorted[j-1] = x
		} else {
			copy(w.sorted[j+1:i+1], w.sorted[j:i])
			w.sorted[j] = x
		}
	} else {
		i, _ := slices.BinarySearch(w.sorted, x)
		w.sorted = slices.Insert(w.sorted, i, x)
	}
	w.vals[w.next] = x
	w.next++
	if w.next == len(w.vals) {
		w.next, w.full = 0, true
	}
}

// median returns the median of the values held (the lower middle one for
// an even count), 0 when empty.
func (w *window) median() float64 {
	n := w.len()
	if n == 0 {
		return 0
	}
	return w.sorted[(n-1)/2]
}
