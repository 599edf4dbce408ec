package dataset

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
)

func key(name string) uint64 { return HashString(name, 20) }

func readOne(t *testing.T, f Format, text string) *Dataset {
	t.Helper()
	d, err := ReadWith(strings.NewReader(text), "t", Options{Format: f, HashBits: 20})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// features returns a row's features by key.
func features(r Row) map[uint64]float32 {
	m := map[uint64]float32{}
	for i, k := range r.Keys {
		m[k] = r.Values[i]
	}
	return m
}

func TestCriteoLine(t *testing.T) {
	cols := []string{"1", "0", "2", "3", "100", "", "-4"}
	for len(cols) < 14 {
		cols = append(cols, "")
	}
	cols = append(cols, "68fd1e64", "", "05db9164")
	for len(cols) < 40 {
		cols = append(cols, "")
	}
	d := readOne(t, Criteo, strings.Join(cols, "\t")+"\n")
	if len(d.Rows) != 1 || d.Rows[0].Label != 1 {
		t.Fatalf("rows %+v", d.Rows)
	}
	// I3 = 3 → ⌊ln² 3⌋ = 1; I4 = 100 → ⌊ln² 100⌋ = 21; negatives keep
	// their value; C2 is missing.
	want := map[uint64]float32{key("I1=0"): 1, key("I2=2"): 1, key("I3=1"): 1, key("I4=21"): 1, key("I6=-4"): 1, key("C1=68fd1e64"): 1, key("C3=05db9164"): 1}
	got := features(d.Rows[0])
	if len(got) != len(want) {
		t.Fatalf("features %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("feature %d = %v, want %v", k, got[k], v)
		}
	}
	for _, c := range []struct{ line, want string }{
		{"1\t2\t3\n", "t:1: wrong number of columns: 3 tab-separated columns"},
		{"2" + strings.Repeat("\t", 39) + "\n", `t:1: label "2": bad label: want 0 or 1`},
		{"0\tx" + strings.Repeat("\t", 38) + "\n", `t:1: column I1 "x": bad feature: not an integer`},
	} {
		_, err := ReadWith(strings.NewReader(c.line), "t", Options{Format: Criteo, HashBits: 20})
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.line, err, c.want)
		}
	}
}

func TestVWLine(t *testing.T) {
	d := readOne(t, VW, "1 2.5 'tag|a x y:2 |b:0.5 z:4 x | w\n-1 |a x\n\n0 'only-tag |a y\n")
	if len(d.Rows) != 3 || d.Rows[0].Label != 1 || d.Rows[1].Label != -1 || d.Rows[2].Label != 0 {
		t.Fatalf("rows %+v", d.Rows)
	}
	want := map[uint64]float32{key("a^x"): 1, key("a^y"): 2, key("b^z"): 2, key("b^x"): 0.5, key(" ^w"): 1}
	got := features(d.Rows[0])
	if len(got) != len(want) {
		t.Fatalf("features %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("feature %d = %v, want %v", k, got[k], v)
		}
	}
	for _, c := range []struct{ line, want string }{
		{"1 a b\n", "t:1: no '|' namespace"},
		{"|a x\n", "t:1: no label"},
		{"'tag |a x\n", "t:1: no label"},
		{"yes |a x\n", `t:1: label "yes": bad label`},
		{"1 -2 |a x\n", `t:1: importance weight "-2"`},
		{"1 |a x:nan\n", `t:1: feature "x:nan": value is not finite`},
		{"1 |a :3\n", `t:1: feature ":3": bad feature: empty name`},
		{"1 |a:x y\n", `t:1: namespace "a:x": bad value`},
		{"1 |a x:3e38 x:3e38\n", "t:1: value is outside the float32 range"},
	} {
		_, err := ReadWith(strings.NewReader(c.line), "t", Options{Format: VW, HashBits: 20})
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.line, err, c.want)
		}
	}
	if _, err := ReadWith(strings.NewReader("1 |a x\n"), "t", Options{Format: VW}); err == nil || !strings.Contains(err.Error(), "must be hashed") {
		t.Errorf("VW without hash bits: %v", err)
	}
	if _, err := ParseFormat("arff"); err == nil {
		t.Error("unknown format accepted")
	}
}

// The samples in testdata, written to the formats' public descriptions,
// parse whole and as streams alike.
func TestFormatSamples(t *testing.T) {
	for _, c := range []struct {
		path string
		f    Format
	}{{"testdata/criteo-sample.tsv.gz", Criteo}, {"testdata/vw-sample.txt.gz", VW}} {
		data, err := os.ReadFile(c.path)
		if err != nil {
			t.Fatal(err)
		}
		o := Options{Format: c.f, HashBits: 16}
		d, err := ReadWith(bytes.NewReader(data), c.path, o)
		if err != nil {
			t.Fatal(err)
		}
		if len(d.Rows) != 1200 || len(d.Labels()) != 2 {
			t.Errorf("%s: %d rows, labels %v", c.path, len(d.Rows), d.Labels())
		}
		if err := checkHashedRows(d.Rows, 16); err != nil {
			t.Errorf("%s: %v", c.path, err)
		}
	}
}

// checkHashedRows checks that rows have ascending distinct keys within
// 1..2^bits and finite values.
func checkHashedRows(rows []Row, bits uint) error {
	for i, r := range rows {
		var maxKey uint64
		for _, k := range r.Keys {
			maxKey = max(maxKey, k)
		}
		d := &Dataset{Rows: []Row{r}, MaxFeature: maxKey}
		if err := checkRows(d); err != nil {
			return err
		}
		if maxKey > 1<<bits {
			return &keyError{i, maxKey}
		}
	}
	return nil
}

type keyError struct {
	row int
	key uint64
}

func (e *keyError) Error() string { return fmt.Sprintf("row %d: key %d beyond 2^bits", e.row, e.key) }

func fuzzFormat(f *testing.F, format Format, seeds ...string) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		o := Options{Format: format, HashBits: 12}
		n := inflatedLen(data)
		var d *Dataset
		var err error
		alloc := allocated(func() { d, err = ReadWith(bytes.NewReader(data), "fuzz", o) })
		if limit := uint64(allocPerByte*n + allocFixed); alloc > limit {
			t.Fatalf("read allocated %d bytes for %d bytes of input (limit %d)", alloc, n, limit)
		}
		s, serr := NewScannerWith(bytes.NewReader(data), "fuzz", o)
		var rows []Row
		if serr == nil {
			for s.Scan() {
				r := s.Row()
				rows = append(rows, Row{Label: r.Label, Keys: append([]uint64(nil), r.Keys...), Values: append([]float32(nil), r.Values...)})
			}
			serr = s.Err()
		}
		if (err == nil) != (serr == nil) || err != nil && err.Error() != serr.Error() {
			t.Fatalf("Read: %v; Scanner: %v", err, serr)
		}
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz") {
				t.Fatalf("error %q does not name the input", err)
			}
			return
		}
		if !sameRows(rows, d.Rows) {
			t.Fatal("Scanner yields other rows than Read")
		}
		if err := checkHashedRows(d.Rows, 12); err != nil {
			t.Fatal(err)
		}
	})
}

func FuzzReadCriteo(f *testing.F) {
	line := "1\t3\t\t100" + strings.Repeat("\t", 10) + "\t68fd1e64" + strings.Repeat("\t", 25) + "\n"
	fuzzFormat(f, Criteo, line, line+strings.Replace(line, "1", "0", 1), "0"+strings.Repeat("\t", 39), "1\t2\n")
}

func FuzzReadVW(f *testing.F) {
	fuzzFormat(f, VW, "1 2 'tag|a x y:2 |b:0.5 z:4\n-1 |a x\n", "0 | w\n", "|a x\n", "1 |a x:1:2 ||\n")
}

// allocated returns the bytes f allocates.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}
