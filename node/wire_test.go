package node

import (
	"bytes"
	"errors"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"unsafe"
)

func TestEnvelopeRoundTrip(t *testing.T) {
	in := []Update{
		{Origin: "a", Clock: 1, Frame: []byte{1, 2, 3}},
		{Origin: "bb", Clock: 1 << 40, Frame: []byte{}},
		{Origin: strings.Repeat("c", maxOriginBytes), Clock: 7, Frame: bytes.Repeat([]byte{9}, 70000)},
		{Origin: "signed", Clock: 9, Frame: []byte{4, 5}, Sig: bytes.Repeat([]byte{7}, 64)},
		{Origin: "rsa", Clock: 10, Frame: []byte{}, Sig: bytes.Repeat([]byte{8}, MaxSignatureBytes)},
	}
	out, err := DecodeEnvelope(EncodeEnvelope(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != len(in) {
		t.Fatalf("%d updates, want %d", len(out), len(in))
	}
	for i := range in {
		if out[i].Origin != in[i].Origin || out[i].Clock != in[i].Clock || !bytes.Equal(out[i].Frame, in[i].Frame) || !bytes.Equal(out[i].Sig, in[i].Sig) {
			t.Fatalf("update %d: got %+v", i, out[i])
		}
	}
}

// Hostile msgpack headers must be refused by the length checks, with an
// error that says which length was wrong.
func TestEnvelopeHostileHeaders(t *testing.T) {
	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "envelope"},
		{"array32 huge", []byte{0xdd, 0xff, 0xff, 0xff, 0xff}, "claims 4294967295 elements"},
		{"map instead of array", []byte{0xdf, 0xff, 0xff, 0xff, 0xff}, "envelope"},
		{"wrong field count", []byte{0x93, 0x01, 0x90, 0x90}, "3 fields"},
		{"bad version", []byte{0x92, 0x02, 0x90}, "version 2"},
		{"update list array32 huge", []byte{0x92, 0x01, 0xdd, 0xff, 0xff, 0xff, 0xff}, "claims"},
		{"more updates than bytes", append([]byte{0x92, 0x01, 0x9f}, make([]byte, 16)...), "cannot fit"},
		{"bin32 huge origin", []byte{0x92, 0x01, 0x91, 0x93, 0xc6, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0}, "origin claims 4294967295 bytes"},
		{"empty origin", []byte{0x92, 0x01, 0x91, 0x93, 0xa0, 0x01, 0xc4, 0x00}, "empty origin"},
		{"bin32 huge frame", []byte{0x92, 0x01, 0x91, 0x93, 0xa1, 'a', 0x01, 0xc6, 0xff, 0xff, 0xff, 0xff}, "frame claims 4294967295 bytes"},
		{"trailing bytes", append(EncodeEnvelope(nil), 0), "trailing"},
		{"clock not a number", []byte{0x92, 0x01, 0x91, 0x93, 0xa1, 'a', 0xa1, 'x', 0xc4, 0x00}, "clock"},
		{"five fields", []byte{0x92, 0x01, 0x91, 0x95, 0xa1, 'a', 0x01, 0xc4, 0x00, 0xc4, 0x00, 0xc4, 0x00}, "5 fields"},
		{"two fields", []byte{0x92, 0x01, 0x91, 0x92, 0xa1, 'a', 0x01}, "2 fields"},
		{"bin32 huge signature", []byte{0x92, 0x01, 0x91, 0x94, 0xa1, 'a', 0x01, 0xc4, 0x00, 0xc6, 0xff, 0xff, 0xff, 0xff}, "signature claims 4294967295 bytes"},
		{"signature over the limit", append([]byte{0x92, 0x01, 0x91, 0x94, 0xa1, 'a', 0x01, 0xc4, 0x00, 0xc5, 0x04, 0x01}, make([]byte, MaxSignatureBytes+1)...), "limit 1024"},
		{"empty signature", []byte{0x92, 0x01, 0x91, 0x94, 0xa1, 'a', 0x01, 0xc4, 0x00, 0xc4, 0x00}, "empty signature"},
		{"signature not bytes", []byte{0x92, 0x01, 0x91, 0x94, 0xa1, 'a', 0x01, 0xc4, 0x00, 0x01}, "signature"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := DecodeEnvelope(c.data)
			if err == nil {
				t.Fatal("accepted")
			}
			if !errors.Is(err, ErrBadEnvelope) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q, want ErrBadEnvelope mentioning %q", err, c.want)
			}
		})
	}
}

func FuzzDecodeEnvelope(f *testing.F) {
	f.Add(EncodeEnvelope([]Update{{Origin: "a", Clock: 3, Frame: []byte("SK\x01\x01\x00\x00")}}))
	f.Add([]byte{0xdd, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0x92, 0x01, 0x91, 0x93, 0xc6, 0xff, 0xff, 0xff, 0xff})
	f.Add(EncodeEnvelope([]Update{{Origin: "a", Clock: 3, Frame: []byte("SK\x01\x01\x00\x00"), Sig: bytes.Repeat([]byte{1}, 64)}, {Origin: "b", Clock: 1, Frame: []byte{}}}))
	f.Add([]byte{0x92, 0x01, 0x91, 0x94, 0xa1, 'a', 0x01, 0xc4, 0x00, 0xc6, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		ups, err := DecodeEnvelope(data)
		runtime.ReadMemStats(&after)
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > uint64(8*len(data)+64<<10) {
			t.Fatalf("decoding %d bytes allocated %d", len(data), alloc)
		}
		if err != nil {
			return
		}
		// What decodes must re-encode to the same bytes: the format has
		// one canonical encoding per envelope in what we accept.
		for _, u := range ups {
			if u.Origin == "" {
				t.Fatal("empty origin accepted")
			}
			if len(u.Sig) > MaxSignatureBytes {
				t.Fatalf("a %d-byte signature accepted", len(u.Sig))
			}
		}
		again, err := DecodeEnvelope(EncodeEnvelope(ups))
		if err != nil {
			t.Fatalf("re-encoded envelope does not decode: %v", err)
		}
		for i, u := range again {
			if u.Origin != ups[i].Origin || u.Clock != ups[i].Clock || !bytes.Equal(u.Frame, ups[i].Frame) || !bytes.Equal(u.Sig, ups[i].Sig) {
				t.Fatalf("update %d changed in a round trip: %+v, want %+v", i, u, ups[i])
			}
		}
	})
}

// updateWireBytes and envelopeHeaderBytes are the exact sizes EncodeEnvelope
// writes, at every boundary of msgpack's header forms.
func TestEnvelopeSizes(t *testing.T) {
	var ups []Update
	for _, origin := range []int{1, 31, 32, 255, 256} {
		for _, clock := range []uint64{0, 0x7f, 0x80, 0xff, 0x100, 0xffff, 0x10000, 0xffffffff, 1 << 32} {
			for _, frame := range []int{0, 255, 256, 0xffff, 0x10000} {
				for _, sig := range []int{0, 64, 300} {
					ups = append(ups, Update{Origin: strings.Repeat("o", origin), Clock: clock,
						Frame: make([]byte, frame), Sig: make([]byte, sig)})
				}
			}
		}
	}
	for _, u := range ups {
		if got, want := envelopeHeaderBytes(1)+updateWireBytes(u), len(EncodeEnvelope([]Update{u})); got != want {
			t.Fatalf("origin %d bytes, clock %d, frame %d, sig %d: computed %d bytes, encoded %d",
				len(u.Origin), u.Clock, len(u.Frame), len(u.Sig), got, want)
		}
	}
	small := Update{Origin: "a", Clock: 1, Frame: []byte{}}
	if nilFrame := (Update{Origin: "a", Clock: 1}); updateWireBytes(nilFrame) != len(EncodeEnvelope([]Update{nilFrame}))-envelopeHeaderBytes(1) {
		t.Fatal("the size of an update with a nil frame is off")
	}
	for _, n := range []int{0, 15, 16, 0xffff, 0x10000} {
		if got, want := envelopeHeaderBytes(n)+n*updateWireBytes(small), len(EncodeEnvelope(slices.Repeat([]Update{small}, n))); got != want {
			t.Fatalf("%d updates: computed %d bytes, encoded %d", n, got, want)
		}
	}
}

// Issue 14, defect 6 (c): what a node sends a peer is split into envelopes
// within the limit, filled in order; an update too large for any goes
// alone.
func TestEncodeEnvelopesWithinLimit(t *testing.T) {
	u := func(clock uint64, frame int) Update {
		return Update{Origin: "node-00", Clock: clock, Frame: make([]byte, frame)}
	}
	// Each update of a 100-byte frame takes 1+8+1+2+100 = 112 bytes, and an
	// envelope of k < 16 of them 3 + 112k.
	ups := []Update{u(1, 100), u(2, 100), u(3, 100), u(4, 100), u(5, 100)}
	for _, c := range []struct {
		limit int
		sizes []int
	}{
		{3 + 5*112, []int{3 + 5*112}},
		{3 + 5*112 - 1, []int{3 + 4*112, 3 + 112}},
		{3 + 2*112, []int{3 + 2*112, 3 + 2*112, 3 + 112}},
		{3 + 112, []int{115, 115, 115, 115, 115}},
		{10, []int{115, 115, 115, 115, 115}}, // each too large: alone
	} {
		var sizes []int
		var clocks []uint64
		for _, env := range encodeEnvelopes(ups, c.limit, nil) {
			sizes = append(sizes, len(env))
			got, err := DecodeEnvelope(env)
			if err != nil {
				t.Fatal(err)
			}
			clocks = append(clocks, clocksOf(got)...)
		}
		if !slices.Equal(sizes, c.sizes) || !slices.Equal(clocks, []uint64{1, 2, 3, 4, 5}) {
			t.Fatalf("limit %d: envelopes of %v bytes holding clocks %v, want %v bytes holding 1..5", c.limit, sizes, clocks, c.sizes)
		}
	}
	if envs := encodeEnvelopes(nil, 100, nil); len(envs) != 1 || len(envs[0]) != envelopeHeaderBytes(0) {
		t.Fatalf("no updates: %d envelopes", len(envs))
	}
}

// Decoded with a slot table's origin, an envelope gives the same updates,
// and the origin of a member the table holds is the table's own string,
// not a copy, with its slot; an origin it does not hold is read as it is,
// with none.
func TestDecodeEnvelopeTakesOriginsFromTheTable(t *testing.T) {
	updates := []Update{
		{Origin: "a/1", Clock: 3, Frame: []byte{1, 2}},
		{Origin: "stranger/7", Clock: 4, Frame: []byte{3}},
		{Origin: "a/1", Clock: 4, Frame: []byte{4}, Sig: []byte("sig")},
	}
	data := EncodeEnvelope(updates)
	table := NewSlotTable(1)
	slot := table.intern(strings.Clone("a/1"))
	held := table.names[slot]
	origins := originReader{table: table}
	got, err := decodeEnvelopeInto(nil, data, origins.origin)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := decodeEnvelope(data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, plain) || !reflect.DeepEqual(got, updates) {
		t.Fatalf("decoded %+v, without the table %+v, want %+v", got, plain, updates)
	}
	for _, i := range []int{0, 2} {
		if unsafe.StringData(got[i].Origin) != unsafe.StringData(held) {
			t.Errorf("update %d's origin is a copy, not the table's string", i)
		}
	}
	if want := []int{slot, -1, slot}; !slices.Equal(origins.slots, want) {
		t.Errorf("origins read with slots %v, want %v", origins.slots, want)
	}
	if _, ok := table.slots["stranger/7"]; ok {
		t.Error("decoding gave a slot to an origin")
	}
}
