package node

import (
	"errors"
	"fmt"
	"slices"

	"github.com/sketchmesh/sketchmesh/wire"
)

// Update is one origin's additive update for one iteration, as it travels:
// the codec frame and its signature are carried byte for byte from the
// origin to every receiver, through any number of relays.
type Update struct {
	Origin string
	Clock  uint64
	Frame  []byte
	// Sig is the origin's signature over (mesh, origin, clock, SHA-256 of
	// Frame) (see Authenticator); empty in an unsigned mesh.
	Sig []byte
}

// UpdateID names one update: its origin and clock.
type UpdateID struct {
	Origin string
	Clock  uint64
}

// wireVersion is the envelope format version.
const wireVersion = 1

// Limits on what an envelope may hold. They bound the work and memory a
// single network message can cost a receiver.
const (
	MaxEnvelopeBytes = 64 << 20
	maxOriginBytes   = 256
	// MaxSignatureBytes bounds an update's signature: an Ed25519 signature
	// takes 64 bytes, an RSA-4096 one 512.
	MaxSignatureBytes = 1024
)

// ErrBadEnvelope is wrapped by every envelope decoding error.
var ErrBadEnvelope = errors.New("bad envelope")

// EncodeEnvelope writes updates as one network message:
//
//	msgpack array [version uint, array of update]
//	update: [origin str, clock uint, frame bin]             unsigned
//	        [origin str, clock uint, frame bin, sig bin]    signed
//
// An update with an empty Sig is written with three fields, so an unsigned
// mesh sends the same bytes as before signatures existed. Frames and
// signatures are msgpack bin values with explicit lengths, so the decoder
// can check each length against the bytes that remain before it reads.
func EncodeEnvelope(updates []Update) []byte {
	return writeEnvelope(nil, envelopeBytes(updates), updates)
}

// writeEnvelope is EncodeEnvelope into buf's room (buf[:0]), made anew
// when it holds less than size, the envelope's size (envelopeBytes).
func writeEnvelope(buf []byte, size int, updates []Update) []byte {
	if cap(buf) < size {
		buf = make([]byte, 0, size)
	}
	w := wire.NewWriterOn(buf)
	w.Array(2)
	w.Uint(wireVersion)
	w.Array(len(updates))
	for _, u := range updates {
		fields := 3
		if len(u.Sig) > 0 {
			fields = 4
		}
		w.Array(fields)
		w.String(u.Origin)
		w.Uint(u.Clock)
		w.Bin(u.Frame)
		if fields == 4 {
			w.Bin(u.Sig)
		}
	}
	return w.Bytes()
}

// envelopeBytes is the exact size of the envelope of updates.
func envelopeBytes(updates []Update) int {
	size := envelopeHeaderBytes(len(updates))
	for _, u := range updates {
		size += updateWireBytes(u)
	}
	return size
}

// encodeEnvelopes writes updates, in order, as envelopes of at most limit
// bytes each, filling each before it starts the next, each in a buffer
// from buffers (nil: new ones). An update too large for any envelope
// travels alone (its receivers refuse it, as they would any oversized
// message).
func encodeEnvelopes(updates []Update, limit int, buffers *QueuePool) [][]byte {
	var out [][]byte
	start, size := 0, 0
	for i, u := range updates {
		us := updateWireBytes(u)
		if i > start && envelopeHeaderBytes(i-start+1)+size+us > limit {
			out = append(out, buffers.envelope(updates[start:i]))
			start, size = i, 0
		}
		size += us
	}
	return append(out, buffers.envelope(updates[start:]))
}

// envelopeHeaderBytes is the size of an envelope's header for count
// updates: its array header, the version and the update list's header.
func envelopeHeaderBytes(count int) int {
	return 1 + 1 + arrayHeaderBytes(count)
}

// updateWireBytes is the exact size of u in an envelope (see
// EncodeEnvelope).
func updateWireBytes(u Update) int {
	n := 1 + strHeaderBytes(len(u.Origin)) + len(u.Origin) + uintBytes(u.Clock) + binHeaderBytes(len(u.Frame)) + len(u.Frame)
	if len(u.Sig) > 0 {
		n += binHeaderBytes(len(u.Sig)) + len(u.Sig)
	}
	return n
}

// The sizes of msgpack headers and unsigned integers, as msgpack/v5 writes
// them (the smallest form that holds the value).
func arrayHeaderBytes(n int) int {
	switch {
	case n < 16:
		return 1
	case n <= 0xffff:
		return 3
	}
	return 5
}

func strHeaderBytes(n int) int {
	switch {
	case n < 32:
		return 1
	case n <= 0xff:
		return 2
	case n <= 0xffff:
		return 3
	}
	return 5
}

func binHeaderBytes(n int) int {
	switch {
	case n <= 0xff:
		return 2
	case n <= 0xffff:
		return 3
	}
	return 5
}

func uintBytes(v uint64) int {
	switch {
	case v <= 0x7f:
		return 1
	case v <= 0xff:
		return 2
	case v <= 0xffff:
		return 3
	case v <= 0xffffffff:
		return 5
	}
	return 9
}

// DecodeEnvelope parses a network message. It never reflect-decodes: every
// array and byte length is checked against what remains of data before
// anything is allocated (wire.Reader), so a hostile header cannot make it
// allocate more than data's own size. Frames alias data.
func DecodeEnvelope(data []byte) ([]Update, error) {
	updates, err := decodeEnvelope(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadEnvelope, err)
	}
	return updates, nil
}

func decodeEnvelope(data []byte) ([]Update, error) { return decodeEnvelopeInto(nil, data, nil) }

// decodeEnvelopeInto is decodeEnvelope appending to updates, which has no
// elements, in its capacity when it holds them.
//
// intern, when not nil, gives the string for an update's origin bytes: a
// core passes its slot table's (SlotTable.origin), which returns the
// member's name it holds instead of a new string, one per update and core
// received, P² an iteration in a simulator.
func decodeEnvelopeInto(updates []Update, data []byte, intern func([]byte) string) ([]Update, error) {
	if len(data) > MaxEnvelopeBytes {
		return nil, fmt.Errorf("%d bytes exceeds the %d-byte limit", len(data), MaxEnvelopeBytes)
	}
	r := wire.NewReader(data)
	if err := r.Fields("envelope", 2); err != nil {
		return nil, err
	}
	ver, err := r.Uint("version")
	if err != nil {
		return nil, err
	}
	if ver != wireVersion {
		return nil, fmt.Errorf("version %d, want %d", ver, wireVersion)
	}
	count, err := r.Array("update list", 1)
	if err != nil {
		return nil, err
	}
	// Each update takes at least 4 bytes (array header, origin, clock, bin header).
	if count > r.Remaining()/4 {
		return nil, fmt.Errorf("%d updates cannot fit in %d bytes", count, r.Remaining())
	}
	updates = slices.Grow(updates, count)
	for i := 0; i < count; i++ {
		u, err := readUpdate(r, intern)
		if err != nil {
			return nil, fmt.Errorf("update %d: %w", i, err)
		}
		updates = append(updates, u)
	}
	if err := r.End(); err != nil {
		return nil, err
	}
	return updates, nil
}

func readUpdate(r *wire.Reader, intern func([]byte) string) (Update, error) {
	n, err := r.Array("update", 1)
	if err != nil {
		return Update{}, err
	}
	if n != 3 && n != 4 {
		return Update{}, fmt.Errorf("update has %d fields, want 3 or 4", n)
	}
	origin, err := r.Bytes("origin", maxOriginBytes)
	if err != nil {
		return Update{}, err
	}
	if len(origin) == 0 {
		return Update{}, errors.New("empty origin")
	}
	clock, err := r.Uint("clock")
	if err != nil {
		return Update{}, err
	}
	frame, err := r.Bytes("frame", MaxEnvelopeBytes)
	if err != nil {
		return Update{}, err
	}
	u := Update{Clock: clock, Frame: frame}
	if intern != nil {
		u.Origin = intern(origin)
	} else {
		u.Origin = string(origin)
	}
	if n == 4 {
		if u.Sig, err = r.Bytes("signature", MaxSignatureBytes); err != nil {
			return Update{}, err
		}
		if len(u.Sig) == 0 {
			// The encoder writes an unsigned update with three fields: an
			// empty fourth is not the canonical form.
			return Update{}, errors.New("empty signature field")
		}
	}
	return u, nil
}
