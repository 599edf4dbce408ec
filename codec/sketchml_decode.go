package codec

import (
	"fmt"
	"math"
	"math/bits"
	"sync"
	"unsafe"
)

// Decoding SketchML's sparse frames: the key lists are read in batches,
// merged into ascending order, and each key's value read from its group's
// sketch.

// keyBatch is how many keys the decoder takes from a list at a time: enough
// to run the key decoders in tight loops, small enough to stay in cache.
const keyBatch = 32

// listDecoder is the decoding state of one key list.
type listDecoder struct {
	keys    keyReader
	buf     [keyBatch]uint64
	bpos    int
	bn      int
	count   int
	t       int
	keyLen  int
	cellLen int
}

// listQuery is what the second decoding pass needs to value a list's keys.
type listQuery struct {
	vals  []float32 // signed representative per rank
	cells cellTable
}

// zeroVals is the one representative of the zero list.
var zeroVals = []float32{0}

func decodeSketchML(body []byte) (Sparse, error) {
	frameLen := len(body) + headerLen
	p := parser{b: body}
	flags := p.byte("flags")
	if p.err != nil {
		return Sparse{}, p.err
	}
	if flags&^smFlagsKnown != 0 {
		return Sparse{}, fmt.Errorf("%w: unknown flags %#x", ErrCorrupt, flags)
	}
	if flags&smFlagDense != 0 {
		return decodeSketchDense(&p, flags, frameLen)
	}
	if flags&smFlagDenseZero != 0 {
		return Sparse{}, fmt.Errorf("%w: flags %#x: zero-symbol flag on a sparse frame", ErrCorrupt, flags)
	}
	keyHuff := flags&smFlagKeyHuffman != 0
	cellHuff := flags&smFlagCellHuff != 0
	n := p.count("pair count n", maxCount)
	qpos := p.count("positive bucket count", maxQuantiles)
	qneg := p.count("negative bucket count", maxQuantiles)
	gpos := p.count("positive group count", maxQuantiles)
	gneg := p.count("negative group count", maxQuantiles)
	if p.err != nil {
		return Sparse{}, p.err
	}
	nb := qpos + qneg
	switch {
	case nb > maxQuantiles:
		return Sparse{}, fmt.Errorf("%w: q=%d buckets (%d positive, %d negative) exceeds %d", ErrCorrupt, nb, qpos, qneg, maxQuantiles)
	case gpos > qpos || gneg > qneg || (gpos == 0) != (qpos == 0) || (gneg == 0) != (qneg == 0):
		return Sparse{}, fmt.Errorf("%w: r=%d+%d groups cannot cut %d+%d buckets", ErrCorrupt, gpos, gneg, qpos, qneg)
	}
	// Every group takes at least a width byte and a list header byte.
	nl := 1 + gpos + gneg
	if 2*nl > len(p.b) {
		return Sparse{}, fmt.Errorf("%w: %d key lists need at least %d bytes, frame has %d", ErrCorrupt, nl, 2*nl, len(p.b))
	}
	if err := checkBudget(sketchNeed(n, nb, nl, keyHuff, cellHuff, 0), frameLen, "pairs"); err != nil {
		return Sparse{}, err
	}
	gs := make([]groupInfo, nl)
	w := 1 // widest group
	for side, q := range [2]int{qpos, qneg} {
		sum, first := 0, 0
		if side == 1 {
			first = qpos
		}
		for l := range [2]int{gpos, gneg}[side] {
			g := &gs[1+l+side*gpos]
			g.width = p.count("group width", maxQuantiles)
			if p.err == nil && g.width < 1 {
				p.fail("group width 0")
			}
			g.first, g.bits = first+sum, bitsFor(g.width-1)
			sum += g.width
			w = max(w, g.width)
		}
		if p.err == nil && sum != q {
			p.fail("group widths sum to %d, want %d buckets", sum, q)
		}
	}
	s := int(p.byte("rows s"))
	seed := p.uint64("hash seed")
	if p.err != nil {
		return Sparse{}, p.err
	}
	if s < 1 || s > maxRows {
		return Sparse{}, fmt.Errorf("%w: rows s=%d outside [1, %d]", ErrCorrupt, s, maxRows)
	}
	vals := make([]float32, nb)
	parseReps(&p, vals[:qpos], false)
	parseReps(&p, vals[qpos:], true)
	var gapDec, cellDec *huffDecoder
	var err error
	if keyHuff && p.err == nil {
		if gapDec, p.b, err = parseHuffTable(p.b, gapSymbols, "gap"); err != nil {
			return Sparse{}, err
		}
	}
	if cellHuff && p.err == nil {
		if cellDec, p.b, err = parseHuffTable(p.b, w, "cell"); err != nil {
			releaseHuff(gapDec)
			return Sparse{}, err
		}
	}
	defer releaseHuff(gapDec, cellDec)
	if p.err != nil {
		return Sparse{}, p.err
	}

	lists := make([]listDecoder, nl)
	queries := make([]listQuery, nl)
	total, payload, cellTableLen := 0, 0, 0
	keyCoder := keyCodeDeltaBinary
	if keyHuff {
		keyCoder = keyCodeHuffman
	}
	for l := range lists {
		ld := &lists[l]
		ld.count = p.count("list key count", maxCount)
		if p.err != nil {
			return Sparse{}, p.err
		}
		if ld.count == 0 {
			continue
		}
		total += ld.count
		ld.keyLen = p.count("key list length", uint64(len(body)))
		if p.err == nil && ld.count > maxKeys(keyCoder, ld.keyLen) {
			p.fail("list %d claims %d keys in %d bytes", l, ld.count, ld.keyLen)
		}
		payload += ld.keyLen
		if l > 0 && gs[l].bits > 0 {
			ld.t = p.count("sketch columns t", maxColumns)
			if p.err == nil && ld.t < 1 {
				p.fail("list %d: sketch columns t=0", l)
			}
			cells := s * ld.t
			packed := (cells*int(gs[l].bits) + 7) / 8
			if cellHuff {
				ld.cellLen = p.count("cell stream length", uint64(len(body)))
				if p.err == nil && cells > 8*ld.cellLen {
					p.fail("list %d: %d cells cannot fit in %d bytes", l, cells, ld.cellLen)
				}
				cellTableLen += packed
			} else {
				ld.cellLen = packed
			}
			payload += ld.cellLen
		}
		if p.err != nil {
			return Sparse{}, p.err
		}
		if payload > len(p.b) {
			return Sparse{}, fmt.Errorf("%w: list payloads need at least %d bytes, frame has %d", ErrCorrupt, payload, len(p.b))
		}
	}
	if total != n {
		return Sparse{}, fmt.Errorf("%w: key lists hold %d keys, header says n=%d", ErrCorrupt, total, n)
	}
	if err := checkBudget(sketchNeed(n, nb, nl, keyHuff, cellHuff, cellTableLen), frameLen, "cells"); err != nil {
		return Sparse{}, err
	}
	var cellMem []byte
	if cellHuff {
		cellMem = make([]byte, cellTableLen+4)
	}
	queries[0].vals = zeroVals
	for l := range lists {
		ld := &lists[l]
		if ld.count == 0 {
			continue
		}
		kp := p.bytes(ld.keyLen, "key list")
		if ld.keys, err = newKeyReader(keyCoder, kp, ld.count, gapDec); err != nil {
			return Sparse{}, fmt.Errorf("list %d: %w", l, err)
		}
		if l == 0 {
			continue
		}
		g := gs[l]
		q := &queries[l]
		q.vals = vals[g.first : g.first+g.width]
		if g.bits == 0 {
			continue
		}
		// The cell table's slice runs to the end of its buffer, so a 4-byte
		// load at any cell stays in bounds except in the buffer's last bytes;
		// the bits beyond the cells are masked off.
		ext := p.b
		cp := p.bytes(ld.cellLen, "cells")
		q.cells = cellTable{t: uint32(ld.t), nbits: uint32(g.bits), mask: 1<<g.bits - 1}
		cells := s * ld.t
		if !cellHuff {
			if r := cells * int(g.bits) % 8; r != 0 && cp[len(cp)-1]>>r != 0 {
				return Sparse{}, fmt.Errorf("%w: list %d: cell padding bits are not zero", ErrCorrupt, l)
			}
			q.cells.data = ext
			continue
		}
		packed := (cells*int(g.bits) + 7) / 8
		bw := bitWriter{buf: cellMem[:0:packed]}
		br := newBitReader(cp)
		for range cells {
			v, ok := cellDec.next(&br)
			if !ok || v >= g.width {
				return Sparse{}, fmt.Errorf("%w: list %d: invalid cell code", ErrCorrupt, l)
			}
			bw.write(uint64(v), g.bits)
		}
		if err := br.finish(); err != nil {
			return Sparse{}, fmt.Errorf("list %d cells: %w", l, err)
		}
		bw.flush()
		q.cells.data = cellMem
		cellMem = cellMem[packed:]
	}
	if p.err != nil {
		return Sparse{}, p.err
	}
	if err := checkPadding(p.b); err != nil {
		return Sparse{}, err
	}

	u := Sparse{Keys: make([]uint64, n), Values: make([]float32, n)}
	if n == 0 {
		return u, nil
	}
	spare := decodeBudget(frameLen) - sketchNeed(n, nb, nl, keyHuff, cellHuff, cellTableLen)
	ok, err := decodeByBitmap(lists, queries, u, seed, s, spare)
	if ok || err != nil {
		return u, err
	}
	// The keys span too wide a range for a bitmap within the budget: decode
	// the lists again and merge them. Pass one merges the lists into Keys
	// and notes each key's list in the memory of Values; pass two replaces
	// the list with the key's value.
	for l := range lists {
		ld := &lists[l]
		if ld.count > 0 {
			ld.keys.rewind()
		}
	}
	ids := unsafe.Slice((*uint32)(unsafe.Pointer(&u.Values[0])), n)
	if err := mergeLists(lists, u.Keys, ids); err != nil {
		return Sparse{}, err
	}
	keys, values := u.Keys, u.Values[:n]
	ids = ids[:n]
	for i, k := range keys {
		id := ids[i]
		q := &queries[id]
		rank := uint32(0)
		if q.cells.nbits != 0 {
			rank = q.cells.query(k, seed, s)
		}
		if rank >= uint32(len(q.vals)) {
			return Sparse{}, fmt.Errorf("%w: list %d: cell value %d exceeds group width %d", ErrCorrupt, id, rank, len(q.vals))
		}
		values[i] = q.vals[rank]
	}
	return u, nil
}

// decodeByBitmap decodes the key lists into u without merging them: each
// list is decoded whole into its own stretch of u.Keys, a bitmap over the
// keys' range (with a count of the keys below each 64-key word) gives each
// key its place in sorted order, the key's value is written there, and the
// sorted keys are read back off the bitmap. A key repeated across lists
// sets a bit twice. It reports false, having written nothing that matters,
// when the bitmap would take more than spare bytes.
func decodeByBitmap(lists []listDecoder, queries []listQuery, u Sparse, seed uint64, rows int, spare int) (bool, error) {
	keys, values := u.Keys, u.Values
	lo, hi := uint64(math.MaxUint64), uint64(0)
	at := 0
	for l := range lists {
		ld := &lists[l]
		if ld.count == 0 {
			continue
		}
		seg := keys[at : at+ld.count]
		at += ld.count
		if err := ld.keys.batch(seg); err != nil {
			return false, fmt.Errorf("list %d: %w", l, err)
		}
		if err := ld.keys.finish(); err != nil {
			return false, fmt.Errorf("list %d: %w", l, err)
		}
		// A list's keys ascend unless a gap wrapped past 2^64.
		for i := 1; i < len(seg); i++ {
			if seg[i] <= seg[i-1] {
				return false, fmt.Errorf("%w: list %d: key %d follows key %d (keys out of order)", ErrCorrupt, l, seg[i], seg[i-1])
			}
		}
		lo, hi = min(lo, seg[0]), max(hi, seg[len(seg)-1])
	}
	span := hi - lo
	if span/64 >= uint64(spare)/16 {
		return false, nil
	}
	words := int(span/64) + 1
	if allocCost(8*words)+allocCost(4*words) > spare {
		return false, nil
	}
	sc := bitmapScratches.Get().(*bitmapScratch)
	defer bitmapScratches.Put(sc)
	bitmap, below := sc.take(words)
	for i, k := range keys {
		off := k - lo
		w, bit := off>>6, uint64(1)<<(off&63)
		if bitmap[w]&bit != 0 {
			return false, fmt.Errorf("%w: key %d is in two key lists", ErrCorrupt, keys[i])
		}
		bitmap[w] |= bit
	}
	count := uint32(0)
	for w, b := range bitmap {
		below[w] = count
		count += uint32(bits.OnesCount64(b))
	}
	at = 0
	for l := range lists {
		ld := &lists[l]
		if ld.count == 0 {
			continue
		}
		seg := keys[at : at+ld.count]
		at += ld.count
		q := &queries[l]
		width := uint32(len(q.vals))
		for _, k := range seg {
			rank := uint32(0)
			if q.cells.nbits != 0 {
				rank = q.cells.query(k, seed, rows)
			}
			if rank >= width {
				return false, fmt.Errorf("%w: list %d: cell value %d exceeds group width %d", ErrCorrupt, l, rank, width)
			}
			off := k - lo
			w := off >> 6
			pos := below[w] + uint32(bits.OnesCount64(bitmap[w]&(uint64(1)<<(off&63)-1)))
			values[pos] = q.vals[rank]
		}
	}
	i := 0
	for w, b := range bitmap {
		if b == 0 {
			continue
		}
		base := lo + uint64(w)*64
		for b != 0 {
			keys[i] = base + uint64(bits.TrailingZeros64(b))
			i++
			b &= b - 1
		}
	}
	return true, nil
}

// bitmapScratch is decodeByBitmap's bitmap over the keys' range and its
// count of keys below each word, kept between frames: allocating both per
// frame was a tenth of a sparse frame's decode time.
type bitmapScratch struct {
	bitmap []uint64
	below  []uint32
}

var bitmapScratches = sync.Pool{New: func() any { return new(bitmapScratch) }}

// take returns a cleared bitmap of words words and a count slice as long
// (written before it is read).
func (sc *bitmapScratch) take(words int) ([]uint64, []uint32) {
	if cap(sc.bitmap) < words {
		sc.bitmap, sc.below = make([]uint64, words), make([]uint32, words)
	}
	sc.bitmap, sc.below = sc.bitmap[:words], sc.below[:words]
	clear(sc.bitmap)
	return sc.bitmap, sc.below
}

// refill decodes the list's next batch and returns its first key.
func (ld *listDecoder) refill() (uint64, error) {
	m := min(keyBatch, ld.keys.remaining())
	if err := ld.keys.batch(ld.buf[:m]); err != nil {
		return 0, err
	}
	ld.bpos, ld.bn = 1, m
	return ld.buf[0], nil
}

// next returns the list's next key, or ok false once the list is exhausted
// (after checking that its coding ended cleanly).
func (ld *listDecoder) next() (key uint64, ok bool, err error) {
	switch {
	case ld.bpos < ld.bn:
		key = ld.buf[ld.bpos&(keyBatch-1)]
		ld.bpos++
		return key, true, nil
	case ld.keys.remaining() > 0:
		key, err = ld.refill()
		return key, err == nil, err
	default:
		return 0, false, ld.keys.finish()
	}
}
