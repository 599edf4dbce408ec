package codec

import (
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"
)

// fb builds frames field by field.
type fb []byte

func frameOf(id ID) fb         { return fb{'S', 'K', formatVersion, byte(id)} }
func (f fb) u(vs ...uint64) fb { return binaryAppendUvarints(f, vs...) }
func (f fb) b(bs ...byte) fb   { return append(f, bs...) }
func (f fb) u64(v uint64) fb   { return binary.LittleEndian.AppendUint64(f, v) }
func (f fb) u32(v uint32) fb   { return binary.LittleEndian.AppendUint32(f, v) }
func binaryAppendUvarints(f fb, vs ...uint64) fb {
	for _, v := range vs {
		f = binary.AppendUvarint(f, v)
	}
	return f
}

// smHead is a sparse SketchML header: flags, n, qpos, qneg, the group
// widths of each side, rows and seed.
func smHead(flags byte, n, qpos, qneg uint64, wpos, wneg []uint64, s byte) fb {
	return frameOf(IDSketchML).b(flags).u(n, qpos, qneg, uint64(len(wpos)), uint64(len(wneg))).
		u(wpos...).u(wneg...).b(s).u64(0)
}

// g is a list of group widths.
func g(ws ...uint64) []uint64 { return ws }

// smValid is a well-formed sparse frame: keys 5 and 9 in one positive
// group of two buckets (representatives 0.5 and 1.0), delta-binary keys,
// one column of packed one-bit cells.
func smValid() fb {
	return smHead(0, 2, 2, 0, g(2), nil, 2).
		u(0x3F000000, 0x7FFFFF).   // representatives 0.5, 1.0
		u(0).                      // zero list: empty
		u(2, 5, 1).                // group list: 2 keys in 5 bytes, t=1
		b(0x08, 0x1A, 0x00, 5, 3). // widths 1,2,3,4; flags; gaps 5 and 3
		b(0x00)                    // cells
}

type hostileCase struct {
	name  string
	frame []byte
	frag  string
}

// hostileFrames are malformed frames, each with a fragment of the error it
// must produce.
func hostileFrames() []hostileCase {
	valid := smValid()
	cases := []hostileCase{
		{"empty", nil, "shorter than the 4-byte header"},
		{"bad magic", fb{'S', 'X', 1, 1}, "bad magic"},
		{"future version", fb{'S', 'K', 2, 1}, "format version 2"},
		{"unknown codec", fb{'S', 'K', 1, 99}, "codec id 99"},

		{"raw huge count", frameOf(IDRaw).b(0).u(1 << 60), "count 1152921504606846976 needs"},
		{"raw truncated", frameOf(IDRaw).b(0).u(2).u64(1).u32(0), "needs 24 bytes"},
		{"raw keys out of order", frameOf(IDRaw).b(0).u(2).u64(9).u64(3).u32(0).u32(0), "key 3 follows key 9"},
		{"raw NaN value", frameOf(IDRaw).b(1).u(1).u32(0x7FC00000), "value NaN at index 0: not a finite number"},

		{"sketchml flags", smHead(0x80, 0, 0, 0, nil, nil, 1), "unknown flags 0x80"},
		{"sketchml truncated header", valid[:9], "truncated frame reading"},
		{"sketchml huge n", smHead(0, 1<<39, 1, 0, g(1), nil, 2).u(0x3F800000).u(0).u(1, 1).b(0, 0), "needs"},
		{"sketchml absurd n", smHead(0, 1<<45, 1, 0, g(1), nil, 2), "pair count n 35184372088832 exceeds"},
		{"sketchml q too large", smHead(0, 1, 3000, 3000, g(1), g(1), 2), "q=6000 buckets"},
		{"sketchml q side too large", smHead(0, 1, 5000, 0, g(1), nil, 2), "positive bucket count 5000 exceeds 4096"},
		{"sketchml group width 0", smHead(0, 2, 2, 0, g(0, 2), nil, 2), "group width 0"},
		{"sketchml group width absurd", smHead(0, 2, 2, 0, g(1<<20), nil, 2), "group width 1048576 exceeds"},
		{"sketchml group widths sum", smHead(0, 2, 2, 0, g(1), nil, 2), "group widths sum to 1, want 2 buckets"},
		{"sketchml r absurd", smHead(0, 2, 2, 0, g(1, 1, 1), nil, 2), "r=3+0 groups cannot cut 2+0 buckets"},
		{"sketchml r zero", smHead(0, 2, 2, 0, nil, nil, 2), "r=0+0 groups cannot cut 2+0 buckets"},
		{"sketchml rows 0", smHead(0, 2, 2, 0, g(2), nil, 0), "rows s=0"},
		{"sketchml rows 17", smHead(0, 2, 2, 0, g(2), nil, 17), "rows s=17"},
		{"sketchml many lists", frameOf(IDSketchML).b(0).u(2, 4096, 0, 4096, 0, 1, 1), "4097 key lists need"},
		{"sketchml NaN representative", smHead(0, 2, 2, 0, g(2), nil, 2).u(0x7FC00000, 0), "positive representative 0: not a finite number"},
		{"sketchml Inf representative", smHead(0, 2, 2, 0, g(2), nil, 2).u(0x3F000000, 0x7F800000-0x3F000000-1), "positive representative 1: not a finite number"},
		{"sketchml wrapping representative", smHead(0, 2, 2, 0, g(2), nil, 2).u(0x3F000000, math.MaxUint64), "not a finite number"},
		{"sketchml truncated reps", smHead(0, 2, 2, 0, g(2), nil, 2).u(0x3F000000), "truncated frame reading positive representative"},
		{"sketchml t=0", smHead(0, 2, 2, 0, g(2), nil, 2).u(0x3F000000, 0x7FFFFF).u(0).u(2, 5, 0).b(0x08, 0x1A, 0, 5, 3), "sketch columns t=0"},
		{"sketchml t absurd", smHead(0, 2, 2, 0, g(2), nil, 2).u(0x3F000000, 0x7FFFFF).u(0).u(2, 5, 1<<31).b(0x08, 0x1A, 0, 5, 3, 0), "list payloads need at least"},
		{"sketchml t beyond uint32", smHead(0, 2, 2, 0, g(2), nil, 2).u(0x3F000000, 0x7FFFFF).u(0).u(2, 5, 1<<33), "sketch columns t 8589934592 exceeds"},
		{"sketchml count vs bytes", smHead(0, 100, 2, 0, g(2), nil, 2).u(0x3F000000, 0x7FFFFF).u(0).u(100, 5, 1).b(0x08, 0x1A, 0, 5, 3, 0), "claims 100 keys in 5 bytes"},
		{"sketchml counts vs n", smHead(0, 3, 2, 0, g(2), nil, 2).u(0x3F000000, 0x7FFFFF).u(0).u(2, 5, 1).b(0x08, 0x1A, 0, 5, 3, 0), "key lists hold 2 keys, header says n=3"},
		{"sketchml truncated payload", valid[:len(valid)-2], "list payloads need at least 6 bytes, frame has 4"},
		{"sketchml trailing bytes", append(valid.b(), 7), "trailing bytes"},
		{"sketchml widths", smHead(0, 2, 2, 0, g(2), nil, 2).u(0x3F000000, 0x7FFFFF).u(0).u(2, 5, 1).b(0x08, 0x0A, 0, 5, 3, 0), "widths [1 2 3 2] are not increasing"},
		{"sketchml keys repeated across lists", smHead(0, 3, 2, 0, g(1, 1), nil, 2).u(0x3F000000, 0x7FFFFF).
			u(0).u(2, 5).u(1, 4).b(0x08, 0x1A, 0, 5, 3).b(0x08, 0x1A, 0, 9), "key 9 is in two key lists"},
		{"sketchml key overflow", smHead(0, 2, 1, 0, g(1), nil, 2).u(0x3F800000).u(0).u(2, 19).
			b(0x08, 0x3B, 0x0F).u64(math.MaxUint64 - 1).u64(5), "key 4 follows key 18446744073709551614"},
		{"sketchml cell beyond width", smHead(0, 2, 3, 0, g(3), nil, 1).u(0x3F000000, 0x7FFFFF, 0x1).u(0).u(2, 5, 1).b(0x08, 0x1A, 0, 5, 3).b(0x03), "cell value 3 exceeds group width 3"},
		{"sketchml cell padding", smHead(0, 2, 2, 0, g(2), nil, 2).u(0x3F000000, 0x7FFFFF).u(0).u(2, 5, 1).b(0x08, 0x1A, 0, 5, 3).b(0x80), "cell padding bits"},
		{"sketchml oversubscribed gap code", smHead(smFlagKeyHuffman, 2, 2, 0, g(2), nil, 2).u(0x3F000000, 0x7FFFFF).u(3).b(0x11, 0x01), "gap code table is over-subscribed"},
		{"sketchml dense huge n", frameOf(IDSketchML).b(smFlagDense).u(1<<30, 1, 0).u(0x3F800000), "needs"},
		{"sketchml dense no buckets", frameOf(IDSketchML).b(smFlagDense).u(5, 0, 0), "5 values but no buckets (q=0)"},
		{"sketchml dense index beyond q", frameOf(IDSketchML).b(smFlagDense).u(1, 3, 0).u(0x3F000000, 0, 0).b(0x03), "index 3 at value 0 exceeds q=3"},
		{"sketchml dense key flag", frameOf(IDSketchML).b(smFlagDense|smFlagKeyHuffman).u(0, 0, 0), "key coding flag on a dense frame"},

		{"uniform8 NaN scale", frameOf(IDUniform8).b(1).u(1).u32(0x7FC00000).b(1), "scale NaN: not a finite number"},
		{"uniform8 negative scale", frameOf(IDUniform8).b(1).u(1).u32(0xBF800000).b(1), "scale -1 is negative"},
		{"uniform8 code -128", frameOf(IDUniform8).b(1).u(1).u32(0x3F800000).b(0x80), "value code -128"},
		{"uniform8 huge n", frameOf(IDUniform8).b(1).u(1 << 30).u32(0x3F800000), "value codes needs 1073741824 bytes"},
		{"uniform8 keys vs bytes", frameOf(IDUniform8).b(0).u(50).u32(0x3F800000).u(3).b(0, 0x08, 0), "50 keys cannot fit in 3 bytes"},

		{"zstd huge raw length", frameOf(IDZstd).u(1<<32, 4).b(0x28, 0xb5, 0x2f, 0xfd), "raw body of 4294967296 bytes needs"},
		{"zstd garbage", frameOf(IDZstd).u(10, 4).b(1, 2, 3, 4), "zstd:"},
		{"zstd compressed length", frameOf(IDZstd).u(10, 400).b(1, 2, 3, 4), "compressed length 400 exceeds"},
	}
	// A zstd frame whose body is longer than declared.
	zf := must(zstdCodec.Encode(nil, Sparse{Keys: []uint64{1, 2, 3}, Values: []float32{1, 2, 3}}))
	p := parser{b: zf[headerLen:]}
	rawLen := p.uvarint("")
	return append(cases, hostileCase{"zstd length mismatch", frameOf(IDZstd).u(rawLen - 1).b(p.b...), "zstd:"})
}

func TestHostileFrames(t *testing.T) {
	if d, err := Decode(smValid()); err != nil || len(d.Keys) != 2 || d.Keys[1] != 9 || d.Values[0] != 0.5 {
		t.Fatalf("base frame: %+v, %v", d, err)
	}
	for _, tc := range hostileFrames() {
		d, err := Decode(tc.frame)
		if err == nil {
			t.Errorf("%s: decoded %+v, want an error containing %q", tc.name, d, tc.frag)
			continue
		}
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tc.frag) {
			t.Errorf("%s: error %q, want ErrCorrupt containing %q", tc.name, err, tc.frag)
		}
		// Only a NaN or an infinity is ErrNotFinite: receivers count it
		// as a poisoned value, not a damaged frame.
		if want := strings.Contains(tc.frag, "not a finite number"); errors.Is(err, ErrNotFinite) != want {
			t.Errorf("%s: errors.Is(err, ErrNotFinite) = %v, want %v", tc.name, !want, want)
		}
	}
}
