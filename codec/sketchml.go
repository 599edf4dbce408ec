package codec

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"unsafe"
)

// KeyCoding selects how SketchML writes key lists.
type KeyCoding uint8

const (
	// KeyCodingAuto writes whichever of the coders below gives the smaller
	// frame.
	KeyCodingAuto KeyCoding = iota
	// KeyCodingDeltaBinary is the paper's delta-binary coding.
	KeyCodingDeltaBinary
	// KeyCodingHuffman entropy-codes the gaps with a Huffman code.
	KeyCodingHuffman
)

// CellCoding selects how SketchML writes sketch cells (sparse) or bucket
// indexes (dense).
type CellCoding uint8

const (
	// CellCodingAuto writes whichever of the coders below gives the smaller
	// frame.
	CellCodingAuto CellCoding = iota
	// CellCodingPacked packs each cell in ceil(log2 width) bits.
	CellCodingPacked
	// CellCodingHuffman entropy-codes the cells with a Huffman code.
	CellCodingHuffman
)

// GroupLayout selects how each side's buckets are cut into groups.
type GroupLayout uint8

const (
	// GroupsEqualWidth is the paper's layout: groups of ceil(q/r)
	// consecutive buckets, so a collision lowers a bucket index by less
	// than q/r.
	GroupsEqualWidth GroupLayout = iota
	// GroupsEqualEnergy gives each side as many groups as GroupsEqualWidth
	// but cuts them so that each holds a similar share of the side's
	// squared magnitudes: the few large values of a heavy tail get narrow
	// groups (a single bucket needs no sketch at all), where an
	// underestimate would cost the most.
	GroupsEqualEnergy
)

// Representative selects the value a bucket decodes to.
type Representative uint8

const (
	// RepresentativeMemberMean is the mean of the bucket's members, which
	// minimises the squared error of the values the bucket holds.
	RepresentativeMemberMean Representative = iota
	// RepresentativeSplitMidpoint is the paper's choice: the mean of the
	// bucket's two splits.
	RepresentativeSplitMidpoint
)

// SketchMLConfig configures a SketchML codec. The decoder needs none of it:
// every parameter a frame depends on travels in the frame.
type SketchMLConfig struct {
	// Quantiles is q, the number of value buckets (3..4096). One bucket goes
	// to zeros when the update holds any; the others are shared between
	// positive and negative values in proportion to their counts.
	Quantiles int
	// Rows is s, the number of hash rows of each MinMaxSketch (1..16).
	Rows int
	// Groups is r: each side's buckets are cut into groups of ceil(q/r)
	// consecutive buckets, each with its own key list and MinMaxSketch, so
	// a hash collision can lower a bucket index by less than q/r
	// (1..Quantiles).
	Groups int
	// ColumnRatio sets t, the columns of a group's sketch, to
	// ceil(ColumnRatio × the group's key count) ((0, 16]).
	ColumnRatio float64
	// Seed seeds the sketch hash; it travels in the frame.
	Seed uint64
	// KeyCoding and CellCoding pick the coders; Auto picks per frame.
	KeyCoding  KeyCoding
	CellCoding CellCoding
	// Representative picks the value each bucket decodes to.
	Representative Representative
	// GroupLayout picks how buckets are cut into groups.
	GroupLayout GroupLayout
	// TargetError, when above zero, makes the encoder choose each group's
	// sketch columns per frame, ignoring ColumnRatio: the fewest bytes
	// whose relative L2 error is at most TargetError ((0, 1)).
	TargetError float64
	// ByteBudget, when above zero, makes the encoder choose each group's
	// sketch columns per frame, ignoring ColumnRatio: the least relative
	// L2 error whose frame takes at most ByteBudget bytes.
	ByteBudget int
}

// Limits on SketchMLConfig, also enforced on frames.
const (
	maxQuantiles   = huffMaxSymbols
	maxRows        = 16
	maxColumnRatio = 16
	maxColumns     = math.MaxUint32
)

// DefaultSketchMLConfig returns the paper's parameters (q=256, s=2, r=8,
// t=0.3 × group keys) with equal-energy groups, the member-mean
// representative and automatic choice of the smaller key and cell coding
// per frame. Equal-energy groups are the default because they gave more
// compression at less error than the paper's equal-width groups on every
// real gradient of more than a thousand pairs measured (doc.go).
func DefaultSketchMLConfig() SketchMLConfig {
	return SketchMLConfig{
		Quantiles:   256,
		Rows:        2,
		Groups:      8,
		ColumnRatio: 0.3,
		Seed:        0x5eed_5c3a_7c41_0001,
		GroupLayout: GroupsEqualEnergy,
	}
}

// SketchML is the codec of the SketchML paper (Jiang et al., SIGMOD'18):
// quantile-bucket quantification of the values, a grouped MinMaxSketch of
// the bucket indexes, and delta-binary or entropy-coded keys. Keys are
// lossless; a decoded value keeps its original's sign (or is zero) and its
// magnitude never exceeds the largest magnitude in the original's bucket.
type SketchML struct {
	cfg   SketchMLConfig
	width int // buckets per group, ceil(q/r)
}

// NewSketchML returns a SketchML codec for cfg.
func NewSketchML(cfg SketchMLConfig) (*SketchML, error) {
	switch {
	case cfg.Quantiles < 3 || cfg.Quantiles > maxQuantiles:
		return nil, fmt.Errorf("%w: sketchml quantiles %d outside [3, %d]", ErrBadInput, cfg.Quantiles, maxQuantiles)
	case cfg.Rows < 1 || cfg.Rows > maxRows:
		return nil, fmt.Errorf("%w: sketchml rows %d outside [1, %d]", ErrBadInput, cfg.Rows, maxRows)
	case cfg.Groups < 1 || cfg.Groups > cfg.Quantiles:
		return nil, fmt.Errorf("%w: sketchml groups %d outside [1, quantiles=%d]", ErrBadInput, cfg.Groups, cfg.Quantiles)
	case !(cfg.ColumnRatio > 0 && cfg.ColumnRatio <= maxColumnRatio):
		return nil, fmt.Errorf("%w: sketchml column ratio %v outside (0, %d]", ErrBadInput, cfg.ColumnRatio, maxColumnRatio)
	case cfg.KeyCoding > KeyCodingHuffman:
		return nil, fmt.Errorf("%w: sketchml key coding %d", ErrBadInput, cfg.KeyCoding)
	case cfg.CellCoding > CellCodingHuffman:
		return nil, fmt.Errorf("%w: sketchml cell coding %d", ErrBadInput, cfg.CellCoding)
	case cfg.Representative > RepresentativeSplitMidpoint:
		return nil, fmt.Errorf("%w: sketchml representative %d", ErrBadInput, cfg.Representative)
	case cfg.GroupLayout > GroupsEqualEnergy:
		return nil, fmt.Errorf("%w: sketchml group layout %d", ErrBadInput, cfg.GroupLayout)
	case !(cfg.TargetError >= 0 && cfg.TargetError < 1):
		return nil, fmt.Errorf("%w: sketchml target error %v outside (0, 1) (0 = off)", ErrBadInput, cfg.TargetError)
	case cfg.ByteBudget < 0:
		return nil, fmt.Errorf("%w: sketchml byte budget %d bytes is negative (0 = off)", ErrBadInput, cfg.ByteBudget)
	case cfg.TargetError > 0 && cfg.ByteBudget > 0:
		return nil, fmt.Errorf("%w: sketchml target error and byte budget are exclusive: set one", ErrBadInput)
	}
	return &SketchML{cfg: cfg, width: (cfg.Quantiles + cfg.Groups - 1) / cfg.Groups}, nil
}

// Config returns the codec's configuration.
func (c *SketchML) Config() SketchMLConfig { return c.cfg }

func init() {
	c, err := NewSketchML(DefaultSketchMLConfig())
	if err != nil {
		panic(err)
	}
	register(IDSketchML, c, decodeSketchML)
}

// Name implements Codec.
func (c *SketchML) Name() string { return "sketchml" }

// Frame flags.
const (
	smFlagDense      = 1 << 0 // no keys: one bucket index per value
	smFlagKeyHuffman = 1 << 1 // key lists are Huffman-coded gaps
	smFlagCellHuff   = 1 << 2 // cells (sparse) or indexes (dense) are Huffman-coded
	smFlagDenseZero  = 1 << 3 // dense: the index alphabet has a zero symbol
	smFlagsKnown     = smFlagDense | smFlagKeyHuffman | smFlagCellHuff | smFlagDenseZero
)

// Encode implements Codec.
func (c *SketchML) Encode(dst []byte, u Sparse) ([]byte, error) {
	dst, _, err := c.encode(dst, u, false)
	return dst, err
}

// frameStats describes an encoded frame for Measure.
type frameStats struct {
	keyBytes int       // bytes spent on keys; -1 when not separable
	padBytes int       // zero padding added for the decode budget
	upper    []float32 // per value, the largest magnitude it may decode to; nil means the original magnitude
}

func (c *SketchML) encode(dst []byte, u Sparse, wantBounds bool) ([]byte, frameStats, error) {
	if u.Keys != nil && len(u.Keys) != len(u.Values) {
		return dst, frameStats{}, validate(u)
	}
	// quantize and encodeSparse check values and key order on the way;
	// validate words the error when they find a problem.
	qz, ok := quantize(u.Values, c.cfg.Quantiles, c.cfg.Groups, c.cfg.Representative)
	if !ok {
		return dst, frameStats{}, validate(u)
	}
	if c.cfg.TargetError > 0 && !u.Dense() && c.cfg.Quantiles < maxQuantiles &&
		quantizationError(&qz, u.Values) > c.cfg.TargetError/math.Sqrt2 {
		// Columns only remove collision error; when bucketing alone takes
		// more than half the squared target, finer buckets are needed.
		finer := *c
		finer.cfg.Quantiles = min(2*c.cfg.Quantiles, maxQuantiles)
		finer.width = ceilDiv(finer.cfg.Quantiles, c.cfg.Groups)
		return finer.encode(dst, u, wantBounds)
	}
	var st frameStats
	var err error
	if u.Dense() {
		start := len(dst)
		dst, st, err = c.encodeDense(dst, u, &qz)
		if err == nil && c.cfg.ByteBudget > 0 && len(dst)-start > c.cfg.ByteBudget {
			return dst[:start], frameStats{}, fmt.Errorf("%w: byte budget %d is below the %d bytes of the dense sketchml frame of this update (%d values)", ErrBadInput, c.cfg.ByteBudget, len(dst)-start, len(u.Values))
		}
	} else {
		dst, st, err = c.encodeSparse(dst, u, &qz)
	}
	if wantBounds && err == nil {
		st.upper = make([]float32, len(qz.ids))
		for i, id := range qz.ids {
			if id != qz.zeroID() {
				st.upper[i] = qz.upper[id]
			}
		}
	}
	return dst, st, err
}

func appendReps(dst []byte, reps []float32) []byte {
	prev := uint32(0)
	for i, r := range reps {
		b := math.Float32bits(r)
		if i == 0 {
			dst = binary.AppendUvarint(dst, uint64(b))
		} else {
			dst = binary.AppendUvarint(dst, uint64(b-prev-1))
		}
		prev = b
	}
	return dst
}

// parseReps reads len(out) representative magnitudes, which must be finite
// and strictly increasing, and stores them in out with sign applied.
func parseReps(p *parser, out []float32, negative bool, what string) {
	prev := uint64(0)
	for i := range out {
		d := p.uvarint(what + " representative")
		if p.err != nil {
			return
		}
		b := d
		if i > 0 {
			// d ≤ 0x7F7FFFFF keeps the sum from wrapping.
			b = prev + min(d, 0x7F7FFFFF) + 1
		}
		if d > 0x7F7FFFFF || b > 0x7F7FFFFF {
			if p.err == nil {
				p.err = fmt.Errorf("%w: %s representative %d: %w", ErrCorrupt, what, i, ErrNotFinite)
			}
			return
		}
		prev = b
		v := math.Float32frombits(uint32(b))
		if negative {
			v = -v
		}
		out[i] = v
	}
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// bitsFor is the number of bits that hold values 0..maxVal.
func bitsFor(maxVal int) uint {
	if maxVal <= 0 {
		return 0
	}
	return uint(bits.Len(uint(maxVal)))
}

// mix64 is the splitmix64 finaliser, a bijective 64-bit mixer.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// keyHash derives a key's row hashes: row i uses a + i·b (mod 2^32), the
// double hashing of Kirsch and Mitzenmacher, mapped to a column by
// multiply-shift.
func keyHash(key, seed uint64) (a, b uint32) {
	h := mix64(key ^ seed)
	return uint32(h >> 32), uint32(h) | 1
}

func column(a, b uint32, row int, t uint32) uint32 {
	return uint32(uint64(a+uint32(row)*b) * uint64(t) >> 32)
}

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

// denseNeed is what decodeSketchML allocates for a dense frame.
func denseNeed(n, alphabet int, huff bool) int {
	need := allocCost(4*n) + allocCost(4*alphabet)
	if huff {
		need += huffDecoderAlloc
	}
	return need
}

// encodeDense writes each value's bucket index directly: with no keys to
// leave out, a sketch could not be smaller than the indexes themselves.
func (c *SketchML) encodeDense(dst []byte, u Sparse, qz *quantization) ([]byte, frameStats, error) {
	n := len(u.Values)
	alphabet := qz.qpos + qz.qneg
	if qz.zeros > 0 {
		alphabet++
	}
	nbits := bitsFor(alphabet - 1)
	hist := make([]uint32, alphabet)
	for id, cnt := range qz.counts {
		hist[id] = uint32(cnt)
	}
	if qz.zeros > 0 {
		hist[qz.zeroID()] = uint32(qz.zeros)
	}
	lens := huffLengths(hist)
	packedLen := (n*int(nbits) + 7) / 8
	huffLen := (huffBits(hist, lens) + 7) / 8
	huffTotal := huffTableLen(lens) + uvarintLen(uint64(huffLen)) + huffLen
	useHuff := false
	switch c.cfg.CellCoding {
	case CellCodingHuffman:
		useHuff = n > 0
	case CellCodingAuto:
		// Compare whole payloads after any padding the decode budget asks.
		useHuff = n > 0 && max(huffTotal, minFrameLen(denseNeed(n, alphabet, true))) <
			max(packedLen, minFrameLen(denseNeed(n, alphabet, false)))
	}
	start := len(dst)
	dst = appendHeader(dst, IDSketchML)
	flags := byte(smFlagDense)
	if useHuff {
		flags |= smFlagCellHuff
	}
	if qz.zeros > 0 {
		flags |= smFlagDenseZero
	}
	dst = append(dst, flags)
	dst = binary.AppendUvarint(dst, uint64(n))
	dst = binary.AppendUvarint(dst, uint64(qz.qpos))
	dst = binary.AppendUvarint(dst, uint64(qz.qneg))
	dst = appendReps(dst, qz.reps[:qz.qpos])
	dst = appendReps(dst, qz.reps[qz.qpos:])
	if useHuff {
		dst = appendHuffTable(dst, lens)
		dst = binary.AppendUvarint(dst, uint64(huffLen))
	}
	bw := bitWriter{buf: dst}
	if useHuff {
		enc := newHuffEncoder(lens)
		for _, id := range qz.ids {
			enc.put(&bw, int(id))
		}
	} else {
		for _, id := range qz.ids {
			bw.write(uint64(id), nbits)
		}
	}
	dst = bw.flush()
	dst, pad := appendPadding(dst, start, denseNeed(n, alphabet, useHuff))
	return dst, frameStats{padBytes: pad}, nil
}

// cellTable holds packed cells of nbits bits, row-major. data runs past
// the cells to the end of its buffer so most reads are one 4-byte load.
type cellTable struct {
	data  []byte
	t     uint32
	nbits uint32
	mask  uint32
}

// query returns the MinMaxSketch estimate for key: the largest of its
// cells over the rows.
func (c *cellTable) query(key, seed uint64, rows int) uint32 {
	a, b := keyHash(key, seed)
	data, t, nbits, mask := c.data, uint64(c.t), uint64(c.nbits), c.mask
	rank := uint32(0)
	rowBase := uint64(0)
	for ; rows > 0; rows-- {
		bit := (rowBase + uint64(a)*t>>32) * nbits
		off := bit >> 3
		var v uint32
		if off+4 <= uint64(len(data)) {
			v = binary.LittleEndian.Uint32(data[off : off+4])
		} else {
			v = loadTail(data, off)
		}
		rank = max(rank, v>>(bit&7)&mask)
		a += b
		rowBase += t
	}
	return rank
}

// loadTail reads up to 4 bytes at off, little-endian, zero past the end.
func loadTail(data []byte, off uint64) uint32 {
	var v uint32
	for j := uint64(0); j < 4 && off+j < uint64(len(data)); j++ {
		v |= uint32(data[off+j]) << (8 * j)
	}
	return v
}

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
	parseReps(&p, vals[:qpos], false, "positive")
	parseReps(&p, vals[qpos:], true, "negative")
	var gapDec, cellDec *huffDecoder
	var err error
	if keyHuff && p.err == nil {
		if gapDec, p.b, err = parseHuffTable(p.b, gapSymbols, "gap"); err != nil {
			return Sparse{}, err
		}
	}
	if cellHuff && p.err == nil {
		if cellDec, p.b, err = parseHuffTable(p.b, w, "cell"); err != nil {
			return Sparse{}, err
		}
	}
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
	bitmap := make([]uint64, words)
	for i, k := range keys {
		off := k - lo
		w, bit := off>>6, uint64(1)<<(off&63)
		if bitmap[w]&bit != 0 {
			return false, fmt.Errorf("%w: key %d is in two key lists", ErrCorrupt, keys[i])
		}
		bitmap[w] |= bit
	}
	below := make([]uint32, words)
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
		base := lo + uint64(w)*64
		for b != 0 {
			keys[i] = base + uint64(bits.TrailingZeros64(b))
			i++
			b &= b - 1
		}
	}
	return true, nil
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

func decodeSketchDense(p *parser, flags byte, frameLen int) (Sparse, error) {
	if flags&smFlagKeyHuffman != 0 {
		return Sparse{}, fmt.Errorf("%w: flags %#x: key coding flag on a dense frame", ErrCorrupt, flags)
	}
	huff := flags&smFlagCellHuff != 0
	n := p.count("value count n", maxCount)
	qpos := p.count("positive bucket count", maxQuantiles)
	qneg := p.count("negative bucket count", maxQuantiles)
	if p.err != nil {
		return Sparse{}, p.err
	}
	alphabet := qpos + qneg
	if flags&smFlagDenseZero != 0 {
		alphabet++
	}
	if alphabet > maxQuantiles {
		return Sparse{}, fmt.Errorf("%w: q=%d buckets exceeds %d", ErrCorrupt, alphabet, maxQuantiles)
	}
	if n > 0 && alphabet == 0 {
		return Sparse{}, fmt.Errorf("%w: %d values but no buckets (q=0)", ErrCorrupt, n)
	}
	if err := checkBudget(denseNeed(n, alphabet, huff), frameLen, fmt.Sprintf("n=%d values", n)); err != nil {
		return Sparse{}, err
	}
	vals := make([]float32, alphabet)
	parseReps(p, vals[:qpos], false, "positive")
	parseReps(p, vals[qpos:qpos+qneg], true, "negative")
	if p.err != nil {
		return Sparse{}, p.err
	}
	var dec *huffDecoder
	var payload []byte
	nbits := bitsFor(alphabet - 1)
	if huff {
		var err error
		if dec, p.b, err = parseHuffTable(p.b, max(1, alphabet), "index"); err != nil {
			return Sparse{}, err
		}
		ln := p.count("index stream length", uint64(len(p.b)))
		if p.err == nil && n > 8*ln {
			p.fail("%d indexes cannot fit in %d bytes", n, ln)
		}
		payload = p.bytes(ln, "index stream")
	} else {
		payload = p.bytes((n*int(nbits)+7)/8, "index stream")
	}
	if p.err != nil {
		return Sparse{}, p.err
	}
	if err := checkPadding(p.b); err != nil {
		return Sparse{}, err
	}
	u := Sparse{Values: make([]float32, n)}
	br := newBitReader(payload)
	for i := range u.Values {
		var sym int
		if huff {
			var ok bool
			if sym, ok = dec.next(&br); !ok {
				return Sparse{}, fmt.Errorf("%w: invalid index code at value %d", ErrCorrupt, i)
			}
		} else {
			sym = int(br.read(nbits))
		}
		if sym >= alphabet {
			return Sparse{}, fmt.Errorf("%w: index %d at value %d exceeds q=%d", ErrCorrupt, sym, i, alphabet)
		}
		u.Values[i] = vals[sym]
	}
	if err := br.finish(); err != nil {
		return Sparse{}, fmt.Errorf("index stream: %w", err)
	}
	return u, nil
}
