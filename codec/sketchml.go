package codec

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
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
	// SketchOnly writes the sketch frame even where the update's uniform8
	// frame costs fewer bits (see encode); for measuring the sketch itself.
	SketchOnly bool
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
// Where an update's uniform8 frame serves better (see encode), typically
// below a few hundred pairs, it writes that frame, with uniform8's
// guarantee, unless SketchOnly.
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
	sqErr    float64   // uniform8: the squared L2 error of what the frame decodes to
}

// encode writes the sketch frame of u or, where it serves better, u's
// round-to-nearest uniform8 frame: below a few hundred pairs the sketch's
// fixed part (up to q representatives, code tables, the hash seed)
// outweighs what bucketing saves, and a byte a value is smaller or, for a
// few more bytes, far more accurate. A receiver decodes either, since every
// frame names its codec. Which serves better:
//   - with ByteBudget, the one that fits with the smaller squared error;
//   - with TargetError, uniform8 when it is no larger and meets the target
//     or has no larger error;
//   - else the one of lower rate-distortion cost (fewerBits): bits plus a
//     bit a value for each doubling of the L2 error, the slope of a good
//     quantizer at high rate, so a frame no larger with no larger error
//     always wins.
func (c *SketchML) encode(dst []byte, u Sparse, wantBounds bool) ([]byte, frameStats, error) {
	start := len(dst)
	dst, st, err := c.encodeSketch(dst, u, wantBounds)
	// With a budget, ErrBadInput is the budget refusing the sketch (a bad
	// update fails uniform8's validation below as well).
	if c.cfg.SketchOnly || (err != nil && !(c.cfg.ByteBudget > 0 && errors.Is(err, ErrBadInput))) {
		return dst, st, err
	}
	n := len(u.Values)
	sketchLen := len(dst) - start
	limit := sketchLen + n*maxGainBits/8 // no more can pay for itself
	switch {
	case c.cfg.ByteBudget > 0:
		limit = c.cfg.ByteBudget
	case c.cfg.TargetError > 0:
		limit = sketchLen
	}
	// Large updates stop here, at the cost of a pass over their keys.
	if u8Len(u) > limit {
		return dst, st, err
	}
	alt, altSt, altErr := Uniform8{}.encode(nil, u, wantBounds)
	if altErr != nil {
		return dst, st, err
	}
	if err == nil {
		sketchSq, err := decodedSqError(dst[start:], u)
		if err != nil {
			return dst[:start], frameStats{}, fmt.Errorf("sketchml: decoding own frame: %w", err)
		}
		var better bool
		switch {
		case c.cfg.ByteBudget > 0:
			better = altSt.sqErr <= sketchSq
		case c.cfg.TargetError > 0:
			better = altSt.sqErr <= sketchSq || altSt.sqErr <= c.cfg.TargetError*c.cfg.TargetError*sqNorm(u.Values)
		default:
			better = fewerBits(len(alt), altSt.sqErr, sketchLen, sketchSq, n)
		}
		if !better {
			return dst, st, nil
		}
	}
	return append(dst[:start], alt...), altSt, nil
}

// maxGainBits caps what fewerBits credits a frame for its lower error, in
// bits a value (a 16-fold lower L2 error): the exchange rate holds for
// errors of the same order, not for a frame that is exact against one that
// is not. It also spares the encoder the trial of a uniform8 frame more
// than half a byte a value larger than the sketch's, as large updates'
// frames are.
const maxGainBits = 4

// fewerBits reports whether a frame of aBytes decoding to squared error aSq
// costs no more than one of bBytes and bSq, both of n values, at a bit a
// value for each halving of the L2 error (a quarter of the squared error).
func fewerBits(aBytes int, aSq float64, bBytes int, bSq float64, n int) bool {
	var gain float64 // bits a value a's lower error is worth
	switch {
	case aSq == bSq:
	case aSq == 0:
		gain = maxGainBits
	case bSq == 0:
		gain = -maxGainBits
	default:
		gain = max(-maxGainBits, min(maxGainBits, 0.5*math.Log2(bSq/aSq)))
	}
	return 8*float64(aBytes-bBytes) <= gain*float64(n)
}

// sqNorm is the squared L2 norm of values.
func sqNorm(values []float32) float64 {
	var sum float64
	for _, v := range values {
		sum += float64(v) * float64(v)
	}
	return sum
}

// decodedSqError is the squared L2 distance between what frame decodes to
// and u's values.
func decodedSqError(frame []byte, u Sparse) (float64, error) {
	d, err := Decode(frame)
	if err != nil {
		return 0, err
	}
	return sqError(d.Values, u.Values), nil
}

// sqError is the squared L2 distance between two vectors of one length.
func sqError(decoded, original []float32) float64 {
	var sum float64
	for i, v := range original {
		d := float64(decoded[i]) - float64(v)
		sum += d * d
	}
	return sum
}

// encodeSketch writes u's sketchml frame.
func (c *SketchML) encodeSketch(dst []byte, u Sparse, wantBounds bool) ([]byte, frameStats, error) {
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
		return finer.encodeSketch(dst, u, wantBounds)
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
func parseReps(p *parser, out []float32, negative bool) {
	if p.err != nil {
		return
	}
	// The varints are read from a local slice, p.b set once at the end: a
	// label made per representative, and p.b written per representative
	// (a write barrier while the collector runs), were half of a small
	// frame's decode time.
	what := "positive"
	if negative {
		what = "negative"
	}
	b := p.b
	prev := uint64(0)
	for i := range out {
		d, n := binary.Uvarint(b)
		if n <= 0 {
			p.b = b
			p.uvarint(what + " representative") // the parser's error
			return
		}
		b = b[n:]
		m := d
		if i > 0 {
			// d ≤ 0x7F7FFFFF keeps the sum from wrapping.
			m = prev + min(d, 0x7F7FFFFF) + 1
		}
		if d > 0x7F7FFFFF || m > 0x7F7FFFFF {
			p.b = b
			p.err = fmt.Errorf("%w: %s representative %d: %w", ErrCorrupt, what, i, ErrNotFinite)
			return
		}
		prev = m
		v := math.Float32frombits(uint32(m))
		if negative {
			v = -v
		}
		out[i] = v
	}
	p.b = b
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// bitsFor is the number of bits that hold values 0..maxVal.
func bitsFor(maxVal int) uint {
	if maxVal <= 0 {
		return 0
	}
	return uint(bits.Len(uint(maxVal)))
}
