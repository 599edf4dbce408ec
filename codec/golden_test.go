package codec

import (
	"bytes"
	"encoding/hex"
	"flag"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden frames in testdata/golden")

// goldenUpdate is a small fixed update with both signs, a zero, key 0,
// MaxUint64 and a gap above 2^32.
func goldenUpdate() Sparse {
	u := Sparse{}
	k := uint64(0)
	for i := range 40 {
		u.Keys = append(u.Keys, k)
		v := float32(math.Sin(float64(i)*1.7)) * float32(math.Pow(10, float64(i%5-4)))
		if i == 7 {
			v = 0
		}
		u.Values = append(u.Values, v)
		k += uint64(1 + i*i%13)
		if i == 20 {
			k += 1 << 33
		}
	}
	u.Keys[len(u.Keys)-1] = math.MaxUint64
	return u
}

func goldenCases(t *testing.T) []struct {
	name string
	c    Codec
	u    Sparse
} {
	u := goldenUpdate()
	dense := Sparse{Values: u.Values}
	// The golden update is small enough that the registered sketchml writes
	// a uniform8 frame in its place; the sketch layouts are pinned without it.
	paper := sketchOnly()
	paper.KeyCoding, paper.CellCoding, paper.GroupLayout = KeyCodingDeltaBinary, CellCodingPacked, GroupsEqualWidth
	width := sketchOnly()
	width.GroupLayout = GroupsEqualWidth
	huff := sketchOnly()
	huff.KeyCoding, huff.CellCoding = KeyCodingHuffman, CellCodingHuffman
	sketch := mustSketchML(t, sketchOnly())
	return []struct {
		name string
		c    Codec
		u    Sparse
	}{
		{"raw", Raw{}, u},
		{"raw-dense", Raw{}, dense},
		{"sketchml", sketch, u},
		{"sketchml-width", mustSketchML(t, width), u},
		{"sketchml-paper", mustSketchML(t, paper), u},
		{"sketchml-huffman", mustSketchML(t, huff), u},
		{"sketchml-dense", sketch, dense},
		{"uniform8", Uniform8{Stochastic: true}, u},
		{"uniform8-dense", Uniform8{Stochastic: true}, dense},
		{"zstd", zstdCodec, u},
	}
}

// TestGolden pins the bytes of every frame layout, so a format change is a
// deliberate act: regenerate with go test ./codec -run TestGolden -update
// and say why in the change. Stored frames must also keep decoding to what
// fresh frames decode to.
func TestGolden(t *testing.T) {
	for _, gc := range goldenCases(t) {
		path := filepath.Join("testdata", "golden", gc.name+".hex")
		f, err := gc.c.Encode(nil, gc.u)
		if err != nil {
			t.Fatal(err)
		}
		if *update {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(formatHex(f)), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := readHex(path)
		if err != nil {
			t.Fatalf("%s: %v (run with -update to create)", gc.name, err)
		}
		if !bytes.Equal(f, want) {
			t.Errorf("%s: frame changed:\n got %x\nwant %x", gc.name, f, want)
		}
		d1, err := Decode(want)
		if err != nil {
			t.Fatalf("%s: stored frame: %v", gc.name, err)
		}
		d2 := mustDecode(t, f)
		sameKeys(t, gc.u, d1)
		for i := range d1.Values {
			if math.Float32bits(d1.Values[i]) != math.Float32bits(d2.Values[i]) {
				t.Fatalf("%s: stored frame decodes value %d as %v, fresh frame as %v", gc.name, i, d1.Values[i], d2.Values[i])
			}
		}
	}
}

func formatHex(b []byte) string {
	var sb strings.Builder
	for len(b) > 0 {
		n := min(32, len(b))
		sb.WriteString(hex.EncodeToString(b[:n]))
		sb.WriteByte('\n')
		b = b[n:]
	}
	return sb.String()
}

func readHex(path string) ([]byte, error) {
	text, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return hex.DecodeString(strings.Join(strings.Fields(string(text)), ""))
}
