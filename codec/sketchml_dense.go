package codec

import (
	"encoding/binary"
	"fmt"
)

// SketchML dense frames: each value's bucket index, written directly.

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
	parseReps(p, vals[:qpos], false)
	parseReps(p, vals[qpos:qpos+qneg], true)
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
		defer releaseHuff(dec)
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
