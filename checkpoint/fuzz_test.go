package checkpoint

import (
	"reflect"
	"runtime"
	"testing"
)

// seal wraps body in a header and checksum, so the fuzzer's bytes reach
// the body decoder instead of stopping at the checksum.
func seal(body []byte) []byte {
	file := append(makeHeader(len(body)), body...)
	return reseal(append(file, make([]byte, trailerBytes)...))
}

// FuzzDecode feeds the bytes to Load's decoder twice: as a whole file, and
// as a body under a valid header and checksum. Whatever decodes must pass
// validation and survive another round trip unchanged, and no input may
// make the decoder allocate much more than its own size.
func FuzzDecode(f *testing.F) {
	for _, s := range []*State{sgdState(f), adamState(f)} {
		data := fileBytes(s)
		f.Add(data)
		f.Add(data[headerBytes : len(data)-trailerBytes])
	}
	f.Add([]byte{0x96, 0xa1, 'm', 0xa1, 'x'})
	f.Add([]byte{0xdd, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, file := range [][]byte{data, seal(data)} {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			s, err := decode(file)
			runtime.ReadMemStats(&after)
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > uint64(32*len(file)+64<<10) {
				t.Fatalf("decoding %d bytes allocated %d", len(file), alloc)
			}
			if err != nil {
				continue
			}
			if err := validate(s); err != nil {
				t.Fatalf("decoded a state that does not validate: %v", err)
			}
			again, err := decode(fileBytes(s))
			if err != nil {
				t.Fatalf("re-encoded state does not decode: %v", err)
			}
			if !reflect.DeepEqual(s, again) {
				t.Fatalf("round trip changed the state:\n%+v\n%+v", s, again)
			}
		}
	})
}
