// Package wire owns the checked reading and writing of the msgpack shapes
// that sketchmesh puts on the network and on disk (update envelopes, sync requests, join requests
// and replies, membership announcements, snapshots, checkpoints), without
// reflection.
//
// It exists because msgpack's reflecting decoder trusts the lengths in its
// input: a few hostile bytes that claim a huge array or map make it
// allocate before it finds out the bytes are not there. A Reader checks
// every declared length against the bytes that remain (and against the
// caller's limit) before it allocates anything, so decoding costs at most a
// small multiple of the input's size, and every error says which field was
// wrong. Byte fields alias the input instead of copying it.
package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// ErrMalformed is wrapped by every decoding error.
var ErrMalformed = errors.New("malformed message")

// Reader decodes msgpack values from a byte slice with checked lengths.
type Reader struct {
	data []byte
	r    *bytes.Reader
	dec  *msgpack.Decoder
}

// NewReader reads from data.
func NewReader(data []byte) *Reader {
	r := bytes.NewReader(data)
	return &Reader{data: data, r: r, dec: msgpack.NewDecoder(r)}
}

// Remaining is the number of bytes not yet read.
func (r *Reader) Remaining() int { return r.r.Len() }

// End fails if bytes remain after the last field.
func (r *Reader) End() error {
	if n := r.r.Len(); n != 0 {
		return fmt.Errorf("%w: %d trailing bytes", ErrMalformed, n)
	}
	return nil
}

func (r *Reader) fail(what string, err error) error {
	return fmt.Errorf("%w: %s: %v", ErrMalformed, what, err)
}

// Array reads an array header and checks its length against the bytes
// that remain: each element takes at least minElem bytes (at least 1).
func (r *Reader) Array(what string, minElem int) (int, error) {
	n, err := r.dec.DecodeArrayLen()
	if err != nil {
		return 0, r.fail(what, err)
	}
	// Divide rather than multiply: n*minElem can overflow a 32-bit int.
	if n < 0 || n > r.r.Len()/max(minElem, 1) {
		return 0, fmt.Errorf("%w: %s claims %d elements, %d bytes remain", ErrMalformed, what, n, r.r.Len())
	}
	return n, nil
}

// Fields reads an array header that must hold exactly n elements.
func (r *Reader) Fields(what string, n int) error {
	k, err := r.Array(what, 1)
	if err != nil {
		return err
	}
	if k != n {
		return fmt.Errorf("%w: %s has %d fields, want %d", ErrMalformed, what, k, n)
	}
	return nil
}

// Bytes reads a str or bin value of at most limit bytes. The result
// aliases the input.
func (r *Reader) Bytes(what string, limit int) ([]byte, error) {
	n, err := r.dec.DecodeBytesLen()
	if err != nil {
		return nil, r.fail(what, err)
	}
	if n < 0 || n > r.r.Len() || n > limit {
		return nil, fmt.Errorf("%w: %s claims %d bytes, %d remain (limit %d)", ErrMalformed, what, n, r.r.Len(), limit)
	}
	start := len(r.data) - r.r.Len()
	if _, err := r.r.Seek(int64(n), io.SeekCurrent); err != nil {
		return nil, r.fail(what, err)
	}
	return r.data[start : start+n : start+n], nil
}

// String reads a str or bin value of at most limit bytes as a string.
func (r *Reader) String(what string, limit int) (string, error) {
	b, err := r.Bytes(what, limit)
	return string(b), err
}

// scalar peeks at the next value's code and refuses nil, which msgpack's
// decoder would otherwise read as a zero number or false.
func (r *Reader) scalar(what string) (byte, error) {
	c, err := r.dec.PeekCode()
	if err != nil {
		return 0, r.fail(what, err)
	}
	if c == msgpcode.Nil {
		return 0, fmt.Errorf("%w: %s is nil", ErrMalformed, what)
	}
	return c, nil
}

// Uint reads an unsigned integer. A negative value is refused rather than
// wrapped around to a large one.
func (r *Reader) Uint(what string) (uint64, error) {
	c, err := r.scalar(what)
	if err != nil {
		return 0, err
	}
	if c >= msgpcode.NegFixedNumLow || (c >= msgpcode.Int8 && c <= msgpcode.Int64) {
		v, err := r.dec.DecodeInt64()
		if err != nil {
			return 0, r.fail(what, err)
		}
		if v < 0 {
			return 0, fmt.Errorf("%w: %s is negative (%d)", ErrMalformed, what, v)
		}
		return uint64(v), nil
	}
	v, err := r.dec.DecodeUint64()
	if err != nil {
		return 0, r.fail(what, err)
	}
	return v, nil
}

// Int reads a signed integer. A uint64 above math.MaxInt64 is refused
// rather than wrapped around to a negative one.
func (r *Reader) Int(what string) (int64, error) {
	c, err := r.scalar(what)
	if err != nil {
		return 0, err
	}
	if c == msgpcode.Uint64 {
		v, err := r.dec.DecodeUint64()
		if err != nil {
			return 0, r.fail(what, err)
		}
		if v > math.MaxInt64 {
			return 0, fmt.Errorf("%w: %s %d overflows int64", ErrMalformed, what, v)
		}
		return int64(v), nil
	}
	v, err := r.dec.DecodeInt64()
	if err != nil {
		return 0, r.fail(what, err)
	}
	return v, nil
}

// Bool reads a boolean.
func (r *Reader) Bool(what string) (bool, error) {
	if _, err := r.scalar(what); err != nil {
		return false, err
	}
	v, err := r.dec.DecodeBool()
	if err != nil {
		return false, r.fail(what, err)
	}
	return v, nil
}

// Float reads a float64 and refuses NaN and infinities.
func (r *Reader) Float(what string) (float64, error) {
	if _, err := r.scalar(what); err != nil {
		return 0, err
	}
	v, err := r.dec.DecodeFloat64()
	if err != nil {
		return 0, r.fail(what, err)
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("%w: %s is %v", ErrMalformed, what, v)
	}
	return v, nil
}

// Floats reads a vector of float64 carried as a bin of little-endian
// values (see Writer.Floats), at most limit values, refusing NaN and
// infinities.
func (r *Reader) Floats(what string, limit int) ([]float64, error) {
	b, err := r.Bytes(what, limit*8)
	if err != nil {
		return nil, err
	}
	if len(b)%8 != 0 {
		return nil, fmt.Errorf("%w: %s holds %d bytes, not a whole number of float64", ErrMalformed, what, len(b))
	}
	out := make([]float64, len(b)/8)
	for i := range out {
		v := math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("%w: %s[%d] is %v", ErrMalformed, what, i, v)
		}
		out[i] = v
	}
	return out, nil
}

// Strings reads an array of at most limit strings of at most each bytes.
func (r *Reader) Strings(what string, limit, each int) ([]string, error) {
	n, err := r.Array(what, 1)
	if err != nil {
		return nil, err
	}
	if n > limit {
		return nil, fmt.Errorf("%w: %s has %d entries, limit %d", ErrMalformed, what, n, limit)
	}
	out := make([]string, n)
	for i := range out {
		if out[i], err = r.String(fmt.Sprintf("%s[%d]", what, i), each); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Writer encodes msgpack values into a buffer, in the smallest form that
// holds each value, byte for byte as msgpack/v5's Encoder writes them
// (TestWriterMatchesMsgpack). It appends to a slice rather than going
// through the Encoder: a relay writes an envelope per next hop, and at
// thousands of simulated nodes the Encoder's calls per field were a tenth
// of the simulator's time. Writes to memory cannot fail, so its methods
// return nothing.
type Writer struct {
	buf []byte
}

// NewWriter returns an empty writer.
func NewWriter() *Writer { return &Writer{} }

// NewWriterOn returns a writer that appends to buf[:0], using its room
// before it allocates: a caller that recycles its messages' buffers.
func NewWriterOn(buf []byte) *Writer { return &Writer{buf: buf[:0]} }

// Bytes returns what was written.
func (w *Writer) Bytes() []byte { return w.buf }

// head writes a header: code and n in size bytes, big-endian.
func (w *Writer) head(code byte, n uint64, size int) {
	w.buf = append(w.buf, code)
	for i := size - 1; i >= 0; i-- {
		w.buf = append(w.buf, byte(n>>(8*i)))
	}
}

// Array writes an array header of n elements.
func (w *Writer) Array(n int) {
	switch {
	case n < 16:
		w.buf = append(w.buf, msgpcode.FixedArrayLow|byte(n))
	case n <= math.MaxUint16:
		w.head(msgpcode.Array16, uint64(n), 2)
	default:
		w.head(msgpcode.Array32, uint64(n), 4)
	}
}

// Bin writes a bin value. A nil slice is written as an empty bin, which
// Reader.Bytes takes (msgpack's encoder wrote nil, which it refuses).
func (w *Writer) Bin(b []byte) {
	w.binHeader(len(b))
	w.buf = append(w.buf, b...)
}

// binHeader writes the header of a bin value of l bytes.
func (w *Writer) binHeader(l int) { w.lengthHead(l, msgpcode.Bin8, msgpcode.Bin16, msgpcode.Bin32) }

// lengthHead writes the header of a value of length l in the smallest
// of the forms with 1, 2 and 4 length bytes, whose codes are c8, c16 and
// c32.
func (w *Writer) lengthHead(l int, c8, c16, c32 byte) {
	switch {
	case l < 256:
		w.head(c8, uint64(l), 1)
	case l <= math.MaxUint16:
		w.head(c16, uint64(l), 2)
	default:
		w.head(c32, uint64(l), 4)
	}
}

// String writes a str value.
func (w *Writer) String(s string) {
	if l := len(s); l < 32 {
		w.buf = append(w.buf, msgpcode.FixedStrLow|byte(l))
	} else {
		w.lengthHead(l, msgpcode.Str8, msgpcode.Str16, msgpcode.Str32)
	}
	w.buf = append(w.buf, s...)
}

// Uint writes an unsigned integer.
func (w *Writer) Uint(v uint64) {
	switch {
	case v <= math.MaxInt8:
		w.buf = append(w.buf, byte(v))
	case v <= math.MaxUint8:
		w.head(msgpcode.Uint8, v, 1)
	case v <= math.MaxUint16:
		w.head(msgpcode.Uint16, v, 2)
	case v <= math.MaxUint32:
		w.head(msgpcode.Uint32, v, 4)
	default:
		w.head(msgpcode.Uint64, v, 8)
	}
}

// Int writes a signed integer.
func (w *Writer) Int(v int64) {
	switch {
	case v >= 0:
		w.Uint(uint64(v))
	case v >= int64(int8(msgpcode.NegFixedNumLow)):
		w.buf = append(w.buf, byte(v))
	case v >= math.MinInt8:
		w.head(msgpcode.Int8, uint64(v), 1)
	case v >= math.MinInt16:
		w.head(msgpcode.Int16, uint64(v), 2)
	case v >= math.MinInt32:
		w.head(msgpcode.Int32, uint64(v), 4)
	default:
		w.head(msgpcode.Int64, uint64(v), 8)
	}
}

// Bool writes a boolean.
func (w *Writer) Bool(v bool) {
	if v {
		w.buf = append(w.buf, msgpcode.True)
	} else {
		w.buf = append(w.buf, msgpcode.False)
	}
}

// Float writes a float64.
func (w *Writer) Float(v float64) { w.head(msgpcode.Double, math.Float64bits(v), 8) }

// Floats writes a float64 vector as one bin of little-endian values.
func (w *Writer) Floats(v []float64) {
	w.binHeader(8 * len(v))
	for _, x := range v {
		w.buf = binary.LittleEndian.AppendUint64(w.buf, math.Float64bits(x))
	}
}

// Strings writes an array of strings.
func (w *Writer) Strings(v []string) {
	w.Array(len(v))
	for _, s := range v {
		w.String(s)
	}
}
