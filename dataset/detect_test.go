package dataset

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
)

// criteoLine is a Criteo row with label l, I1 = 5 and C1 = c.
func criteoLine(l, c string) string {
	cols := make([]string, criteoColumns)
	cols[0], cols[1], cols[criteoInts+1] = l, "5", c
	return strings.Join(cols, "\t") + "\n"
}

func TestDetect(t *testing.T) {
	emptyCriteo := strings.Repeat("\t", criteoColumns-1)
	var long strings.Builder // one row longer than the sample
	long.WriteString("1")
	for id := 1; long.Len() < detectBytes+1000; id++ {
		fmt.Fprintf(&long, " %d:0.5", id)
	}
	for _, tc := range []struct {
		name, text string
		want       Format
		err        error
	}{
		{"libsvm", "+1 1:0.5 3:2\n-1 2:1\n", LIBSVM, nil},
		{"libsvm with tabs and comments", "# header\n1\t4:1\t9:2\n0\n", LIBSVM, nil},
		{"libsvm, one row past the sample", long.String(), LIBSVM, nil},
		{"criteo", criteoLine("1", "68fd1e64") + criteoLine("0", "05db9164"), Criteo, nil},
		{"vw", "1 |f a b:2 |g c\n-1 'tag|f d\n", VW, nil},
		{"vw without label is vw, malformed", "|f a\n", "", ErrUnknownFormat},
		{"empty", "", LIBSVM, nil},
		{"blank and comments", "\n# nothing\n\n", LIBSVM, nil},
		{"criteo columns all empty", "0" + emptyCriteo + "\n1" + emptyCriteo + "\n", "", ErrAmbiguousFormat},
		{"csv", "1,2,3\n4,5,6\n", "", ErrUnknownFormat},
		{"libsvm, then a malformed line", "1 1:1\nx 2:2\n", LIBSVM, nil},
		{"vw, then a malformed line", "1 |f a\n1 |f a:x\n", VW, nil},
	} {
		for _, zipped := range []bool{false, true} {
			in := []byte(tc.text)
			if zipped {
				in = gz(t, tc.text)
			}
			got, err := Detect(bytes.NewReader(in), "data.txt")
			switch {
			case tc.err != nil && !errors.Is(err, tc.err):
				t.Errorf("%s (gzip %v): %q, %v; want %v", tc.name, zipped, got, err, tc.err)
			case tc.err != nil && !strings.HasPrefix(err.Error(), "data.txt: "):
				t.Errorf("%s: error %q does not name the file", tc.name, err)
			case tc.err == nil && (err != nil || got != tc.want):
				t.Errorf("%s (gzip %v): %q, %v; want %q", tc.name, zipped, got, err, tc.want)
			}
		}
	}
}

// The failures name each format's first bad line.
func TestDetectSaysWhyNot(t *testing.T) {
	_, err := Detect(strings.NewReader("1 1:x\n1 2:1\n"), "d")
	for _, want := range []string{"not libsvm (line 1: ", "not criteo (line 1: ", "not vw (line 1: "} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not say %q", err, want)
		}
	}
}

func TestDetectSampleFiles(t *testing.T) {
	for path, want := range map[string]Format{
		"testdata/criteo-sample.tsv.gz": Criteo,
		"testdata/vw-sample.txt.gz":     VW,
		"rcv1.test":                     LIBSVM, // a built-in split
		"a9a":                           LIBSVM, // a built-in set
	} {
		got, err := DetectFile(path)
		if err != nil || got != want {
			t.Errorf("%s: %q, %v; want %q", path, got, err, want)
		}
	}
	if _, err := DetectFile("testdata/no-such-file"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing file: %v", err)
	}
}

func FuzzDetect(f *testing.F) {
	// More seeds live in testdata/fuzz/FuzzDetect.
	f.Add([]byte("+1 1:0.5 3:2\n"))
	f.Add([]byte(criteoLine("1", "ab")))
	f.Add([]byte("1 |f a\n"))
	f.Add(gz(f, "1 |f a:1\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var format Format
		var err error
		// The sample is read whole, and parsed three times.
		alloc := allocated(func() { format, err = Detect(bytes.NewReader(data), "fuzz") })
		if limit := uint64(8*detectBytes + allocFixed); alloc > limit {
			t.Fatalf("Detect allocated %d bytes (limit %d)", alloc, limit)
		}
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz: ") {
				t.Fatalf("error %q does not name the input", err)
			}
			return
		}
		if inflatedLen(data) >= detectBytes {
			return
		}
		// Short input is all sample: its first rows read in the format
		// found, or at least its first line does.
		if _, line, err := sampleRows(inflated(t, data), format); err != nil && line <= 1 {
			t.Fatalf("detected %s, but the sample's first line does not read as it: %v", format, err)
		}
	})
}

// inflated is data after gzip decompression when it starts with the magic.
func inflated(t *testing.T, data []byte) []byte {
	if len(data) < 2 || data[0] != gzipMagic[0] || data[1] != gzipMagic[1] {
		return data
	}
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
