package node

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/sketchmesh/sketchmesh/codec"
)

// Budgets and update prioritization.
//
// With a budget (Config.BudgetBytes), an update whose frame would be larger
// is cut: the node ranks the update's keys by priority, sends the longest
// prefix of that ranking whose frame fits, and keeps the rest in its error
// feedback residual, so that a key cut now rides with the key's next update
// (the seed paper's update prioritization, section 3.3). What is sent is an
// ordinary frame: every receiver applies exactly what it decodes, and the
// sender applies the same, so views stay identical whatever is cut.
//
// PriorityAbsolute ranks keys by |δ_k|, the accumulated change with its
// residual; PriorityRelative by |δ_k| / |w_k|, the change relative to the
// weight in the view (a weight still 0 ranks first); PriorityOff keeps key
// order, a baseline that cuts without looking at values.

// PriorityMode names how a budget ranks an update's keys.
type PriorityMode string

// The priority modes.
const (
	PriorityOff      PriorityMode = "off"
	PriorityAbsolute PriorityMode = "absolute"
	PriorityRelative PriorityMode = "relative"
)

// ErrBudget is returned by New for a budget it cannot honour.
var ErrBudget = errors.New("bad update budget")

// MinBudgetBytes returns the smallest budget c can honour: the frame of an
// update without keys.
func MinBudgetBytes(c codec.Codec) (int, error) {
	frame, err := c.Encode(nil, codec.Sparse{Keys: []uint64{}, Values: []float32{}})
	if err != nil {
		return 0, fmt.Errorf("encode an empty frame: %w", err)
	}
	return len(frame), nil
}

// checkBudget validates and fills the budget settings of cfg.
func checkBudget(cfg *Config) error {
	switch cfg.Priority {
	case "":
		cfg.Priority = PriorityAbsolute
	case PriorityOff, PriorityAbsolute, PriorityRelative:
	default:
		return fmt.Errorf("%w: unknown priority %q (want off, absolute or relative)", ErrBudget, cfg.Priority)
	}
	if cfg.BudgetBytes == 0 {
		return nil
	}
	least, err := MinBudgetBytes(cfg.Codec)
	if err != nil {
		return err
	}
	switch {
	case cfg.BudgetBytes < least:
		return fmt.Errorf("%w: %d bytes is below one frame (%d bytes with codec %s)", ErrBudget, cfg.BudgetBytes, least, cfg.Codec.Name())
	case !cfg.ErrorFeedback:
		return fmt.Errorf("%w: what a budget cuts is kept in the error feedback residual; turn error feedback on", ErrBudget)
	case cfg.Factors != FactorsOff:
		return fmt.Errorf("%w: factor frames cannot be cut; use factors off", ErrBudget)
	}
	return nil
}

// SetBudget sets the byte budget of this node's next frames (0: none), for
// a driver that follows its links' measured throughput (AutoBudget,
// LinkRate): the budget is this node's own choice, since receivers apply
// whatever frame arrives. A budget Config.BudgetBytes would refuse is an
// error and changes nothing.
func (n *Node) SetBudget(bytes int) error {
	cfg := n.cfg
	cfg.BudgetBytes = bytes
	if err := checkBudget(&cfg); err != nil {
		return fmt.Errorf("set budget: %w", err)
	}
	n.cfg.BudgetBytes = bytes
	return nil
}

// Budget returns the byte budget of this node's frames (0: none).
func (n *Node) Budget() int { return n.cfg.BudgetBytes }

// LeastBudget returns the smallest budget this node's codec can honour
// (MinBudgetBytes), 0 when it cannot cut its frames.
func (n *Node) LeastBudget() int {
	least, err := MinBudgetBytes(n.cfg.Codec)
	if err != nil {
		return 0
	}
	return least
}

// fitBudget returns the part of intended to send and its frame: intended
// and frame when the frame fits the budget, else the highest-ranked keys
// whose frame does.
func (n *Node) fitBudget(intended codec.Sparse, frame []byte) (codec.Sparse, []byte, error) {
	budget := n.cfg.BudgetBytes
	if budget == 0 || len(frame) <= budget || intended.Dense() {
		return intended, frame, nil
	}
	order := n.rank(intended)
	n.stats.BudgetCuts++
	// The frame's size is close to proportional to its pairs: scale the
	// count to the budget and shrink it until the frame fits (a few
	// encodings), which always ends, at worst with no keys.
	k := len(order) * budget / len(frame)
	for {
		part := pick(intended, order[:k])
		f, err := n.cfg.Codec.Encode(nil, part)
		if err != nil {
			return codec.Sparse{}, nil, err
		}
		if len(f) <= budget || k == 0 {
			return part, f, nil
		}
		k = min(k-1, k*budget/len(f)*15/16)
	}
}

// rank returns the indices of intended's pairs, most valuable first; ties
// keep key order, so the ranking is a function of the values alone.
func (n *Node) rank(intended codec.Sparse) []int {
	order := make([]int, len(intended.Keys))
	for i := range order {
		order[i] = i
	}
	if n.cfg.Priority == PriorityOff {
		return order
	}
	score := make([]float64, len(order))
	view := n.view()
	for i, v := range intended.Values {
		score[i] = math.Abs(float64(v))
		if n.cfg.Priority == PriorityRelative {
			if w := math.Abs(view[intended.Keys[i]]); w > 0 {
				score[i] /= w
			} else {
				score[i] = math.Inf(1)
			}
		}
	}
	slices.SortStableFunc(order, func(a, b int) int {
		switch {
		case score[a] > score[b]:
			return -1
		case score[a] < score[b]:
			return 1
		}
		return 0
	})
	return order
}

// pick returns the pairs of u at the given indices, in key order.
func pick(u codec.Sparse, idx []int) codec.Sparse {
	sorted := slices.Clone(idx)
	slices.Sort(sorted)
	out := codec.Sparse{Keys: make([]uint64, len(sorted)), Values: make([]float32, len(sorted))}
	for i, j := range sorted {
		out.Keys[i], out.Values[i] = u.Keys[j], u.Values[j]
	}
	return out
}
