package node

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/vmihailenco/msgpack/v5"
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
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	// Writes to a bytes.Buffer cannot fail, so errors are impossible here.
	_ = enc.EncodeArrayLen(2)
	_ = enc.EncodeUint(wireVersion)
	_ = enc.EncodeArrayLen(len(updates))
	for _, u := range updates {
		fields := 3
		if len(u.Sig) > 0 {
			fields = 4
		}
		_ = enc.EncodeArrayLen(fields)
		_ = enc.EncodeString(u.Origin)
		_ = enc.EncodeUint(u.Clock)
		_ = enc.EncodeBytes(u.Frame)
		if fields == 4 {
			_ = enc.EncodeBytes(u.Sig)
		}
	}
	return buf.Bytes()
}

// encodeEnvelopes writes updates, in order, as envelopes of at most limit
// bytes each, filling each before it starts the next. An update too large
// for any envelope travels alone (its receivers refuse it, as they would
// any oversized message).
func encodeEnvelopes(updates []Update, limit int) [][]byte {
	var out [][]byte
	start, size := 0, 0
	for i, u := range updates {
		us := updateWireBytes(u)
		if i > start && envelopeHeaderBytes(i-start+1)+size+us > limit {
			out = append(out, EncodeEnvelope(updates[start:i]))
			start, size = i, 0
		}
		size += us
	}
	return append(out, EncodeEnvelope(updates[start:]))
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
	if u.Frame == nil {
		n-- // written as msgpack nil, one byte
	}
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
// anything is allocated, so a hostile header cannot make it allocate more
// than data's own size. Frames alias data.
func DecodeEnvelope(data []byte) ([]Update, error) {
	if len(data) > MaxEnvelopeBytes {
		return nil, fmt.Errorf("%w: %d bytes exceeds the %d-byte limit", ErrBadEnvelope, len(data), MaxEnvelopeBytes)
	}
	r := bytes.NewReader(data)
	dec := msgpack.NewDecoder(r)
	n, err := arrayLen(dec, r, "envelope")
	if err != nil {
		return nil, err
	}
	if n != 2 {
		return nil, fmt.Errorf("%w: envelope has %d fields, want 2", ErrBadEnvelope, n)
	}
	ver, err := dec.DecodeUint64()
	if err != nil {
		return nil, fmt.Errorf("%w: version: %v", ErrBadEnvelope, err)
	}
	if ver != wireVersion {
		return nil, fmt.Errorf("%w: version %d, want %d", ErrBadEnvelope, ver, wireVersion)
	}
	count, err := arrayLen(dec, r, "update list")
	if err != nil {
		return nil, err
	}
	// Each update takes at least 4 bytes (array header, origin, clock, bin header).
	if count > r.Len()/4 {
		return nil, fmt.Errorf("%w: %d updates cannot fit in %d bytes", ErrBadEnvelope, count, r.Len())
	}
	updates := make([]Update, 0, count)
	for i := 0; i < count; i++ {
		u, err := decodeUpdate(dec, r, data)
		if err != nil {
			return nil, fmt.Errorf("update %d: %w", i, err)
		}
		updates = append(updates, u)
	}
	if r.Len() != 0 {
		return nil, fmt.Errorf("%w: %d trailing bytes", ErrBadEnvelope, r.Len())
	}
	return updates, nil
}

func decodeUpdate(dec *msgpack.Decoder, r *bytes.Reader, data []byte) (Update, error) {
	n, err := arrayLen(dec, r, "update")
	if err != nil {
		return Update{}, err
	}
	if n != 3 && n != 4 {
		return Update{}, fmt.Errorf("%w: update has %d fields, want 3 or 4", ErrBadEnvelope, n)
	}
	origin, err := byteField(dec, r, data, "origin", maxOriginBytes)
	if err != nil {
		return Update{}, err
	}
	if len(origin) == 0 {
		return Update{}, fmt.Errorf("%w: empty origin", ErrBadEnvelope)
	}
	clock, err := dec.DecodeUint64()
	if err != nil {
		return Update{}, fmt.Errorf("%w: clock: %v", ErrBadEnvelope, err)
	}
	frame, err := byteField(dec, r, data, "frame", MaxEnvelopeBytes)
	if err != nil {
		return Update{}, err
	}
	u := Update{Origin: string(origin), Clock: clock, Frame: frame}
	if n == 4 {
		if u.Sig, err = byteField(dec, r, data, "signature", MaxSignatureBytes); err != nil {
			return Update{}, err
		}
		if len(u.Sig) == 0 {
			// The encoder writes an unsigned update with three fields: an
			// empty fourth is not the canonical form.
			return Update{}, fmt.Errorf("%w: empty signature field", ErrBadEnvelope)
		}
	}
	return u, nil
}

func arrayLen(dec *msgpack.Decoder, r *bytes.Reader, what string) (int, error) {
	n, err := dec.DecodeArrayLen()
	if err != nil {
		return 0, fmt.Errorf("%w: %s: %v", ErrBadEnvelope, what, err)
	}
	if n < 0 || n > r.Len() {
		return 0, fmt.Errorf("%w: %s claims %d elements, %d bytes remain", ErrBadEnvelope, what, n, r.Len())
	}
	return n, nil
}

// byteField reads a str or bin value without copying: it checks the declared
// length against the remaining bytes and returns a sub-slice of data.
func byteField(dec *msgpack.Decoder, r *bytes.Reader, data []byte, what string, limit int) ([]byte, error) {
	n, err := dec.DecodeBytesLen()
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrBadEnvelope, what, err)
	}
	if n < 0 || n > r.Len() || n > limit {
		return nil, fmt.Errorf("%w: %s claims %d bytes, %d remain (limit %d)", ErrBadEnvelope, what, n, r.Len(), limit)
	}
	start := len(data) - r.Len()
	if _, err := r.Seek(int64(n), io.SeekCurrent); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrBadEnvelope, what, err)
	}
	return data[start : start+n : start+n], nil
}
