package dataset

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

func row(label float64, kv ...any) Row {
	r := Row{Label: label}
	for i := 0; i < len(kv); i += 2 {
		switch k := kv[i].(type) {
		case int:
			r.Keys = append(r.Keys, uint64(k))
		case uint64:
			r.Keys = append(r.Keys, k)
		}
		r.Values = append(r.Values, float32(kv[i+1].(float64)))
	}
	return r
}

// sameRows compares rows ignoring nil versus empty feature slices.
func sameRows(a, b []Row) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Label != b[i].Label || math.Signbit(a[i].Label) != math.Signbit(b[i].Label) ||
			len(a[i].Keys) != len(b[i].Keys) || len(a[i].Values) != len(b[i].Values) {
			return false
		}
		for j := range a[i].Keys {
			if a[i].Keys[j] != b[i].Keys[j] || a[i].Values[j] != b[i].Values[j] {
				return false
			}
		}
	}
	return true
}

func TestReadGood(t *testing.T) {
	tests := []struct {
		name  string
		in    string
		rows  []Row
		maxID uint64
	}{
		{"plus one", "+1 1:0.5 3:2\n", []Row{row(1, 1, 0.5, 3, 2.0)}, 3},
		{"minus one no final newline", "-1 2:1", []Row{row(-1, 2, 1.0)}, 2},
		{"one and zero", "1 1:1\n0 2:1\n", []Row{row(1, 1, 1.0), row(0, 2, 1.0)}, 2},
		{"class ids", "3 7:2\n17 1:1\n", []Row{row(3, 7, 2.0), row(17, 1, 1.0)}, 7},
		{"regression", "2.5 1:1\n-0.125 4:-3.5e2\n", []Row{row(2.5, 1, 1.0), row(-0.125, 4, -350.0)}, 4},
		{"label only", "-1\n", []Row{row(-1)}, 0},
		{"label only with trailing blanks", "-1 \t \n+1\n", []Row{row(-1), row(1)}, 0},
		{"comments and blank lines", "# header\n\n   \n1 1:1 # trailing comment\n#2 2:2\n-1 #only label\n",
			[]Row{row(1, 1, 1.0), row(-1)}, 1},
		{"crlf", "1 1:1\r\n-1 2:2\r\n\r\n0\r\n", []Row{row(1, 1, 1.0), row(-1, 2, 2.0), row(0)}, 2},
		{"tabs and runs of spaces", "  1\t1:1  \t 2:2\t\n", []Row{row(1, 1, 1.0, 2, 2.0)}, 2},
		{"largest index", "1 5:1 18446744073709551615:2\n", []Row{row(1, 5, 1.0, uint64(math.MaxUint64), 2.0)}, math.MaxUint64},
		{"leading zeros in index", "1 007:1\n", []Row{row(1, 7, 1.0)}, 7},
		{"value forms", "1 1:-0 2:1e-50 3:3.4028235e38 4:.5 5:+2\n",
			[]Row{row(1, 1, 0.0, 2, 0.0, 3, math.MaxFloat32, 4, 0.5, 5, 2.0)}, 5},
		{"empty input", "", nil, 0},
		{"only comments", "# nothing\n# here\n", nil, 0},
		{"max feature across rows", "1 9:1\n1 2:1 4:1\n", []Row{row(1, 9, 1.0), row(1, 2, 1.0, 4, 1.0)}, 9},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, err := Read(strings.NewReader(tc.in), "t.txt")
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
			if !sameRows(d.Rows, tc.rows) {
				t.Errorf("rows = %+v, want %+v", d.Rows, tc.rows)
			}
			if d.MaxFeature != tc.maxID {
				t.Errorf("MaxFeature = %d, want %d", d.MaxFeature, tc.maxID)
			}
			if d.Name != "t.txt" {
				t.Errorf("Name = %q", d.Name)
			}
		})
	}
}

func TestReadMalformed(t *testing.T) {
	tests := []struct {
		name  string
		in    string
		line  int
		cause error
		want  string // substring of the message after "t.txt:line: "
	}{
		{"bad index", "1 12x:0.5\n", 1, errBadIndex, `feature "12x:0.5": bad index`},
		{"empty index", "1 :1\n", 1, errBadIndex, `feature ":1"`},
		{"negative index", "1 -3:1\n", 1, errBadIndex, `feature "-3:1"`},
		{"signed index", "1 +3:1\n", 1, errBadIndex, `feature "+3:1"`},
		{"index overflow", "1 18446744073709551616:1\n", 1, errBadIndex, `18446744073709551616`},
		{"qid token", "1 qid:3 1:1\n", 1, errBadIndex, `feature "qid:3"`},
		{"zero index", "1 0:1\n", 1, errZeroIndex, `feature "0:1": index 0 is not allowed: feature ids are 1-based and key 0 is reserved for the model's bias`},
		{"descending", "1 3:1 2:1\n", 1, errNotAscending, `feature "2:1": indices are not strictly ascending (2 after 3)`},
		{"duplicate", "1 3:1 3:2\n", 1, errNotAscending, `feature "3:2"`},
		{"missing colon", "1 3\n", 1, errMissingColon, `feature "3": missing ':'`},
		{"empty value", "1 3:\n", 1, errBadValue, `feature "3:": bad value`},
		{"text value", "1 3:abc\n", 1, errBadValue, `feature "3:abc": bad value`},
		{"two colons", "1 1:1:1\n", 1, errBadValue, `feature "1:1:1"`},
		{"underscore value", "1 1:1_0\n", 1, errBadValue, `feature "1:1_0"`},
		{"nul byte", "1 1:1\x00\n", 1, errBadValue, `feature "1:1\x00"`},
		{"nan value", "1 3:nan\n", 1, errValueInfinite, `feature "3:nan": value is not finite`},
		{"inf value", "1 3:-Inf\n", 1, errValueInfinite, `feature "3:-Inf"`},
		{"float32 overflow", "1 3:1e39\n", 1, errValueRange, `feature "3:1e39": value is outside the float32 range`},
		{"text label", "abc 1:1\n", 1, errBadLabel, `label "abc": bad label`},
		{"feature as label", "1:2 3:4\n", 1, errBadLabel, `label "1:2"`},
		{"underscore label", "1_0 1:1\n", 1, errBadLabel, `label "1_0"`},
		{"nan label", "nan 1:1\n", 1, errLabelInfinite, `label "nan": label is not finite`},
		{"label overflow", "1e400\n", 1, errLabelInfinite, `label "1e400"`},
		{"line counts comments and blanks", "1 1:1\n# c\n\n-1 2:x\n", 4, errBadValue, `feature "2:x"`},
		{"line counts crlf", "1 1:1\r\n1 0:1\r\n", 2, errZeroIndex, `feature "0:1"`},
		{"last line without newline", "1 1:1\n1 2:1 1:1", 2, errNotAscending, `feature "1:1"`},
		{"long token shortened", "1 " + strings.Repeat("9", 100) + "x:1\n", 1, errBadIndex, `"` + strings.Repeat("9", 40) + `"...: bad index`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, err := Read(strings.NewReader(tc.in), "t.txt")
			if err == nil {
				t.Fatalf("Read succeeded with %d rows, want error", len(d.Rows))
			}
			if !errors.Is(err, tc.cause) {
				t.Errorf("error %q does not wrap %q", err, tc.cause)
			}
			prefix := "t.txt:" + strconv.Itoa(tc.line) + ": "
			if !strings.HasPrefix(err.Error(), prefix) {
				t.Errorf("error %q does not start with %q", err, prefix)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
		})
	}
}

func TestErrorMessageExact(t *testing.T) {
	_, err := Read(strings.NewReader("1 1:1\n"+strings.Repeat("-1 5:1\n", 15)+"+1 12x:0.5\n"), "rcv1.train")
	const want = `rcv1.train:17: feature "12x:0.5": bad index`
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v, want %s", err, want)
	}
}

func TestReadEmptyName(t *testing.T) {
	_, err := Read(strings.NewReader("x\n"), "")
	if err == nil || !strings.HasPrefix(err.Error(), "input:1: ") {
		t.Fatalf("err = %v, want it to name the input", err)
	}
}

func TestLineCap(t *testing.T) {
	// A small cap exercises the accumulation path cheaply.
	const limit = 100
	ok := "1" + strings.Repeat(" ", limit-1) // exactly the limit
	if _, err := read(strings.NewReader(ok+"\n"+ok), "t", limit); err != nil {
		t.Fatalf("line of exactly the limit: %v", err)
	}
	long := "1 1:1\n" + ok + " \n"
	_, err := read(strings.NewReader(long), "t", limit)
	if !errors.Is(err, errLineTooLong) || !strings.HasPrefix(err.Error(), "t:2: line too long") {
		t.Fatalf("err = %v, want line too long at line 2", err)
	}
	// Lines longer than the bufio buffer but under the cap parse.
	big := "1 " + strings.Repeat(" ", 3*ioBufSize) + "7:3\n-1\n"
	d, err := Read(strings.NewReader(big), "t")
	if err != nil || len(d.Rows) != 2 || d.MaxFeature != 7 {
		t.Fatalf("long line: rows=%v err=%v", d, err)
	}
}

func TestLineCapReal(t *testing.T) {
	// The real cap, once: a line of exactly MaxLineLen bytes is accepted
	// and one byte more is refused without reading the rest.
	line := make([]byte, MaxLineLen+1)
	for i := range line {
		line[i] = ' '
	}
	line[0] = '1'
	line[MaxLineLen] = '\n'
	d, err := Read(bytes.NewReader(line), "big")
	if err != nil || len(d.Rows) != 1 {
		t.Fatalf("line of MaxLineLen bytes: %v", err)
	}
	line[MaxLineLen] = ' '
	_, err = Read(bytes.NewReader(append(line, "\n"...)), "big")
	if !errors.Is(err, errLineTooLong) || !strings.HasPrefix(err.Error(), "big:1: ") {
		t.Fatalf("err = %v, want line too long", err)
	}
}

func gz(t testing.TB, s string) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	if _, err := w.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestGzip(t *testing.T) {
	const text = "# gz\n+1 1:0.25 10:3\r\n-1\n0 2:1e-3\n"
	plain, err := Read(strings.NewReader(text), "x")
	if err != nil {
		t.Fatal(err)
	}
	// The name does not say gzip: detection is by magic bytes.
	z, err := Read(bytes.NewReader(gz(t, text)), "x")
	if err != nil {
		t.Fatal(err)
	}
	if !sameRows(z.Rows, plain.Rows) || z.MaxFeature != 10 || len(z.Rows) != 3 {
		t.Fatalf("gzip rows %+v, plain %+v", z.Rows, plain.Rows)
	}

	// Concatenated members read as one stream, as zcat does.
	multi := append(gz(t, "1 1:1\n"), gz(t, "-1 2:1\n")...)
	d, err := Read(bytes.NewReader(multi), "m")
	if err != nil || len(d.Rows) != 2 {
		t.Fatalf("multistream: %v, %v", d, err)
	}

	// Errors inside the stream name the line being read.
	bad, err := Read(bytes.NewReader(gz(t, "1 1:1\n1 0:1\n")), "b.gz")
	if err == nil || !strings.HasPrefix(err.Error(), "b.gz:2: ") {
		t.Fatalf("got %v, %v; want error at b.gz:2", bad, err)
	}
}

func TestGzipCorrupt(t *testing.T) {
	full := gz(t, strings.Repeat("1 1:1 2:2 3:3\n", 1000))
	cases := map[string][]byte{
		"header only":   {0x1f, 0x8b},
		"bad header":    {0x1f, 0x8b, 0, 0, 0, 0, 0, 0, 0, 0},
		"truncated":     full[:len(full)/2],
		"no trailer":    full[:len(full)-4],
		"bad checksum":  append(append([]byte{}, full[:len(full)-8]...), 0, 0, 0, 0, 0, 0, 0, 0),
		"trailing junk": append(append([]byte{}, full...), "junk"...),
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Read(bytes.NewReader(in), "c.gz")
			if err == nil {
				t.Fatal("Read succeeded")
			}
			if !strings.HasPrefix(err.Error(), "c.gz:") {
				t.Errorf("error %q does not name the file", err)
			}
		})
	}
}

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	plain := filepath.Join(dir, "d.txt")
	zipped := filepath.Join(dir, "d.bin") // gzip without the .gz suffix
	if err := os.WriteFile(plain, []byte("1 1:1\n-1 4:2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(zipped, gz(t, "1 1:1\n-1 4:2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{plain, zipped} {
		d, err := ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if d.Name != p || len(d.Rows) != 2 || d.MaxFeature != 4 {
			t.Errorf("%s: Name %q, %d rows, MaxFeature %d", p, d.Name, len(d.Rows), d.MaxFeature)
		}
	}

	missing := filepath.Join(dir, "missing.libsvm")
	_, err := ReadFile(missing)
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), missing) {
		t.Errorf("err = %v, want a not-exist error naming %s", err, missing)
	}

	// Parse errors name the path.
	badPath := filepath.Join(dir, "bad.txt")
	if err := os.WriteFile(badPath, []byte("1 0:1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(badPath); err == nil || !strings.HasPrefix(err.Error(), badPath+":1: ") {
		t.Errorf("err = %v, want it to start with %s:1:", err, badPath)
	}
}

func TestRowsDoNotAlias(t *testing.T) {
	d, err := Read(strings.NewReader("1 1:1 2:2\n1 3:3\n"), "t")
	if err != nil {
		t.Fatal(err)
	}
	// Appending to one row must not overwrite the next row's features,
	// though they share an arena.
	_ = append(d.Rows[0].Keys, 99)
	_ = append(d.Rows[0].Values, 99)
	if !reflect.DeepEqual(d.Rows[1].Keys, []uint64{3}) || d.Rows[1].Values[0] != 3 {
		t.Fatalf("row 1 changed to %+v", d.Rows[1])
	}
}

func TestManyRowsAcrossChunks(t *testing.T) {
	// Enough rows and features to span several row and arena chunks.
	var b strings.Builder
	const n = 3*maxRowsChunk/2 + 7
	for i := 0; i < n; i++ {
		b.WriteString("1 ")
		b.WriteString(strconv.Itoa(i + 1))
		b.WriteString(":1 ")
		b.WriteString(strconv.Itoa(i + 2))
		b.WriteString(":2\n")
	}
	d, err := Read(strings.NewReader(b.String()), "t")
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Rows) != n || d.NNZ() != 2*n || d.MaxFeature != n+1 {
		t.Fatalf("rows %d nnz %d max %d", len(d.Rows), d.NNZ(), d.MaxFeature)
	}
	for i, r := range d.Rows {
		if r.Keys[0] != uint64(i+1) || r.Keys[1] != uint64(i+2) || r.Values[1] != 2 {
			t.Fatalf("row %d = %+v", i, r)
		}
	}
}
