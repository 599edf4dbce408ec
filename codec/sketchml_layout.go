package codec

import "unsafe"

// SketchML group layouts: how each side's buckets are cut into groups,
// and what a sparse frame's layout makes its decoder allocate.

// groupInfo describes one group of buckets.
type groupInfo struct {
	first int  // bucket id of the group's rank 0
	width int  // buckets in the group
	bits  uint // bits per cell
}

// groupWidths cuts each side's buckets into groups as the configuration
// says and returns the group widths of the positive and negative sides.
func (c *SketchML) groupWidths(qz *quantization) (pos, neg []int) {
	side := func(first, q int) []int {
		var ws []int
		if q == 0 {
			return ws
		}
		groups := ceilDiv(q, c.width)
		if c.cfg.GroupLayout == GroupsEqualWidth || groups == 1 {
			for j := 0; j < q; j += c.width {
				ws = append(ws, min(c.width, q-j))
			}
			return ws
		}
		// From the largest bucket down, each group takes buckets until it
		// holds its share of the energy left, leaving at least one bucket
		// for every group still to come.
		total := 0.0
		for b := first; b < first+q; b++ {
			total += qz.energy[b]
		}
		ws = make([]int, groups)
		top := first + q // one past the next bucket to take
		for g := groups - 1; g >= 0; g-- {
			share := total / float64(g+1)
			e, width := 0.0, 0
			for top-width > first+g && (width == 0 || e < share) {
				width++
				e += qz.energy[top-width]
			}
			if g == 0 {
				width = top - first
			}
			ws[g] = width
			top -= width
			total -= e
		}
		return ws
	}
	return side(0, qz.qpos), side(qz.qpos, qz.qneg)
}

// groupsOf lays out the key lists of groups with the given widths: list 0
// is zeros, then the positive groups, then the negative ones.
func groupsOf(pos, neg []int) []groupInfo {
	gs := make([]groupInfo, 1, 1+len(pos)+len(neg))
	first := 0
	for _, ws := range [2][]int{pos, neg} {
		for _, w := range ws {
			gs = append(gs, groupInfo{first: first, width: w, bits: bitsFor(w - 1)})
			first += w
		}
	}
	return gs
}

// Per-list decoder state, counted in the decode budget.
const (
	listDecoderSize = int(unsafe.Sizeof(listDecoder{}))
	groupInfoSize   = int(unsafe.Sizeof(groupInfo{}))
	listQuerySize   = int(unsafe.Sizeof(listQuery{}))
)

// sketchNeed is what decodeSketchML allocates for a sparse frame, computed
// identically by the encoder (to pad) and the decoder (to refuse).
func sketchNeed(n, nb, lists int, keyHuff, cellHuff bool, cellTable int) int {
	need := allocCost(8*n) + allocCost(4*n) + allocCost(4*nb)
	// Per-list state and group layout, and the merge tree when there are
	// more lists than the linear merge takes (at most 2 leaves a list:
	// heads 8 bytes, leaf and tree 4 each, win 8).
	need += allocCost(lists*listDecoderSize) + allocCost(lists*groupInfoSize) + allocCost(lists*listQuerySize)
	if lists > linearMerge {
		need += 2*allocCost(16*lists) + 2*allocCost(8*lists) + allocCost(16*lists)
	}
	if keyHuff {
		need += huffDecoderAlloc
	}
	if cellHuff {
		need += huffDecoderAlloc + allocCost(cellTable+4)
	}
	return need
}
