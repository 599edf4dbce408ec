package codec

import (
	"bufio"
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// readCorpus returns the []byte inputs of a one-argument fuzz target's
// corpus directory.
func readCorpus(t *testing.T, dir string) [][]byte {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*"))
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(nil, 1<<26)
		for sc.Scan() {
			line := sc.Text()
			if s, ok := strings.CutPrefix(line, "[]byte("); ok {
				b, err := strconv.Unquote(strings.TrimSuffix(s, ")"))
				if err != nil {
					t.Fatalf("%s: %v", f, err)
				}
				out = append(out, []byte(b))
			}
		}
	}
	return out
}

// allocated is the most bytes f allocates over a few runs; the first run
// includes any one-time setup (the zstd codec makes its decoder on first
// use).
func allocated(f func()) uint64 {
	worst := uint64(0)
	var a, b runtime.MemStats
	for range 3 {
		runtime.ReadMemStats(&a)
		f()
		runtime.ReadMemStats(&b)
		worst = max(worst, b.TotalAlloc-a.TotalAlloc)
	}
	return worst
}

// TestDecodeAllocations holds Decode to its budget, at most
// 16 × frame size + 64 KiB allocated, on the fuzz corpus, the hostile
// frames, and large frames that compress better than 16× (which the
// encoders must have padded).
func TestDecodeAllocations(t *testing.T) {
	frames := readCorpus(t, filepath.Join("testdata", "fuzz", "FuzzDecode"))
	frames = append(frames, seedFrames(t)...)
	for _, h := range hostileFrames() {
		frames = append(frames, h.frame)
	}
	r := rand.New(rand.NewPCG(51, 52))
	run := runUpdate(r, 150000)
	flat := runUpdate(r, 150000)
	for i := range flat.Values {
		flat.Values[i] = 1
	}
	big := []Sparse{laplaceUpdate(53, 60000, 1<<20, 1e-3), run, flat, {Values: make([]float32, 200000)}}
	huff := DefaultSketchMLConfig()
	huff.KeyCoding, huff.CellCoding = KeyCodingHuffman, CellCodingHuffman
	for _, u := range big {
		for _, c := range []Codec{Raw{}, mustSketchML(t, DefaultSketchMLConfig()), mustSketchML(t, huff), Uniform8{}, zstdCodec} {
			frames = append(frames, must(c.Encode(nil, u)))
		}
	}
	// A frame claiming more pairs than its budget allows must be refused
	// before allocating.
	frames = append(frames, smHead(0, 1<<30, 1, 0, g(1), nil, 2).u(0x3F800000).u(0).u(1, 1).b(0, 0))
	decoded := 0
	for _, f := range frames {
		var err error
		got := allocated(func() { _, err = Decode(f) })
		if err == nil {
			decoded++
		}
		if limit := uint64(decodeBudgetFactor*len(f) + decodeBudgetSlack); got > limit {
			name, _ := FrameCodec(f)
			t.Errorf("%s frame of %d bytes (err %v): Decode allocated %d bytes, limit %d", name, len(f), err, got, limit)
		}
	}
	t.Logf("%d frames, %d decoded", len(frames), decoded)
}
