package dataset

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// scanAll collects what a Scanner yields, copying each row.
func scanAll(data []byte) ([]Row, error) {
	s, err := NewScanner(bytes.NewReader(data), "fuzz")
	if err != nil {
		return nil, err
	}
	defer s.Close()
	var rows []Row
	for s.Scan() {
		r := s.Row()
		rows = append(rows, Row{Label: r.Label, Keys: append([]uint64(nil), r.Keys...), Values: append([]float32(nil), r.Values...)})
	}
	return rows, s.Err()
}

func TestScannerStreamsWhatReadReads(t *testing.T) {
	text := "+1 1:0.5 3:2\n\n# comment\n-1\n0 7:1e-3 9:4\r\n2 1:1"
	rows, err := scanAll([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	d, err := Read(strings.NewReader(text), "t")
	if err != nil {
		t.Fatal(err)
	}
	if !sameRows(rows, d.Rows) || len(rows) != 4 {
		t.Errorf("scanned %+v, read %+v", rows, d.Rows)
	}
	if d.MaxFeature != 9 || d.MaxFeatureLine != 5 {
		t.Errorf("MaxFeature %d at line %d, want 9 at line 5", d.MaxFeature, d.MaxFeatureLine)
	}
	s, _ := NewScanner(strings.NewReader("1 1:1\n1 2:1\n-1 3:x\n1 4:1\n"), "bad.libsvm")
	n := 0
	for s.Scan() {
		n++
	}
	if n != 2 || s.Err() == nil || !strings.HasPrefix(s.Err().Error(), `bad.libsvm:3: feature "3:x"`) {
		t.Errorf("after %d rows: %v", n, s.Err())
	}
}

func TestOpenScanner(t *testing.T) {
	s, err := OpenScanner("a9a.test")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for s.Scan() {
		n++
	}
	if err := s.Close(); err != nil || s.Err() != nil || n != 16281 {
		t.Errorf("a9a.test: %d rows, %v, %v", n, s.Err(), err)
	}
	path := filepath.Join(t.TempDir(), "d.libsvm.gz")
	os.WriteFile(path, gz(t, "1 1:1\n-1 2:1\n"), 0o644)
	s, err = OpenScanner(path)
	if err != nil {
		t.Fatal(err)
	}
	if !s.Scan() || s.Row().Keys[0] != 1 || !s.Scan() || s.Scan() || s.Err() != nil || s.Line() != 3 {
		t.Errorf("gzip file: line %d, err %v", s.Line(), s.Err())
	}
	s.Close()
	if _, err := OpenScanner(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("opened a missing file")
	}
	if _, err := OpenScanner("rcv1.validation"); err == nil {
		t.Error("opened a built-in split that does not exist")
	}
}

// FuzzScan checks that the Scanner yields exactly the rows Read returns,
// and fails where Read fails, with the same message.
func FuzzScan(f *testing.F) {
	f.Add([]byte("+1 1:0.5 3:2\n-1\n# c\n0 7:1e-3\r\n"))
	f.Add(gz(f, "1 1:1 2:2\n-1 3:3\n"))
	f.Add([]byte("1 2:1 1:1\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		d, rerr := Read(bytes.NewReader(data), "fuzz")
		rows, serr := scanAll(data)
		if (rerr == nil) != (serr == nil) || rerr != nil && rerr.Error() != serr.Error() {
			t.Fatalf("Read: %v; Scanner: %v", rerr, serr)
		}
		if rerr == nil && !sameRows(rows, d.Rows) {
			t.Fatalf("Scanner yields other rows than Read")
		}
	})
}
