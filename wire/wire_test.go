package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/sketchmesh/sketchmesh/wire/wiretest"
	"github.com/vmihailenco/msgpack/v5"
)

// huge is how a claim of 0xffffffff reads back in an error: msgpack
// returns lengths as int, so on a 32-bit platform it is -1.
var huge = func() string { n := uint32(math.MaxUint32); return fmt.Sprint(int(n)) }()

func TestRoundTrip(t *testing.T) {
	long := strings.Repeat("x", 70000)
	bin := bytes.Repeat([]byte{0xab}, 300)
	vec := []float64{1, -2, 0.5, math.Copysign(0, -1), math.MaxFloat64, math.SmallestNonzeroFloat64}

	w := NewWriter()
	w.Array(3)
	for _, v := range []uint64{0, 127, 128, 255, 256, 1 << 16, 1 << 32, math.MaxUint64} {
		w.Uint(v)
	}
	for _, v := range []int64{0, -1, -32, -33, -129, math.MinInt64, math.MaxInt64} {
		w.Int(v)
	}
	w.Bool(true)
	w.Bool(false)
	w.Float(math.Copysign(0, -1))
	w.Float(1.5)
	w.Float(-math.MaxFloat64)
	w.String("")
	w.String(strings.Repeat("s", 31))
	w.String(strings.Repeat("s", 32))
	w.String(strings.Repeat("s", 300))
	w.String(long)
	w.Bin(nil)
	w.Bin(bin)
	w.Floats(nil)
	w.Floats(vec)
	w.Strings(nil)
	w.Strings([]string{"a", "", long})
	data := w.Bytes()

	r := NewReader(data)
	if r.Remaining() != len(data) {
		t.Fatalf("Remaining %d before reading %d bytes", r.Remaining(), len(data))
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	if n, err := r.Array("array", 1); err != nil || n != 3 {
		t.Fatalf("Array = %d, %v, want 3", n, err)
	}
	for _, want := range []uint64{0, 127, 128, 255, 256, 1 << 16, 1 << 32, math.MaxUint64} {
		v, err := r.Uint("uint")
		must(err)
		if v != want {
			t.Fatalf("Uint = %d, want %d", v, want)
		}
	}
	for _, want := range []int64{0, -1, -32, -33, -129, math.MinInt64, math.MaxInt64} {
		v, err := r.Int("int")
		must(err)
		if v != want {
			t.Fatalf("Int = %d, want %d", v, want)
		}
	}
	for _, want := range []bool{true, false} {
		v, err := r.Bool("bool")
		must(err)
		if v != want {
			t.Fatalf("Bool = %v, want %v", v, want)
		}
	}
	for _, want := range []float64{math.Copysign(0, -1), 1.5, -math.MaxFloat64} {
		v, err := r.Float("float")
		must(err)
		if math.Float64bits(v) != math.Float64bits(want) {
			t.Fatalf("Float = %v, want %v", v, want)
		}
	}
	for _, want := range []string{"", strings.Repeat("s", 31), strings.Repeat("s", 32), strings.Repeat("s", 300), long} {
		v, err := r.String("string", len(want))
		must(err)
		if v != want {
			t.Fatalf("String = %d bytes, want %d", len(v), len(want))
		}
	}
	b, err := r.Bytes("empty bin", 0)
	must(err)
	if len(b) != 0 {
		t.Fatalf("empty bin read as %d bytes", len(b))
	}
	b, err = r.Bytes("bin", len(bin))
	must(err)
	if !bytes.Equal(b, bin) {
		t.Fatalf("Bytes = % x", b)
	}
	f, err := r.Floats("no floats", 0)
	must(err)
	if len(f) != 0 {
		t.Fatalf("empty vector read as %v", f)
	}
	f, err = r.Floats("floats", len(vec))
	must(err)
	if len(f) != len(vec) {
		t.Fatalf("Floats = %v, want %v", f, vec)
	}
	for i := range vec {
		if math.Float64bits(f[i]) != math.Float64bits(vec[i]) {
			t.Fatalf("Floats = %v, want %v", f, vec)
		}
	}
	s, err := r.Strings("no strings", 0, 0)
	must(err)
	if len(s) != 0 {
		t.Fatalf("empty list read as %q", s)
	}
	s, err = r.Strings("strings", 3, len(long))
	must(err)
	if !slices.Equal(s, []string{"a", "", long}) {
		t.Fatalf("Strings = %d entries", len(s))
	}
	must(r.End())
	if r.Remaining() != 0 {
		t.Fatalf("Remaining %d at the end", r.Remaining())
	}
}

// Fields that the reader refuses, each with what the error must say. Every
// error wraps ErrMalformed and names the field ("the field").
func TestReaderErrors(t *testing.T) {
	uintRead := func(r *Reader) error { _, err := r.Uint("the field"); return err }
	intRead := func(r *Reader) error { _, err := r.Int("the field"); return err }
	boolRead := func(r *Reader) error { _, err := r.Bool("the field"); return err }
	floatRead := func(r *Reader) error { _, err := r.Float("the field"); return err }
	floatsRead := func(limit int) func(r *Reader) error {
		return func(r *Reader) error { _, err := r.Floats("the field", limit); return err }
	}
	bytesRead := func(limit int) func(r *Reader) error {
		return func(r *Reader) error { _, err := r.Bytes("the field", limit); return err }
	}
	stringRead := func(limit int) func(r *Reader) error {
		return func(r *Reader) error { _, err := r.String("the field", limit); return err }
	}
	arrayRead := func(minElem int) func(r *Reader) error {
		return func(r *Reader) error { _, err := r.Array("the field", minElem); return err }
	}
	fieldsRead := func(n int) func(r *Reader) error {
		return func(r *Reader) error { return r.Fields("the field", n) }
	}
	stringsRead := func(limit, each int) func(r *Reader) error {
		return func(r *Reader) error { _, err := r.Strings("the field", limit, each); return err }
	}
	floats := func(v ...float64) []byte {
		w := NewWriter()
		w.Floats(v)
		return w.Bytes()
	}
	pad := func(b []byte, n int) []byte { return append(b, make([]byte, n)...) }

	cases := []struct {
		name string
		data []byte
		read func(*Reader) error
		want string
	}{
		{"uint: empty input", nil, uintRead, "EOF"},
		{"uint: a string", []byte{0xa1, 'x'}, uintRead, "invalid code"},
		{"uint: a float", []byte{0xcb, 0, 0, 0, 0, 0, 0, 0, 0}, uintRead, "invalid code"},
		{"uint: nil", []byte{0xc0}, uintRead, "is nil"},
		{"uint: negative fixint", []byte{0xff}, uintRead, "negative (-1)"},
		{"uint: negative int8", []byte{0xd0, 0x80}, uintRead, "negative (-128)"},
		{"uint: negative int16", []byte{0xd1, 0xff, 0xfe}, uintRead, "negative (-2)"},
		{"uint: negative int32", []byte{0xd2, 0x80, 0, 0, 0}, uintRead, "negative"},
		{"uint: negative int64", []byte{0xd3, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, uintRead, "negative (-1)"},
		{"uint: truncated uint64", []byte{0xcf, 1, 2}, uintRead, "the field"},
		{"uint: truncated int32", []byte{0xd2, 0}, uintRead, "the field"},
		{"int: uint64 past int64", []byte{0xcf, 0x80, 0, 0, 0, 0, 0, 0, 0}, intRead, "overflows int64"},
		{"int: nil", []byte{0xc0}, intRead, "is nil"},
		{"int: a bool", []byte{0xc3}, intRead, "invalid code"},
		{"int: truncated uint64", []byte{0xcf, 0x80}, intRead, "the field"},
		{"bool: nil", []byte{0xc0}, boolRead, "is nil"},
		{"bool: an integer", []byte{0x01}, boolRead, "invalid code"},
		{"bool: empty input", nil, boolRead, "EOF"},
		{"float: nil", []byte{0xc0}, floatRead, "is nil"},
		{"float: a string", []byte{0xa1, 'x'}, floatRead, "invalid code"},
		{"float: NaN", []byte{0xcb, 0x7f, 0xf8, 0, 0, 0, 0, 0, 1}, floatRead, "is NaN"},
		{"float: +Inf", []byte{0xcb, 0x7f, 0xf0, 0, 0, 0, 0, 0, 0}, floatRead, "is +Inf"},
		{"float: -Inf", []byte{0xcb, 0xff, 0xf0, 0, 0, 0, 0, 0, 0}, floatRead, "is -Inf"},
		{"float: float32 NaN", []byte{0xca, 0x7f, 0xc0, 0, 0}, floatRead, "is NaN"},
		{"float: float32 Inf", []byte{0xca, 0x7f, 0x80, 0, 0}, floatRead, "is +Inf"},
		{"float: truncated", []byte{0xcb, 0x3f, 0xf0}, floatRead, "the field"},
		{"floats: NaN", floats(1, math.NaN()), floatsRead(2), "the field[1] is NaN"},
		{"floats: Inf", floats(math.Inf(-1)), floatsRead(2), "the field[0] is -Inf"},
		{"floats: not whole", []byte{0xc4, 7, 0, 0, 0, 0, 0, 0, 0}, floatsRead(2), "not a whole number"},
		{"floats: over the limit", floats(1, 2, 3), floatsRead(2), "limit 16"},
		{"floats: bin32 huge", []byte{0xc6, 0xff, 0xff, 0xff, 0xff}, floatsRead(1 << 27), "claims " + huge + " bytes"},
		{"floats: an array", []byte{0x91, 0x01}, floatsRead(2), "invalid code"},
		{"bytes: over the limit", []byte{0xa3, 'a', 'b', 'c'}, bytesRead(2), "claims 3 bytes, 3 remain (limit 2)"},
		{"bytes: more than remain", []byte{0xc4, 4, 'a'}, bytesRead(10), "claims 4 bytes, 1 remain"},
		{"bytes: bin32 huge", []byte{0xc6, 0xff, 0xff, 0xff, 0xff, 0}, bytesRead(math.MaxInt32), "claims " + huge + " bytes"},
		{"bytes: str32 huge", []byte{0xdb, 0xff, 0xff, 0xff, 0xff, 0}, bytesRead(math.MaxInt32), "claims " + huge + " bytes"},
		{"bytes: bin16 past the end", []byte{0xc5, 0xff, 0xff, 0, 0}, bytesRead(math.MaxInt32), "claims 65535 bytes"},
		{"bytes: truncated header", []byte{0xc6, 0xff}, bytesRead(10), "the field"},
		{"bytes: nil", []byte{0xc0}, bytesRead(10), "claims -1 bytes"},
		{"bytes: an integer", []byte{0x05}, bytesRead(10), "invalid code"},
		{"string: over the limit", []byte{0xa2, 'a', 'b'}, stringRead(1), "limit 1"},
		{"array: array32 huge", []byte{0xdd, 0xff, 0xff, 0xff, 0xff}, arrayRead(1), "claims " + huge + " elements"},
		{"array: array16 past the end", pad([]byte{0xdc, 0x01, 0x00}, 255), arrayRead(1), "claims 256 elements, 255 bytes remain"},
		{"array: elements too small", pad([]byte{0x93}, 5), arrayRead(2), "claims 3 elements, 5 bytes remain"},
		{"array: map32", []byte{0xdf, 0xff, 0xff, 0xff, 0xff}, arrayRead(1), "invalid code"},
		{"array: nil", []byte{0xc0}, arrayRead(1), "claims -1 elements"},
		{"array: truncated header", []byte{0xdd, 0}, arrayRead(1), "the field"},
		// On a 32-bit platform 0x33333334*5 overflows to 4.
		{"array: claim times size overflows", pad([]byte{0xdd, 0x33, 0x33, 0x33, 0x34}, 8), arrayRead(5), "claims 858993460 elements"},
		{"fields: too few", []byte{0x92, 1, 2}, fieldsRead(3), "has 2 fields, want 3"},
		{"fields: too many", []byte{0x94, 1, 2, 3, 4}, fieldsRead(3), "has 4 fields, want 3"},
		{"fields: array32 huge", []byte{0xdd, 0xff, 0xff, 0xff, 0xff}, fieldsRead(3), "claims " + huge},
		{"strings: too many", []byte{0x93, 0xa0, 0xa0, 0xa0}, stringsRead(2, 1), "3 entries, limit 2"},
		{"strings: entry over the limit", []byte{0x92, 0xa0, 0xa2, 'a', 'b'}, stringsRead(2, 1), "the field[1] claims 2 bytes"},
		{"strings: entry not a string", []byte{0x91, 0x07}, stringsRead(2, 1), "the field[0]"},
		{"strings: array32 huge", []byte{0xdd, 0xff, 0xff, 0xff, 0xff}, stringsRead(1<<20, 1), "claims " + huge + " elements"},
		{"strings: entry str32 huge", []byte{0x91, 0xdb, 0xff, 0xff, 0xff, 0xff}, stringsRead(1, 1<<20), "the field[0] claims " + huge + " bytes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.read(NewReader(c.data))
			if err == nil {
				t.Fatal("accepted")
			}
			if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "the field") || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q, want ErrMalformed naming the field and saying %q", err, c.want)
			}
			if a := wiretest.Allocated(func() { _ = c.read(NewReader(c.data)) }); a > wiretest.AllocLimit(len(c.data)) {
				t.Fatalf("refusing %d bytes allocated %d", len(c.data), a)
			}
		})
	}
}

func TestEndRefusesTrailingBytes(t *testing.T) {
	r := NewReader([]byte{0x01, 0x02, 0x03})
	if _, err := r.Uint("x"); err != nil {
		t.Fatal(err)
	}
	if err := r.End(); !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "2 trailing bytes") {
		t.Fatalf("End = %v, want 2 trailing bytes", err)
	}
	if r.Remaining() != 2 {
		t.Fatalf("Remaining = %d after End, want 2", r.Remaining())
	}
}

// Bytes returns a window of the input whose capacity ends with it, so an
// append by the caller cannot write over the bytes that follow.
func TestBytesAliasInput(t *testing.T) {
	w := NewWriter()
	w.Bin([]byte{1, 2, 3})
	w.String("rest")
	data := w.Bytes()
	r := NewReader(data)
	b, err := r.Bytes("b", 3)
	if err != nil {
		t.Fatal(err)
	}
	if &b[0] != &data[2] || cap(b) != 3 {
		t.Fatalf("Bytes does not alias the input: cap %d", cap(b))
	}
	_ = append(b, 9, 9, 9)
	if s, err := r.String("rest", 4); err != nil || s != "rest" {
		t.Fatalf("after an append to the field, the next reads %q, %v", s, err)
	}
}

// Claims far beyond the input are refused before anything is allocated,
// whatever limit the caller allows.
func TestHostileClaimsDoNotAllocate(t *testing.T) {
	heads := map[string][]byte{
		"array32": {0xdd, 0xff, 0xff, 0xff, 0xff},
		"map32":   {0xdf, 0xff, 0xff, 0xff, 0xff},
		"bin32":   {0xc6, 0xff, 0xff, 0xff, 0xff},
		"str32":   {0xdb, 0xff, 0xff, 0xff, 0xff},
		"array16": {0xdc, 0xff, 0xff},
		"bin16":   {0xc5, 0xff, 0xff},
	}
	reads := map[string]func(*Reader) error{
		"Array":   func(r *Reader) error { _, err := r.Array("v", 0); return err },
		"Fields":  func(r *Reader) error { return r.Fields("v", 4) },
		"Bytes":   func(r *Reader) error { _, err := r.Bytes("v", math.MaxInt); return err },
		"String":  func(r *Reader) error { _, err := r.String("v", math.MaxInt); return err },
		"Floats":  func(r *Reader) error { _, err := r.Floats("v", 1<<27); return err },
		"Strings": func(r *Reader) error { _, err := r.Strings("v", math.MaxInt32, math.MaxInt32); return err },
		"Uint":    func(r *Reader) error { _, err := r.Uint("v"); return err },
		"Float":   func(r *Reader) error { _, err := r.Float("v"); return err },
	}
	for hn, head := range heads {
		for rn, read := range reads {
			// The claim is followed by a little, not by what it claims.
			data := append(slices.Clone(head), make([]byte, 16)...)
			if err := read(NewReader(data)); err == nil {
				t.Errorf("%s read from %s: accepted", rn, hn)
			} else if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "v") {
				t.Errorf("%s read from %s: %v", rn, hn, err)
			}
			if a := wiretest.Allocated(func() { _ = read(NewReader(data)) }); a > wiretest.AllocLimit(len(data)) {
				t.Errorf("%s read from %s allocated %d bytes", rn, hn, a)
			}
		}
	}
}

// fuzzLimits are the limits a FuzzReader op can pass, chosen by its high
// nibble.
var fuzzLimits = [16]int{0, 1, 2, 3, 7, 8, 16, 31, 32, 255, 256, 1 << 10, 65535, 65536, 1 << 20, 1 << 27}

// Reader operations, chosen by an op byte's low nibble (modulo opCount).
const (
	opArray = iota
	opFields
	opBytes
	opString
	opUint
	opInt
	opBool
	opFloat
	opFloats
	opStrings
	opEnd
	opCount
)

// fuzzRead runs op (with parameter p) on r, returning what it read.
func fuzzRead(r *Reader, op, p int, what string) (any, error) {
	switch op {
	case opArray:
		return r.Array(what, p)
	case opFields:
		return p, r.Fields(what, p)
	case opBytes:
		return r.Bytes(what, fuzzLimits[p])
	case opString:
		return r.String(what, fuzzLimits[p])
	case opUint:
		return r.Uint(what)
	case opInt:
		return r.Int(what)
	case opBool:
		return r.Bool(what)
	case opFloat:
		return r.Float(what)
	case opFloats:
		return r.Floats(what, fuzzLimits[p])
	case opStrings:
		return r.Strings(what, p, fuzzLimits[15-p])
	default:
		return nil, r.End()
	}
}

// fuzzWrite writes v, read by op, as the Writer would.
func fuzzWrite(w *Writer, op int, v any) {
	switch op {
	case opArray, opFields:
		w.Array(v.(int))
	case opBytes:
		w.Bin(v.([]byte))
	case opString:
		w.String(v.(string))
	case opUint:
		w.Uint(v.(uint64))
	case opInt:
		w.Int(v.(int64))
	case opBool:
		w.Bool(v.(bool))
	case opFloat:
		w.Float(v.(float64))
	case opFloats:
		w.Floats(v.([]float64))
	case opStrings:
		w.Strings(v.([]string))
	}
}

func sameValue(a, b any) bool {
	switch a := a.(type) {
	case []byte:
		return bytes.Equal(a, b.([]byte))
	case float64:
		return math.Float64bits(a) == math.Float64bits(b.(float64))
	case []float64:
		b := b.([]float64)
		return slices.EqualFunc(a, b, func(x, y float64) bool { return math.Float64bits(x) == math.Float64bits(y) })
	case []string:
		return slices.Equal(a, b.([]string))
	}
	return a == b
}

// fuzzInput builds a FuzzReader input: the op bytes, then the msgpack.
func fuzzInput(ops []byte, msg []byte) []byte {
	return append(append([]byte{byte(len(ops))}, ops...), msg...)
}

func op(kind, p int) byte { return byte(p<<4 | kind) }

// FuzzReader drives a Reader through a sequence of reads chosen by the
// input's first bytes (a count, then one op byte per read: the low nibble
// picks the method, the high one its limit), over the msgpack that follows.
// Whatever is read must respect the limits, and written back with the
// Writer it must read back the same.
func FuzzReader(f *testing.F) {
	w := NewWriter()
	w.Array(2)
	w.Uint(1)
	w.String("join")
	f.Add(fuzzInput([]byte{op(opFields, 2), op(opUint, 0), op(opString, 6), op(opEnd, 0)}, w.Bytes()))
	w = NewWriter()
	w.Floats([]float64{1, 2})
	w.Strings([]string{"a", "bc"})
	w.Int(-5)
	w.Bool(true)
	w.Float(0.25)
	w.Bin([]byte{1, 2})
	f.Add(fuzzInput([]byte{op(opFloats, 2), op(opStrings, 2), op(opInt, 0), op(opBool, 0), op(opFloat, 0), op(opBytes, 2), op(opEnd, 0)}, w.Bytes()))
	f.Add(fuzzInput([]byte{op(opArray, 1)}, []byte{0xdd, 0xff, 0xff, 0xff, 0xff}))
	f.Add(fuzzInput([]byte{op(opArray, 5)}, []byte{0xdd, 0x33, 0x33, 0x33, 0x34, 0, 0, 0, 0, 0, 0, 0, 0}))
	f.Add(fuzzInput([]byte{op(opBytes, 15)}, []byte{0xc6, 0xff, 0xff, 0xff, 0xff}))
	f.Add(fuzzInput([]byte{op(opString, 15)}, []byte{0xdb, 0xff, 0xff, 0xff, 0xff}))
	f.Add(fuzzInput([]byte{op(opFloats, 15)}, []byte{0xc6, 0xff, 0xff, 0xff, 0xff}))
	f.Add(fuzzInput([]byte{op(opStrings, 15), op(opStrings, 1)}, []byte{0xdd, 0xff, 0xff, 0xff, 0xff}))
	f.Add(fuzzInput([]byte{op(opFields, 3)}, []byte{0xdf, 0xff, 0xff, 0xff, 0xff}))
	f.Add(fuzzInput([]byte{op(opUint, 0), op(opInt, 0), op(opFloat, 0)}, []byte{0xff, 0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xca, 0x7f, 0xc0, 0, 0}))
	f.Add(fuzzInput([]byte{op(opBool, 0), op(opUint, 0)}, []byte{0xc0, 0xc0}))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		n := int(data[0] % 16)
		if len(data) < 1+n {
			return
		}
		ops, msg := data[1:1+n], data[1+n:]
		type read struct {
			op, p int
			v     any
		}
		var reads []read
		r := NewReader(msg)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for i, b := range ops {
			o, p := int(b&15)%opCount, int(b>>4)
			what := fmt.Sprintf("<%d>", i)
			left := r.Remaining()
			v, err := fuzzRead(r, o, p, what)
			if r.Remaining() > left {
				t.Fatalf("%s: Remaining went from %d to %d", what, left, r.Remaining())
			}
			if err != nil {
				if !errors.Is(err, ErrMalformed) {
					t.Fatalf("%s: error %v does not wrap ErrMalformed", what, err)
				}
				if o != opEnd && !strings.Contains(err.Error(), what) {
					t.Fatalf("%s: error %q does not name the field", what, err)
				}
				break
			}
			switch o {
			case opArray:
				if k := v.(int); k < 0 || k*max(p, 1) > r.Remaining() {
					t.Fatalf("%s: %d elements of %d bytes accepted with %d bytes left", what, k, p, r.Remaining())
				}
			case opBytes:
				b := v.([]byte)
				if len(b) > fuzzLimits[p] || len(b) > left || cap(b) != len(b) {
					t.Fatalf("%s: %d bytes (cap %d) accepted, limit %d, %d remained", what, len(b), cap(b), fuzzLimits[p], left)
				}
			case opString:
				if s := v.(string); len(s) > fuzzLimits[p] {
					t.Fatalf("%s: %d bytes accepted, limit %d", what, len(s), fuzzLimits[p])
				}
			case opFloat:
				if x := v.(float64); math.IsNaN(x) || math.IsInf(x, 0) {
					t.Fatalf("%s: %v accepted", what, x)
				}
			case opFloats:
				xs := v.([]float64)
				if len(xs) > fuzzLimits[p] {
					t.Fatalf("%s: %d values accepted, limit %d", what, len(xs), fuzzLimits[p])
				}
				for _, x := range xs {
					if math.IsNaN(x) || math.IsInf(x, 0) {
						t.Fatalf("%s: %v accepted", what, x)
					}
				}
			case opStrings:
				ss := v.([]string)
				if len(ss) > p {
					t.Fatalf("%s: %d strings accepted, limit %d", what, len(ss), p)
				}
				for _, s := range ss {
					if len(s) > fuzzLimits[15-p] {
						t.Fatalf("%s: a %d-byte string accepted, limit %d", what, len(s), fuzzLimits[15-p])
					}
				}
			case opEnd:
				if r.Remaining() != 0 {
					t.Fatalf("End accepted %d bytes left", r.Remaining())
				}
			}
			reads = append(reads, read{o, p, v})
		}
		runtime.ReadMemStats(&after)
		if a := after.TotalAlloc - before.TotalAlloc; a > wiretest.AllocLimit(len(msg)) {
			t.Fatalf("reading %d bytes allocated %d", len(msg), a)
		}

		// Written back, the values read back the same. The padding leaves
		// at least as many bytes after each array header as the input had,
		// so the length checks pass where they passed before.
		w := NewWriter()
		for _, rd := range reads {
			fuzzWrite(w, rd.op, rd.v)
		}
		again := NewReader(append(slices.Clone(w.Bytes()), make([]byte, len(msg))...))
		for i, rd := range reads {
			if rd.op == opEnd {
				continue
			}
			v, err := fuzzRead(again, rd.op, rd.p, fmt.Sprintf("<%d>", i))
			if err != nil {
				t.Fatalf("read %d does not read back: %v", i, err)
			}
			if !sameValue(rd.v, v) {
				t.Fatalf("read %d: %v read back as %v", i, rd.v, v)
			}
		}
	})
}

// A writer on a buffer with room writes the same bytes into that buffer's
// array; on one without enough room, the same bytes elsewhere.
func TestWriterOnUsesTheRoom(t *testing.T) {
	payload := bytes.Repeat([]byte{7}, 5000)
	write := func(w *Writer) []byte {
		w.Array(2)
		w.Uint(300)
		w.Bin(payload)
		return w.Bytes()
	}
	plain := write(NewWriter())
	room := make([]byte, 3, len(plain)+10)
	got := write(NewWriterOn(room))
	if !bytes.Equal(got, plain) || &got[0] != &room[:1][0] {
		t.Fatalf("writer on a room of %d: %d bytes (equal %v), same array %v", cap(room), len(got), bytes.Equal(got, plain), &got[0] == &room[:1][0])
	}
	small := make([]byte, 0, 16)
	if got := write(NewWriterOn(small)); !bytes.Equal(got, plain) {
		t.Fatalf("writer on a room too small: %d bytes, want the %d written plainly", len(got), len(plain))
	}
}

// TestWriterMatchesMsgpack checks that Writer writes every value byte for
// byte as msgpack/v5's Encoder does, at each boundary of each form: the
// sizes a node computes for its envelopes, and every hash over written
// bytes, rest on it.
func TestWriterMatchesMsgpack(t *testing.T) {
	var uints []uint64
	for _, b := range []uint64{0, 1, 0x7f, 0xff, 0xffff, 0xffffffff} {
		uints = append(uints, b, b+1)
	}
	uints = append(uints, math.MaxUint64)
	var ints []int64
	for _, b := range []int64{0, -1, -32, -33, math.MinInt8, math.MinInt16, math.MinInt32} {
		ints = append(ints, b, b-1, b+1)
	}
	ints = append(ints, math.MinInt64, math.MaxInt64, 0x7f, 0x80)
	lens := []int{0, 1, 15, 16, 31, 32, 255, 256, 0xffff, 0x10000}
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	w := NewWriter()
	check := func(what string) {
		t.Helper()
		if !bytes.Equal(w.Bytes(), buf.Bytes()) {
			t.Fatalf("%s: writer and msgpack differ (%d and %d bytes)", what, len(w.Bytes()), buf.Len())
		}
	}
	for _, v := range uints {
		w.Uint(v)
		_ = enc.EncodeUint(v)
		check(fmt.Sprintf("Uint(%d)", v))
	}
	for _, v := range ints {
		w.Int(v)
		_ = enc.EncodeInt(v)
		check(fmt.Sprintf("Int(%d)", v))
	}
	for _, n := range lens {
		w.Array(n)
		_ = enc.EncodeArrayLen(n)
		check(fmt.Sprintf("Array(%d)", n))
		b := bytes.Repeat([]byte{0xab}, n)
		w.Bin(b)
		_ = enc.EncodeBytes(b)
		check(fmt.Sprintf("Bin(%d bytes)", n))
		w.String(string(b))
		_ = enc.EncodeString(string(b))
		check(fmt.Sprintf("String(%d bytes)", n))
	}
	for _, v := range []float64{0, -1.5, math.Inf(1), math.MaxFloat64, math.SmallestNonzeroFloat64} {
		w.Float(v)
		_ = enc.EncodeFloat64(v)
		check(fmt.Sprintf("Float(%g)", v))
	}
	for _, v := range []bool{true, false} {
		w.Bool(v)
		_ = enc.EncodeBool(v)
		check(fmt.Sprintf("Bool(%v)", v))
	}
	w.Bin(nil)
	_ = enc.EncodeBytes([]byte{})
	check("Bin(nil) as an empty bin")
	for _, n := range []int{0, 1, 31, 32, 8192, 8193} {
		v := make([]float64, n)
		for i := range v {
			v[i] = float64(i) - 0.5
		}
		w.Floats(v)
		raw := make([]byte, 0, 8*n)
		for _, x := range v {
			raw = binary.LittleEndian.AppendUint64(raw, math.Float64bits(x))
		}
		_ = enc.EncodeBytes(raw)
		check(fmt.Sprintf("Floats(%d)", n))
	}
	w.Strings([]string{"a", strings.Repeat("b", 40)})
	_ = enc.EncodeArrayLen(2)
	_ = enc.EncodeString("a")
	_ = enc.EncodeString(strings.Repeat("b", 40))
	check("Strings")
}
