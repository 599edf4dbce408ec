package codec

import (
	"encoding/binary"
	"fmt"
)

// Decode budget. A decoder may allocate at most decodeBudgetFactor bytes per
// frame byte plus decodeBudgetSlack. Each decoder computes, from header
// fields alone, what it is about to allocate (its "need") and refuses the
// frame before allocating if the need exceeds the budget less
// decodeReserve, which covers the small allocations not counted one by one
// (error values, parser state). Encoders compute the same need and pad the
// frame with zero bytes when it would not fit, so every frame they write
// decodes.
//
// The budget caps how far a frame can expand: a decoded pair costs 12 bytes
// (8-byte key, 4-byte value), so a frame of F bytes decodes to at most about
// (16F + 48 KiB)/12 pairs. The factor is 16 rather than 8 because a decoded
// pair takes 12 bytes: at 8 the bound itself would forbid any sparse frame
// smaller than 1.5 bytes a pair, so encoders would have to pad what SketchML
// compresses better than 8× with zeros, and a WAN would carry the padding.
// A codec that compresses better than 16× still pays with padding.
const (
	decodeBudgetFactor = 16
	decodeBudgetSlack  = 64 << 10
	decodeReserve      = 16 << 10
)

// decodeBudget is what a decoder may plan to allocate for a frame of
// frameLen bytes (header included).
func decodeBudget(frameLen int) int {
	return decodeBudgetFactor*frameLen + decodeBudgetSlack - decodeReserve
}

// minFrameLen is the shortest frame whose budget covers need.
func minFrameLen(need int) int {
	short := need - (decodeBudgetSlack - decodeReserve)
	if short <= 0 {
		return 0
	}
	return (short + decodeBudgetFactor - 1) / decodeBudgetFactor
}

// allocCost bounds what the Go runtime takes for an allocation of n bytes:
// small objects round up to a size class (at most 1/8 more), large ones to
// whole 8 KiB pages.
func allocCost(n int) int {
	switch {
	case n <= 0:
		return 0
	case n <= 32<<10:
		return n + n/8 + 16
	default:
		return (n + 8191) &^ 8191
	}
}

// checkBudget refuses a frame whose decode would allocate more than allowed.
func checkBudget(need, frameLen int, what string) error {
	if need > decodeBudget(frameLen) {
		return fmt.Errorf("%w: %s needs %d bytes to decode, more than the %d a %d-byte frame allows", ErrCorrupt, what, need, decodeBudget(frameLen), frameLen)
	}
	return nil
}

// appendPadding pads a frame that started at start in dst with zero bytes
// until its decode budget covers need, and returns the bytes added.
func appendPadding(dst []byte, start, need int) ([]byte, int) {
	pad := minFrameLen(need) - (len(dst) - start)
	if pad <= 0 {
		return dst, 0
	}
	dst = slicesGrow(dst, pad)
	dst = dst[:len(dst)+pad]
	clear(dst[len(dst)-pad:])
	return dst, pad
}

// checkPadding accepts a frame's tail only if it is zero padding.
func checkPadding(rest []byte) error {
	for i, b := range rest {
		if b != 0 {
			return fmt.Errorf("%w: %d trailing bytes after the payload (byte %d is %#x, padding must be zero)", ErrCorrupt, len(rest), i, b)
		}
	}
	return nil
}

// parser reads header fields; the first failure sticks and later reads
// return zero values, so a decoder checks err once per group of fields.
type parser struct {
	b   []byte
	err error
}

func (p *parser) fail(format string, args ...any) {
	if p.err == nil {
		p.err = fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, args...)...)
	}
}

func (p *parser) uvarint(what string) uint64 {
	if p.err != nil {
		return 0
	}
	v, n := binary.Uvarint(p.b)
	if n <= 0 {
		if n == 0 {
			p.fail("truncated frame reading %s", what)
		} else {
			p.fail("%s overflows uint64", what)
		}
		return 0
	}
	p.b = p.b[n:]
	return v
}

// count reads a uvarint that must be at most limit.
func (p *parser) count(what string, limit uint64) int {
	v := p.uvarint(what)
	if p.err == nil && v > limit {
		p.fail("%s %d exceeds %d", what, v, limit)
		return 0
	}
	return int(v)
}

func (p *parser) byte(what string) byte {
	if p.err != nil {
		return 0
	}
	if len(p.b) < 1 {
		p.fail("truncated frame reading %s", what)
		return 0
	}
	v := p.b[0]
	p.b = p.b[1:]
	return v
}

func (p *parser) uint64(what string) uint64 {
	if p.err != nil {
		return 0
	}
	if len(p.b) < 8 {
		p.fail("truncated frame reading %s", what)
		return 0
	}
	v := binary.LittleEndian.Uint64(p.b)
	p.b = p.b[8:]
	return v
}

func (p *parser) uint32(what string) uint32 {
	if p.err != nil {
		return 0
	}
	if len(p.b) < 4 {
		p.fail("truncated frame reading %s", what)
		return 0
	}
	v := binary.LittleEndian.Uint32(p.b)
	p.b = p.b[4:]
	return v
}

// bytes takes the next n bytes, which must be present.
func (p *parser) bytes(n int, what string) []byte {
	if p.err != nil {
		return nil
	}
	if n > len(p.b) {
		p.fail("%s needs %d bytes, frame has %d", what, n, len(p.b))
		return nil
	}
	v := p.b[:n:n]
	p.b = p.b[n:]
	return v
}

// maxCount bounds counts read from frames so int arithmetic on them cannot
// overflow; real limits come from the decode budget.
const maxCount = 1 << 40
