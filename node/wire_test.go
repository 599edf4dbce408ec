package node

import (
	"bytes"
	"errors"
	"runtime"
	"strings"
	"testing"
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
