package codec

import (
	"errors"
	"fmt"
	"math"
	"sort"
)

// Sparse is one additive update. Keys are sorted strictly ascending and
// Values has the same length. A dense update has Keys == nil and is indexed by
// position.
type Sparse struct {
	Keys   []uint64
	Values []float32
}

// Len is the number of values in the update.
func (s Sparse) Len() int { return len(s.Values) }

// Dense reports whether the update is a dense vector (no keys).
func (s Sparse) Dense() bool { return s.Keys == nil }

// Codec encodes updates into self-describing frames.
type Codec interface {
	// Name is the codec's name, as a user selects it.
	Name() string
	// Encode appends the frame of u to dst and returns the extended slice.
	// It refuses keys that are not strictly ascending and values that are
	// NaN or Inf.
	Encode(dst []byte, u Sparse) ([]byte, error)
}

// Header layout shared by every codec.
const (
	magic0        = 'S'
	magic1        = 'K'
	formatVersion = 1
	headerLen     = 4
)

// ID identifies the codec that wrote a frame.
type ID byte

// Codec ids as written on the wire. Values are stable: never renumber.
const (
	IDRaw      ID = 1
	IDSketchML ID = 2
	IDUniform8 ID = 3
	IDZstd     ID = 4
)

// Errors returned by decoders and encoders. Decoding errors wrap ErrCorrupt,
// so callers can count them as one reason; a frame that carries a NaN or
// an infinity wraps ErrNotFinite too, so a receiver can tell a poisoned
// value from a damaged frame.
var (
	ErrCorrupt      = errors.New("corrupt frame")
	ErrNotFinite    = errors.New("not a finite number")
	ErrUnknownCodec = errors.New("unknown codec")
	ErrBadInput     = errors.New("invalid update")
)

type decoderFunc func(body []byte) (Sparse, error)

type registration struct {
	name   string
	codec  Codec
	decode decoderFunc
}

var registry = map[ID]registration{}

func register(id ID, c Codec, dec decoderFunc) {
	if _, dup := registry[id]; dup {
		panic(fmt.Sprintf("codec: id %d registered twice", id))
	}
	registry[id] = registration{name: c.Name(), codec: c, decode: dec}
}

// ByName returns the codec a user selected by name.
func ByName(name string) (Codec, error) {
	for _, r := range registry {
		if r.name == name {
			return r.codec, nil
		}
	}
	return nil, fmt.Errorf("%w %q (known: %v)", ErrUnknownCodec, name, Names())
}

// Names lists the codec names, sorted.
func Names() []string {
	names := make([]string, 0, len(registry))
	for _, r := range registry {
		names = append(names, r.name)
	}
	sort.Strings(names)
	return names
}

// Decode decodes a frame written by any codec of this package.
func Decode(frame []byte) (Sparse, error) {
	id, err := parseHeader(frame)
	if err != nil {
		return Sparse{}, err
	}
	r, ok := registry[id]
	if !ok {
		return Sparse{}, fmt.Errorf("%w: codec id %d", ErrCorrupt, id)
	}
	u, err := r.decode(frame[headerLen:])
	if err != nil {
		return Sparse{}, fmt.Errorf("%s: %w", r.name, err)
	}
	return u, nil
}

// FrameCodec returns the name of the codec that wrote frame.
func FrameCodec(frame []byte) (string, error) {
	id, err := parseHeader(frame)
	if err != nil {
		return "", err
	}
	r, ok := registry[id]
	if !ok {
		return "", fmt.Errorf("%w: codec id %d", ErrCorrupt, id)
	}
	return r.name, nil
}

func appendHeader(dst []byte, id ID) []byte {
	return append(dst, magic0, magic1, formatVersion, byte(id))
}

func parseHeader(frame []byte) (ID, error) {
	if len(frame) < headerLen {
		return 0, fmt.Errorf("%w: %d bytes is shorter than the %d-byte header", ErrCorrupt, len(frame), headerLen)
	}
	if frame[0] != magic0 || frame[1] != magic1 {
		return 0, fmt.Errorf("%w: bad magic %#x %#x", ErrCorrupt, frame[0], frame[1])
	}
	if frame[2] != formatVersion {
		return 0, fmt.Errorf("%w: format version %d, want %d", ErrCorrupt, frame[2], formatVersion)
	}
	return ID(frame[3]), nil
}

// validate checks what every encoder requires of its input.
func validate(u Sparse) error {
	if u.Keys != nil && len(u.Keys) != len(u.Values) {
		return fmt.Errorf("%w: %d keys but %d values", ErrBadInput, len(u.Keys), len(u.Values))
	}
	for i, v := range u.Values {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			if u.Keys != nil {
				return fmt.Errorf("%w: value %v at key %d", ErrBadInput, v, u.Keys[i])
			}
			return fmt.Errorf("%w: value %v at index %d", ErrBadInput, v, i)
		}
	}
	for i := 1; i < len(u.Keys); i++ {
		if u.Keys[i] <= u.Keys[i-1] {
			return fmt.Errorf("%w: key %d follows key %d (keys must be strictly ascending)", ErrBadInput, u.Keys[i], u.Keys[i-1])
		}
	}
	return nil
}
