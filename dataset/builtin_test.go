package dataset

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"io/fs"
	"slices"
	"strings"
	"testing"
)

func TestBuiltinNames(t *testing.T) {
	if got := BuiltinNames(); !slices.Equal(got, []string{"a9a", "rcv1"}) {
		t.Fatalf("BuiltinNames = %v", got)
	}
	// The result is the caller's to modify.
	BuiltinNames()[0] = "x"
	if BuiltinNames()[0] != "a9a" {
		t.Fatal("BuiltinNames returned shared state")
	}
}

// Expected shapes, counted independently of this package (awk over the
// decompressed files).
func TestBuiltinShapes(t *testing.T) {
	type split struct {
		name       string
		rows, nnz  int
		maxFeature uint64
	}
	tests := []struct {
		name        string
		train, test split
	}{
		{"rcv1", split{"rcv1.train", 1000, 77739, 47117}, split{"rcv1.test", 249, 19512, 46957}},
		{"a9a", split{"a9a.train", 32561, 451592, 123}, split{"a9a.test", 16281, 225731, 122}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			train, test, err := Builtin(tc.name)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				d    *Dataset
				want split
			}{{train, tc.train}, {test, tc.test}} {
				d, w := c.d, c.want
				if d.Name != w.name || len(d.Rows) != w.rows || d.NNZ() != w.nnz || d.MaxFeature != w.maxFeature {
					t.Errorf("%s: got name %q, %d rows, %d nnz, max feature %d; want %q, %d, %d, %d",
						tc.name, d.Name, len(d.Rows), d.NNZ(), d.MaxFeature, w.name, w.rows, w.nnz, w.maxFeature)
				}
				if got := d.Labels(); !slices.Equal(got, []float64{-1, 1}) {
					t.Errorf("%s labels = %v, want [-1 1]", d.Name, got)
				}
				if err := checkRows(d); err != nil {
					t.Errorf("%s: %v", d.Name, err)
				}
			}
		})
	}
}

func TestBuiltinFirstRows(t *testing.T) {
	train, test, err := Builtin("rcv1")
	if err != nil {
		t.Fatal(err)
	}
	r := train.Rows[0] // "-1 9:6.2699720e-02 14:3.3754818e-02 ..."
	if r.Label != -1 || r.Keys[0] != 9 || r.Values[0] != float32(6.2699720e-02) || r.Keys[1] != 14 || r.Values[1] != float32(3.3754818e-02) {
		t.Errorf("rcv1.train row 0 = %v %v %v", r.Label, r.Keys[:2], r.Values[:2])
	}
	r = test.Rows[0] // "1 13:3.9656971e-02 ..."
	if r.Label != 1 || r.Keys[0] != 13 || r.Values[0] != float32(3.9656971e-02) {
		t.Errorf("rcv1.test row 0 = %v %v %v", r.Label, r.Keys[:1], r.Values[:1])
	}

	a, _, err := Builtin("a9a")
	if err != nil {
		t.Fatal(err)
	}
	want := Row{Label: -1, Keys: []uint64{3, 11, 14, 19, 39, 42, 55, 64, 67, 73, 75, 76, 80, 83}}
	if r := a.Rows[0]; r.Label != want.Label || !slices.Equal(r.Keys, want.Keys) || slices.ContainsFunc(r.Values, func(v float32) bool { return v != 1 }) {
		t.Errorf("a9a.train row 0 = %+v", r)
	}
}

func TestBuiltinNotCached(t *testing.T) {
	a, _, err := Builtin("rcv1")
	if err != nil {
		t.Fatal(err)
	}
	a.Rows[0].Label = 42
	a.Rows[0].Keys[0] = 1
	b, _, err := Builtin("rcv1")
	if err != nil {
		t.Fatal(err)
	}
	if b.Rows[0].Label != -1 || b.Rows[0].Keys[0] != 9 {
		t.Fatal("a caller's changes leaked into a later Builtin call")
	}
}

func TestBuiltinUnknown(t *testing.T) {
	_, _, err := Builtin("mnist")
	if err == nil || !strings.Contains(err.Error(), `"mnist"`) || !strings.Contains(err.Error(), "a9a, rcv1") {
		t.Fatalf("err = %v, want it to name the dataset and list a9a, rcv1", err)
	}
}

func TestLoad(t *testing.T) {
	d, err := Load("a9a")
	if err != nil {
		t.Fatal(err)
	}
	if d.Name != "a9a.train" || len(d.Rows) != 32561 {
		t.Errorf("Load(a9a) = %q with %d rows", d.Name, len(d.Rows))
	}
	// Not a built-in: a path, with the os error preserved.
	_, err = Load("no-such-dataset.libsvm")
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "no-such-dataset.libsvm") {
		t.Errorf("err = %v, want a not-exist error naming the path", err)
	}
	// A path that happens to contain a built-in name is still a path.
	if _, err := Load("./rcv1"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Load(./rcv1) err = %v, want not-exist", err)
	}
}

func TestBuiltinNotice(t *testing.T) {
	n := BuiltinNotice()
	for _, want := range []string{"rcv1", "a9a", "BSD 3-Clause", "Lewis", "CC BY 4.0", "Apache License 2.0", "Redistributions in binary form"} {
		if !strings.Contains(n, want) {
			t.Errorf("NOTICE lacks %q", want)
		}
	}
}

// BenchmarkReadRCV1 measures parsing the rcv1 training split, from the
// embedded gzip file and from its decompressed text. Throughput is per
// decompressed byte in both, so the difference is the cost of inflating.
func BenchmarkReadRCV1(b *testing.B) {
	compressed, err := builtinFS.ReadFile("builtin/rcv1_vw.train.libsvm.gz")
	if err != nil {
		b.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(compressed))
	if err != nil {
		b.Fatal(err)
	}
	plain, err := io.ReadAll(zr)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		data []byte
	}{{"gzip", compressed}, {"plain", plain}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(plain)))
			b.ReportAllocs()
			for b.Loop() {
				d, err := Read(bytes.NewReader(c.data), "rcv1.train")
				if err != nil || len(d.Rows) != 1000 {
					b.Fatal(err)
				}
			}
		})
	}
}
