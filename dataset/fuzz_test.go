package dataset

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"math"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// checkRows verifies what Read promises about a dataset it returns.
func checkRows(d *Dataset) error {
	var maxFeature uint64
	for i, r := range d.Rows {
		if math.IsNaN(r.Label) || math.IsInf(r.Label, 0) {
			return fmt.Errorf("row %d: label %v", i, r.Label)
		}
		if len(r.Keys) != len(r.Values) {
			return fmt.Errorf("row %d: %d keys, %d values", i, len(r.Keys), len(r.Values))
		}
		if cap(r.Keys) != len(r.Keys) || cap(r.Values) != len(r.Values) {
			return fmt.Errorf("row %d: capacity beyond length lets appends clobber the next row", i)
		}
		var prev uint64
		for j, k := range r.Keys {
			if k == 0 || k <= prev {
				return fmt.Errorf("row %d: key %d after %d", i, k, prev)
			}
			prev = k
			if v := float64(r.Values[j]); math.IsNaN(v) || math.IsInf(v, 0) {
				return fmt.Errorf("row %d: value %v", i, v)
			}
		}
		maxFeature = max(maxFeature, prev)
	}
	if maxFeature != d.MaxFeature {
		return fmt.Errorf("MaxFeature %d, largest key %d", d.MaxFeature, maxFeature)
	}
	return nil
}

// format writes d back as LIBSVM text with shortest exact representations.
func format(d *Dataset) string {
	var b strings.Builder
	for _, r := range d.Rows {
		b.WriteString(strconv.FormatFloat(r.Label, 'g', -1, 64))
		for j, k := range r.Keys {
			b.WriteByte(' ')
			b.WriteString(strconv.FormatUint(k, 10))
			b.WriteByte(':')
			b.WriteString(strconv.FormatFloat(float64(r.Values[j]), 'g', -1, 32))
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// inflatedLen is the size of data after gzip decompression if it starts
// with the gzip magic (as far as it decompresses), else len(data). The
// allocation bound is relative to the text the parser actually sees.
func inflatedLen(data []byte) int {
	if len(data) < 2 || data[0] != gzipMagic[0] || data[1] != gzipMagic[1] {
		return len(data)
	}
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return len(data)
	}
	n, _ := io.Copy(io.Discard, io.LimitReader(zr, 1<<30))
	return max(len(data), int(n))
}

// Allocation bound for Read on n bytes of (decompressed) text. The constant
// covers the two bufio buffers and the gzip state. The factor is dominated
// by the smallest possible row, "0\n": 2 bytes of input become a 56-byte
// Row, stored once in a chunk and once in the final exactly sized slice.
const (
	allocPerByte = 64
	allocFixed   = 512 << 10
)

// measureRead runs Read and returns the bytes it allocated.
func measureRead(data []byte) (*Dataset, uint64, error) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	d, err := Read(bytes.NewReader(data), "fuzz")
	runtime.ReadMemStats(&after)
	return d, after.TotalAlloc - before.TotalAlloc, err
}

func FuzzRead(f *testing.F) {
	// More seeds live in testdata/fuzz/FuzzRead.
	f.Add([]byte("+1 1:0.5 3:2\n-1\n# c\n0 7:1e-3\r\n"))
	f.Add(gz(f, "1 1:1 2:2\n-1 3:3\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		n := inflatedLen(data)
		d, alloc, err := measureRead(data)
		if limit := uint64(allocPerByte*n + allocFixed); alloc > limit {
			t.Fatalf("Read allocated %d bytes for %d bytes of input (limit %d)", alloc, n, limit)
		}
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz:") {
				t.Fatalf("error %q does not name the input", err)
			}
			return
		}
		if err := checkRows(d); err != nil {
			t.Fatal(err)
		}
		// Whatever parsed must survive a write and re-read unchanged.
		text := format(d)
		again, err := Read(strings.NewReader(text), "again")
		if err != nil {
			t.Fatalf("re-reading %q: %v", text, err)
		}
		if !sameRows(d.Rows, again.Rows) || again.MaxFeature != d.MaxFeature {
			t.Fatalf("round trip changed the data: %q", text)
		}
	})
}

// TestAllocBound checks the allocation bound on inputs built to be as costly
// per byte as possible, beyond what random fuzzing is likely to find.
func TestAllocBound(t *testing.T) {
	var features strings.Builder
	features.WriteString("1")
	for k := 1; features.Len() < 1<<20; k++ {
		fmt.Fprintf(&features, " %d:1", k)
	}
	inputs := map[string][]byte{
		"empty rows":        []byte(strings.Repeat("0\n", 100_000)),
		"tiny rows":         []byte(strings.Repeat("0 1:1\n", 50_000)),
		"one long row":      []byte(features.String()),
		"gzipped empty row": gz(t, strings.Repeat("0\n", 500_000)),
		"gzipped long row":  gz(t, features.String()),
		"comments":          []byte(strings.Repeat("#\n", 100_000)),
		"tiny":              []byte("1"),
	}
	for name, in := range inputs {
		n := inflatedLen(in)
		d, alloc, err := measureRead(in)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		t.Logf("%s: %d bytes in, %d rows, %d bytes allocated (%.1f per byte)", name, n, len(d.Rows), alloc, float64(alloc)/float64(n))
		if limit := uint64(allocPerByte*n + allocFixed); alloc > limit {
			t.Errorf("%s: allocated %d bytes for %d bytes of input (limit %d)", name, alloc, n, limit)
		}
	}
}
