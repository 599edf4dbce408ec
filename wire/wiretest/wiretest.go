// Package wiretest holds helpers for testing decoders of untrusted msgpack:
// hostile length headers, allocation bounds.
//
// A test splits a valid encoding into named parts, one msgpack value each
// (an array counting as its header alone), makes mutants of it, each wrong
// in one place, and checks that the decoder refuses every mutant, says why,
// and allocates little doing so.
package wiretest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// Part is one msgpack value of an encoding, named as the decoder's error
// must name it when the value is wrong.
type Part struct {
	Name string
	Data []byte
}

// Join returns the encoding the parts make up.
func Join(ps []Part) []byte {
	var out []byte
	for _, p := range ps {
		out = append(out, p.Data...)
	}
	return out
}

// Replaced returns the encoding of ps with part i's bytes replaced.
func Replaced(ps []Part, i int, with []byte) []byte {
	return append(append(Join(ps[:i]), with...), Join(ps[i+1:])...)
}

// Set returns the encoding of ps with the part called name replaced; it
// panics if there is no such part.
func Set(ps []Part, name string, with []byte) []byte {
	for i, p := range ps {
		if p.Name == name {
			return Replaced(ps, i, with)
		}
	}
	panic("no part " + name)
}

// Mutant is an encoding made wrong in one place, and what the decoder's
// error must say about it.
type Mutant struct {
	Name, Want string
	Data       []byte
}

// WrongParts makes each part wrong in turn: of the wrong type, nil, or
// missing (the input ends before it). The error must name the part, but
// for a missing one: there an enclosing array's claim may be what is
// refused, so any field may be named.
func WrongParts(ps []Part) []Mutant {
	var out []Mutant
	for i, p := range ps {
		wrongType := []byte{0xc3} // true, which no part but a bool is
		if p.Data[0] == 0xc2 || p.Data[0] == 0xc3 {
			wrongType = []byte{0xa1, 'x'}
		}
		out = append(out,
			Mutant{p.Name + " of the wrong type", p.Name, Replaced(ps, i, wrongType)},
			Mutant{p.Name + " nil", p.Name, Replaced(ps, i, []byte{0xc0})},
			Mutant{p.Name + " missing", "", Join(ps[:i])})
	}
	return out
}

// valueLen is the length of the msgpack value data starts with, an array
// counting as its header alone. It knows the codes wire.Writer writes.
func valueLen(data []byte) int {
	switch c := data[0]; {
	case c <= 0x7f || c >= 0xe0 || c == 0xc0 || c == 0xc2 || c == 0xc3 || (c >= 0x90 && c <= 0x9f):
		return 1
	case c >= 0xa0 && c <= 0xbf:
		return 1 + int(c&0x1f)
	case c == 0xcc || c == 0xd0:
		return 2
	case c == 0xcd || c == 0xd1 || c == 0xdc:
		return 3
	case c == 0xce || c == 0xd2 || c == 0xca || c == 0xdd:
		return 5
	case c == 0xcf || c == 0xd3 || c == 0xcb:
		return 9
	case c == 0xd9 || c == 0xc4:
		return 2 + int(data[1])
	case c == 0xda || c == 0xc5:
		return 3 + int(binary.BigEndian.Uint16(data[1:]))
	case c == 0xdb || c == 0xc6:
		return 5 + int(binary.BigEndian.Uint32(data[1:]))
	}
	panic(fmt.Sprintf("msgpack code %#x", data[0]))
}

// headerLen is the length of the array, str or bin header a value starts
// with, and whether it is an array's; 0 for any other value.
func headerLen(c byte) (n int, array bool) {
	switch {
	case c >= 0x90 && c <= 0x9f:
		return 1, true
	case c == 0xdc:
		return 3, true
	case c == 0xdd:
		return 5, true
	case c >= 0xa0 && c <= 0xbf:
		return 1, false
	case c == 0xd9 || c == 0xc4:
		return 2, false
	case c == 0xda || c == 0xc5:
		return 3, false
	case c == 0xdb || c == 0xc6:
		return 5, false
	}
	return 0, false
}

// A hostile header claims 0xffffffff elements or bytes; a map32 one is of
// the wrong type as well.
var (
	hostileStrings = []struct{ name, want, head string }{
		{"str32", "claims", "\xdb\xff\xff\xff\xff"},
		{"bin32", "claims", "\xc6\xff\xff\xff\xff"},
	}
	hostileArrays = []struct{ name, want, head string }{
		{"array32", "claims", "\xdd\xff\xff\xff\xff"},
		{"map32", "invalid code", "\xdf\xff\xff\xff\xff"},
	}
)

// hostileAt replaces the header of the value at data[at:], if it carries a
// length, with each hostile header in turn, keeping what followed it; name
// names the mutant after the header put in.
func hostileAt(data []byte, at int, name func(head string) string) []Mutant {
	n, array := headerLen(data[at])
	if n == 0 {
		return nil
	}
	heads := hostileStrings
	if array {
		heads = hostileArrays
	}
	var out []Mutant
	for _, h := range heads {
		bad := append(append(slices.Clone(data[:at]), h.head...), data[at+n:]...)
		out = append(out, Mutant{name(h.name), h.want, bad})
	}
	return out
}

// HostileHeaders walks a valid encoding and replaces each length-carrying
// header in turn with one that claims 0xffffffff elements or bytes (and,
// for an array, with a map32 header), keeping what followed it. The
// mutants are named by the header and the byte it stands at.
func HostileHeaders(data []byte) []Mutant {
	var out []Mutant
	for at := 0; at < len(data); at += valueLen(data[at:]) {
		out = append(out, hostileAt(data, at, func(h string) string { return fmt.Sprintf("%s at byte %d", h, at) })...)
	}
	return out
}

// HostileParts does what HostileHeaders does to the header each part
// starts with, naming the mutants by the part.
func HostileParts(ps []Part) []Mutant {
	var out []Mutant
	data, at := Join(ps), 0
	for _, p := range ps {
		out = append(out, hostileAt(data, at, func(h string) string { return p.Name + " as " + h })...)
		at += len(p.Data)
	}
	return out
}

// allocatedOnce returns the bytes f allocates in one run.
func allocatedOnce(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// Allocated returns the bytes f allocates, the least of three runs so that
// an allocation elsewhere in the process does not count against f.
func Allocated(f func()) uint64 {
	best := uint64(math.MaxUint64)
	for range 3 {
		best = min(best, allocatedOnce(f))
	}
	return best
}

// AllocLimit is what decoding n bytes may allocate.
func AllocLimit(n int) uint64 { return uint64(64*n + 64<<10) }

// CheckRefused runs decode on each mutant: it must fail with sentinel, say
// what the mutant wants, and allocate at most AllocLimit of its length.
func CheckRefused(t testing.TB, ms []Mutant, sentinel error, decode func([]byte) error) {
	t.Helper()
	for _, m := range ms {
		err := decode(m.Data)
		if err == nil {
			t.Errorf("%s: accepted", m.Name)
			continue
		}
		if !errors.Is(err, sentinel) || !strings.Contains(err.Error(), m.Want) {
			t.Errorf("%s: error %q, want %v saying %q", m.Name, err, sentinel, m.Want)
		}
		if a := Allocated(func() { _ = decode(m.Data) }); a > AllocLimit(len(m.Data)) {
			t.Errorf("%s: refusing %d bytes allocated %d", m.Name, len(m.Data), a)
		}
	}
}

// DecodeOnce runs decode once, as a fuzz target does, and fails t if that
// allocated more than AllocLimit(n), n being the length of its input.
func DecodeOnce[T any](t testing.TB, n int, decode func() (T, error)) (T, error) {
	t.Helper()
	var v T
	var err error
	if a := allocatedOnce(func() { v, err = decode() }); a > AllocLimit(n) {
		t.Fatalf("decoding %d bytes allocated %d", n, a)
	}
	return v, err
}
