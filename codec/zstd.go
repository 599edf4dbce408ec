package codec

import (
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// Zstd is the general-purpose baseline: the body of a raw frame compressed
// with zstd. It is lossless.
//
// The zstd encoder and decoder keep reusable state, so a Zstd value holds
// one of each, made on first use. Both are safe for concurrent use and start
// no goroutines (only their stream modes would, and they are not used).
type Zstd struct {
	once sync.Once
	enc  *zstd.Encoder
	dec  *zstd.Decoder
	err  error
}

// zstdCodec is the registered instance; its decoder decodes every zstd frame.
var zstdCodec = &Zstd{}

func init() { register(IDZstd, zstdCodec, zstdCodec.decode) }

// Name implements Codec.
func (*Zstd) Name() string { return "zstd" }

func (z *Zstd) init() error {
	z.once.Do(func() {
		z.enc, z.err = zstd.NewWriter(nil,
			zstd.WithEncoderLevel(zstd.SpeedDefault),
			// The frame has no checksum elsewhere either; keep the
			// comparison with the other codecs fair.
			zstd.WithEncoderCRC(false))
		if z.err != nil {
			return
		}
		z.dec, z.err = zstd.NewReader(nil,
			// Decode into exactly the buffer the frame's declared size
			// allows, never more.
			zstd.WithDecodeAllCapLimit(true),
			zstd.WithDecoderLowmem(true))
	})
	return z.err
}

// Encode implements Codec.
func (z *Zstd) Encode(dst []byte, u Sparse) ([]byte, error) {
	dst, _, err := z.encode(dst, u, false)
	return dst, err
}

// zstdNeed bounds what decoding a frame whose raw body is rawLen bytes
// allocates: the decompressed body, then the raw decoder's output, which is
// never larger than the body, plus the zstd decoder's per-call scratch.
func zstdNeed(rawLen int) int {
	const perCall = 4 << 10
	return allocCost(rawLen) + allocCost(rawLen*2/3) + allocCost(rawLen/3+1) + perCall
}

func (z *Zstd) encode(dst []byte, u Sparse, _ bool) ([]byte, frameStats, error) {
	if err := z.init(); err != nil {
		return dst, frameStats{}, fmt.Errorf("zstd: %w", err)
	}
	raw, err := Raw{}.Encode(nil, u)
	if err != nil {
		return dst, frameStats{}, err
	}
	body := raw[headerLen:]
	comp := z.enc.EncodeAll(body, nil)
	start := len(dst)
	dst = appendHeader(dst, IDZstd)
	dst = binary.AppendUvarint(dst, uint64(len(body)))
	dst = binary.AppendUvarint(dst, uint64(len(comp)))
	dst = append(dst, comp...)
	// Highly compressible updates (long runs of equal values) would expand
	// past the decode budget; pad them.
	dst, pad := appendPadding(dst, start, zstdNeed(len(body)))
	return dst, frameStats{keyBytes: -1, padBytes: pad}, nil
}

func (z *Zstd) decode(body []byte) (Sparse, error) {
	if err := z.init(); err != nil {
		return Sparse{}, fmt.Errorf("zstd: %w", err)
	}
	p := parser{b: body}
	rawLen := p.count("raw length", maxCount)
	zl := p.count("compressed length", uint64(len(body)))
	comp := p.bytes(zl, "compressed body")
	if p.err != nil {
		return Sparse{}, p.err
	}
	if err := checkBudget(zstdNeed(rawLen), len(body)+headerLen, fmt.Sprintf("raw body of %d bytes", rawLen)); err != nil {
		return Sparse{}, err
	}
	if err := checkPadding(p.b); err != nil {
		return Sparse{}, err
	}
	out, err := z.dec.DecodeAll(comp, make([]byte, 0, rawLen))
	if err != nil {
		return Sparse{}, fmt.Errorf("%w: zstd: %v", ErrCorrupt, err)
	}
	if len(out) != rawLen {
		return Sparse{}, fmt.Errorf("%w: zstd body decompressed to %d bytes, header says %d", ErrCorrupt, len(out), rawLen)
	}
	return decodeRaw(out)
}
