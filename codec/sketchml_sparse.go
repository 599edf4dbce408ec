package codec

import (
	"encoding/binary"
	"math"
)

// SketchML sparse frames: the key lists (zeros, then each group's keys),
// their coding and the grouped MinMaxSketch cells written after them.

// sparseLists is a sparse update sorted into the frame's key lists: list 0
// holds the zeros, then each group's keys, each list in key order.
type sparseLists struct {
	gs         []groupInfo
	wpos, wneg []int
	offs       []int     // list l is [offs[l], offs[l+1])
	keys       []uint64  // per list position
	ranks      []uint16  // rank within the group
	values     []float32 // the original value; only when columns are searched
	widest     int       // widest group: bounds the cell alphabet
	nb         int       // buckets
}

func (sl *sparseLists) size(l int) int { return sl.offs[l+1] - sl.offs[l] }

// listsOf sorts the update's keys into their lists, checking key order.
func (c *SketchML) listsOf(u Sparse, qz *quantization, withValues bool) (sparseLists, error) {
	n := len(u.Values)
	wpos, wneg := c.groupWidths(qz)
	gs := groupsOf(wpos, wneg)
	nl := len(gs)
	sl := sparseLists{gs: gs, wpos: wpos, wneg: wneg, widest: 1, nb: qz.qpos + qz.qneg}
	for _, g := range gs[1:] {
		sl.widest = max(sl.widest, g.width)
	}
	// Bucket id -> list and rank within the group.
	listOf := make([]uint16, sl.nb+1)
	rankOf := make([]uint16, sl.nb+1)
	sl.offs = make([]int, nl+1)
	for l := 1; l < nl; l++ {
		g := gs[l]
		for r := 0; r < g.width; r++ {
			listOf[g.first+r] = uint16(l)
			rankOf[g.first+r] = uint16(r)
			sl.offs[l+1] += qz.counts[g.first+r]
		}
	}
	sl.offs[1] = qz.zeros
	for l := range nl {
		sl.offs[l+1] += sl.offs[l]
	}
	// Scatter keys into their lists; scanning in key order keeps each list
	// sorted.
	sl.keys = make([]uint64, n)
	sl.ranks = make([]uint16, n)
	if withValues {
		sl.values = make([]float32, n)
	}
	pos := make([]int, nl)
	copy(pos, sl.offs[:nl])
	prev := uint64(0)
	for i, id := range qz.ids {
		k := u.Keys[i]
		if k <= prev && i > 0 {
			return sl, validate(u)
		}
		prev = k
		l := listOf[id]
		sl.keys[pos[l]] = k
		sl.ranks[pos[l]] = rankOf[id]
		if withValues {
			sl.values[pos[l]] = u.Values[i]
		}
		pos[l]++
	}
	return sl, nil
}

// columnsFor is the sketch columns ColumnRatio gives a group of count keys.
func columnsFor(ratio float64, count int) int {
	return max(1, min(int(math.Ceil(ratio*float64(count))), maxColumns))
}

func (c *SketchML) encodeSparse(dst []byte, u Sparse, qz *quantization) ([]byte, frameStats, error) {
	search := c.cfg.TargetError > 0 || c.cfg.ByteBudget > 0
	sl, err := c.listsOf(u, qz, search)
	if err != nil {
		return dst, frameStats{}, err
	}
	ks := c.keyStats(&sl)
	nl := len(sl.gs)
	ts := make([]int, nl)
	for l := 1; l < nl; l++ {
		if sl.size(l) > 0 && sl.gs[l].bits > 0 {
			ts[l] = columnsFor(c.cfg.ColumnRatio, sl.size(l))
		}
	}
	if !search {
		dst, st := c.writeSparse(dst, len(u.Values), qz, &sl, &ks, ts)
		return dst, st, nil
	}
	return c.encodeSearched(dst, u, qz, &sl, &ks)
}

// keyStats are the statistics both key coders are chosen from.
type keyStats struct {
	symHist   [gapSymbols]uint32
	extraBits int
	dbData    []int
	dbWidth   []dbWidths
}

func (c *SketchML) keyStats(sl *sparseLists) keyStats {
	nl := len(sl.gs)
	ks := keyStats{dbData: make([]int, nl), dbWidth: make([]dbWidths, nl)}
	for l := range nl {
		var byteHist [9]int
		prev := uint64(0)
		for i, k := range sl.keys[sl.offs[l]:sl.offs[l+1]] {
			x := k - prev - 1
			if i == 0 {
				x = k
			}
			prev = k
			byteHist[byteLen(x)]++
			sym, eb := gapSymbol(x)
			ks.symHist[sym]++
			ks.extraBits += int(eb)
		}
		ks.dbWidth[l], ks.dbData[l] = chooseWidths(&byteHist)
	}
	return ks
}

// writeSparse builds each group's MinMaxSketch with ts[l] columns, picks
// the coders and appends the frame.
func (c *SketchML) writeSparse(dst []byte, n int, qz *quantization, sl *sparseLists, ks *keyStats, ts []int) ([]byte, frameStats) {
	s := c.cfg.Rows
	seed := c.cfg.Seed
	gs := sl.gs
	nl := len(gs)
	nb := sl.nb
	// Insert keeps the smallest rank (closest to zero), so a query, the
	// largest over rows, never exceeds the truth.
	cells := make([][]uint16, nl)
	cellHist := make([]uint32, sl.widest)
	for l := range nl {
		t := ts[l]
		if t == 0 {
			continue
		}
		cl := make([]uint16, s*t)
		for i := range cl {
			cl[i] = math.MaxUint16
		}
		ranks := sl.ranks[sl.offs[l]:sl.offs[l+1]]
		for i, k := range sl.keys[sl.offs[l]:sl.offs[l+1]] {
			a, b := keyHash(k, seed)
			r := ranks[i]
			for row := range s {
				idx := row*t + int(column(a, b, row, uint32(t)))
				cl[idx] = min(cl[idx], r)
			}
		}
		for i, v := range cl {
			if v == math.MaxUint16 {
				// No key reads an empty cell; zero is the cheapest value.
				cl[i] = 0
			}
			cellHist[cl[i]]++
		}
		cells[l] = cl
	}

	// Sizes of the coders: exact for delta-binary and packed cells, within
	// a byte per list for the Huffman streams.
	gapLens := huffLengths(ks.symHist[:])
	cellLens := huffLengths(cellHist)
	keysDB, keysHuff := 0, huffTableLen(gapLens)+(huffBits(ks.symHist[:], gapLens)+ks.extraBits)/8
	cellsPacked, cellsHuff, cellTable := 0, huffTableLen(cellLens)+huffBits(cellHist, cellLens)/8, 0
	for l := range nl {
		size := sl.size(l)
		if size == 0 {
			continue
		}
		dl := dbPayloadLen(size, ks.dbData[l])
		keysDB += uvarintLen(uint64(dl)) + dl
		keysHuff += 2
		if cells[l] != nil {
			pl := (len(cells[l])*int(gs[l].bits) + 7) / 8
			cellsPacked += pl
			cellTable += pl
			cellsHuff += 2
		}
	}

	// Pick the coders whose padded frame is smallest; ties go to the
	// simpler coder. With nothing to code a code table would be empty,
	// which frames cannot express, so the plain coders are used.
	keyOpts := []bool{false, true}
	switch {
	case n == 0 || c.cfg.KeyCoding == KeyCodingDeltaBinary:
		keyOpts = keyOpts[:1]
	case c.cfg.KeyCoding == KeyCodingHuffman:
		keyOpts = keyOpts[1:]
	}
	cellOpts := []bool{false, true}
	switch {
	case cellTable == 0 || c.cfg.CellCoding == CellCodingPacked:
		cellOpts = cellOpts[:1]
	case c.cfg.CellCoding == CellCodingHuffman:
		cellOpts = cellOpts[1:]
	}
	bestLen := math.MaxInt
	var keyHuff, cellHuff bool
	for _, kh := range keyOpts {
		for _, ch := range cellOpts {
			size := keysDB
			if kh {
				size = keysHuff
			}
			if ch {
				size += cellsHuff
			} else {
				size += cellsPacked
			}
			size = max(size, minFrameLen(sketchNeed(n, nb, nl, kh, ch, cellTable)))
			if size < bestLen {
				bestLen, keyHuff, cellHuff = size, kh, ch
			}
		}
	}

	// Payloads go to a scratch buffer first: the list headers before them
	// carry their lengths.
	var gapEnc, cellEnc huffEncoder
	if keyHuff {
		gapEnc = newHuffEncoder(gapLens)
	}
	if cellHuff {
		cellEnc = newHuffEncoder(cellLens)
	}
	pay := make([]byte, 0, keysDB+cellsPacked+64)
	keyLen := make([]int, nl)
	cellLen := make([]int, nl)
	for l := range nl {
		if sl.size(l) == 0 {
			continue
		}
		mark := len(pay)
		keys := sl.keys[sl.offs[l]:sl.offs[l+1]]
		if keyHuff {
			pay = appendHuffGaps(pay, keys, &gapEnc)
		} else {
			pay = appendDeltaBinaryWidths(pay, keys, ks.dbWidth[l], ks.dbData[l])
		}
		keyLen[l] = len(pay) - mark
		if cells[l] == nil {
			continue
		}
		mark = len(pay)
		bw := bitWriter{buf: pay}
		if cellHuff {
			for _, v := range cells[l] {
				cellEnc.put(&bw, int(v))
			}
		} else {
			nbits := gs[l].bits
			for _, v := range cells[l] {
				bw.write(uint64(v), nbits)
			}
		}
		pay = bw.flush()
		cellLen[l] = len(pay) - mark
	}

	start := len(dst)
	dst = slicesGrow(dst, 64+5*nb+8*nl+len(pay))
	dst = appendHeader(dst, IDSketchML)
	var flags byte
	if keyHuff {
		flags |= smFlagKeyHuffman
	}
	if cellHuff {
		flags |= smFlagCellHuff
	}
	dst = append(dst, flags)
	dst = binary.AppendUvarint(dst, uint64(n))
	dst = binary.AppendUvarint(dst, uint64(qz.qpos))
	dst = binary.AppendUvarint(dst, uint64(qz.qneg))
	dst = binary.AppendUvarint(dst, uint64(len(sl.wpos)))
	dst = binary.AppendUvarint(dst, uint64(len(sl.wneg)))
	for _, ws := range [2][]int{sl.wpos, sl.wneg} {
		for _, x := range ws {
			dst = binary.AppendUvarint(dst, uint64(x))
		}
	}
	dst = append(dst, byte(s))
	dst = binary.LittleEndian.AppendUint64(dst, seed)
	dst = appendReps(dst, qz.reps[:qz.qpos])
	dst = appendReps(dst, qz.reps[qz.qpos:])
	keyBytes := 0
	if keyHuff {
		mark := len(dst)
		dst = appendHuffTable(dst, gapLens)
		keyBytes += len(dst) - mark
	}
	if cellHuff {
		dst = appendHuffTable(dst, cellLens)
	}
	for l := range nl {
		mark := len(dst)
		size := sl.size(l)
		dst = binary.AppendUvarint(dst, uint64(size))
		if size > 0 {
			dst = binary.AppendUvarint(dst, uint64(keyLen[l]))
		}
		keyBytes += len(dst) - mark + keyLen[l]
		if cells[l] != nil {
			dst = binary.AppendUvarint(dst, uint64(ts[l]))
			if cellHuff {
				dst = binary.AppendUvarint(dst, uint64(cellLen[l]))
			}
		}
	}
	dst = append(dst, pay...)
	dst, pad := appendPadding(dst, start, sketchNeed(n, nb, nl, keyHuff, cellHuff, cellTable))
	return dst, frameStats{keyBytes: keyBytes, padBytes: pad}
}
