package codec

import (
	"fmt"
	"math"
)

// The k-way merge of a sparse frame's sorted key lists: a linear scan of
// the heads for few lists, a tree of losers for many.

// mergeLists merges the sorted key lists into keys, checking that they come
// out strictly ascending, and stores each key's list index in ids.
func mergeLists(lists []listDecoder, keys []uint64, ids []uint32) error {
	live := 0
	for l := range lists {
		if lists[l].count > 0 {
			live++
		}
	}
	if live <= linearMerge {
		return mergeLinear(lists, keys, ids)
	}
	return mergeTree(lists, live, keys, ids)
}

// loadHeads puts the first key of every non-empty list in heads, and the
// list's index in leaf, in list order; it returns how many it loaded.
func loadHeads(lists []listDecoder, heads []uint64, leaf []int32) (int, error) {
	k := 0
	for l := range lists {
		ld := &lists[l]
		if ld.count == 0 {
			continue
		}
		key, err := ld.refill()
		if err != nil {
			return 0, fmt.Errorf("list %d: %w", l, err)
		}
		heads[k], leaf[k] = key, int32(l)
		k++
	}
	return k, nil
}

// mergeLinear merges up to linearMerge lists by scanning their heads.
// Exhausted lists hold MaxUint64 and list -1.
func mergeLinear(lists []listDecoder, keys []uint64, ids []uint32) error {
	var heads [linearMerge]uint64
	var leaf [linearMerge]int32
	for i := range heads {
		heads[i], leaf[i] = math.MaxUint64, -1
	}
	k, err := loadHeads(lists, heads[:], leaf[:])
	if err != nil {
		return err
	}
	prevKey := uint64(0)
	for i := range keys {
		var c int32
		if k <= 8 {
			c = argmin8((*[8]uint64)(heads[:8]))
		} else {
			c = argmin16(&heads)
		}
		c &= linearMerge - 1
		li := leaf[c]
		if li < 0 {
			// Every head is MaxUint64; at most one can be a real key.
			for x := range k {
				if leaf[x] >= 0 {
					c, li = int32(x), leaf[x]
					break
				}
			}
			if li < 0 {
				return fmt.Errorf("%w: key lists ran out after %d keys", ErrCorrupt, i)
			}
		}
		bk := heads[c]
		if bk <= prevKey && i > 0 {
			return fmt.Errorf("%w: key %d follows key %d (keys out of order or repeated across lists)", ErrCorrupt, bk, prevKey)
		}
		prevKey = bk
		keys[i] = bk
		ids[i] = uint32(li)
		ld := &lists[li]
		key, ok, err := ld.next()
		if err != nil {
			return fmt.Errorf("list %d: %w", li, err)
		}
		if ok {
			heads[c] = key
		} else {
			heads[c], leaf[c] = math.MaxUint64, -1
		}
	}
	return nil
}

// mergeTree merges many lists with a tree of losers: leaf i holds the head
// key of list leaf[i] (padding leaves and exhausted lists hold MaxUint64
// and list -1) and tree[node] the loser of the match at node, so each key
// costs one replay up the tree.
func mergeTree(lists []listDecoder, live int, keys []uint64, ids []uint32) error {
	k := 1
	for k < live {
		k <<= 1
	}
	heads := make([]uint64, k)
	leaf := make([]int32, k)
	tree := make([]int32, k)
	win := make([]int32, 2*k)
	j, err := loadHeads(lists, heads, leaf)
	if err != nil {
		return err
	}
	for ; j < k; j++ {
		heads[j], leaf[j] = math.MaxUint64, -1
	}
	for i := range k {
		win[k+i] = int32(i)
	}
	for node := k - 1; node >= 1; node-- {
		a, b := win[2*node], win[2*node+1]
		if heads[b] < heads[a] {
			a, b = b, a
		}
		win[node], tree[node] = a, b
	}
	cur := win[1]
	prevKey := uint64(0)
	for i := range keys {
		if leaf[cur] < 0 {
			// Every head is MaxUint64; at most one can be a real key.
			for x := range k {
				if leaf[x] >= 0 {
					cur = int32(x)
					break
				}
			}
			if leaf[cur] < 0 {
				return fmt.Errorf("%w: key lists ran out after %d keys", ErrCorrupt, i)
			}
		}
		bk := heads[cur]
		if bk <= prevKey && i > 0 {
			return fmt.Errorf("%w: key %d follows key %d (keys out of order or repeated across lists)", ErrCorrupt, bk, prevKey)
		}
		prevKey = bk
		li := leaf[cur]
		keys[i] = bk
		ids[i] = uint32(li)
		ld := &lists[li]
		key, ok, err := ld.next()
		if err != nil {
			return fmt.Errorf("list %d: %w", li, err)
		}
		if ok {
			heads[cur] = key
		} else {
			heads[cur], leaf[cur] = math.MaxUint64, -1
		}
		cur = replay(tree, heads, cur, int32(k))
	}
	return nil
}

// linearMerge is the most lists merged by a linear scan of the heads, which
// for few lists costs less than a replay up the tree.
const linearMerge = 16

// minOf2 returns the smaller of two (key, index) pairs; the shape compiles
// to conditional moves.
func minOf2(ka uint64, ia int32, kb uint64, ib int32) (uint64, int32) {
	if kb < ka {
		ia = ib
	}
	return min(ka, kb), ia
}

// argmin8 returns the index of the smallest of eight heads by a tournament
// whose independent matches run in parallel. Unused heads hold MaxUint64.
func argmin8(h *[8]uint64) int32 {
	k0, i0 := minOf2(h[0], 0, h[1], 1)
	k1, i1 := minOf2(h[2], 2, h[3], 3)
	k2, i2 := minOf2(h[4], 4, h[5], 5)
	k3, i3 := minOf2(h[6], 6, h[7], 7)
	k0, i0 = minOf2(k0, i0, k1, i1)
	k2, i2 = minOf2(k2, i2, k3, i3)
	_, i0 = minOf2(k0, i0, k2, i2)
	return i0
}

// argmin16 is argmin8 for sixteen heads.
func argmin16(h *[16]uint64) int32 {
	a := argmin8((*[8]uint64)(h[:8]))
	b := argmin8((*[8]uint64)(h[8:])) + 8
	_, i := minOf2(h[a&15], a, h[b&15], b)
	return i
}

// replay plays leaf cur's new head up the tree of losers and returns the
// new winner. It is written so the compiler uses conditional moves: the
// comparisons are unpredictable. Inlined, the compiler turns the selection
// back into a branch, hence noinline.
//
//go:noinline
func replay(tree []int32, heads []uint64, cur, k int32) int32 {
	wk := heads[cur]
	for node := (cur + k) >> 1; node > 0; node >>= 1 {
		l := tree[node]
		lk := heads[l]
		nw, nl := cur, l
		if lk < wk {
			nw, nl = l, cur
		}
		tree[node] = nl
		cur = nw
		wk = min(wk, lk)
	}
	return cur
}
