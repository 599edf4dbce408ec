package modelfile

import (
	"encoding/binary"
	"runtime"
	"testing"
)

// seal wraps body in a header and checksum, so the fuzzer's bytes reach
// the body decoder instead of stopping at the checksum.
func seal(body []byte) []byte {
	file := make([]byte, headerBytes, headerBytes+len(body)+trailerBytes)
	copy(file, magic)
	binary.BigEndian.PutUint32(file[8:], Version)
	binary.BigEndian.PutUint64(file[12:], uint64(len(body)))
	file = append(file, body...)
	return reseal(append(file, make([]byte, trailerBytes)...))
}

// FuzzDecode feeds the bytes to the decoder as a whole file and as a body
// under a valid header and checksum. Whatever decodes must validate and
// survive another round trip unchanged, and no input may make the decoder
// allocate much more than its own size.
func FuzzDecode(f *testing.F) {
	for _, m := range []*Model{lrModel(), softmaxHashed()} {
		data, err := Encode(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
		f.Add(data[headerBytes : len(data)-trailerBytes])
	}
	f.Add([]byte{0x95, 0xa2, 'l', 'r', 0xc4, 0x00})
	f.Add([]byte{0xdd, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, file := range [][]byte{data, seal(data)} {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			m, err := Decode(file)
			runtime.ReadMemStats(&after)
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > uint64(32*len(file)+64<<10) {
				t.Fatalf("decoding %d bytes allocated %d", len(file), alloc)
			}
			if err != nil {
				continue
			}
			if err := m.Validate(); err != nil {
				t.Fatalf("decoded a model that does not validate: %v", err)
			}
			again, err := Encode(m)
			if err != nil {
				t.Fatalf("decoded model does not encode: %v", err)
			}
			back, err := Decode(again)
			if err != nil || !Equal(m, back) {
				t.Fatalf("round trip changed the model (%v):\n%+v\n%+v", err, m, back)
			}
		}
	})
}
