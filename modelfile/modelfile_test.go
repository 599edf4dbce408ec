package modelfile

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sketchmesh/sketchmesh/dataset"
	"github.com/sketchmesh/sketchmesh/model"
)

func lrModel() *Model {
	return &Model{
		Kind:    model.LogisticRegression,
		Mapping: Mapping{Dimension: 3},
		Weights: []float64{0.5, -1.25, 0, 3e-9},
		Provenance: Provenance{
			Mesh: "testnet", Member: "12D3KooWabc/1", Clock: 200,
			Settings: []Setting{{"model", "lr"}, {"lr", "0.02"}},
			Data:     []string{"train.libsvm", "test.libsvm"},
		},
	}
}

func softmaxHashed() *Model {
	return &Model{
		Kind:    model.Softmax,
		Classes: []float64{1, 2, 7},
		Mapping: Mapping{Dimension: 4, HashBits: 2, Hash: dataset.HashFunction},
		Weights: []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
	}
}

// reseal recomputes the checksum of a file whose bytes a test changed.
func reseal(file []byte) []byte {
	end := len(file) - trailerBytes
	binary.BigEndian.PutUint32(file[end:], crc32.Checksum(file[:end], castagnoli))
	return file
}

func TestRoundTrip(t *testing.T) {
	for _, m := range []*Model{lrModel(), softmaxHashed()} {
		data, err := Encode(m)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Decode(data)
		if err != nil {
			t.Fatal(err)
		}
		if !Equal(m, got) {
			t.Errorf("round trip changed the model:\n%+v\n%+v", m, got)
		}
	}
}

func TestWriteIsAtomicAndReadable(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.model")
	if err := os.WriteFile(path, []byte("the previous file"), 0o644); err != nil {
		t.Fatal(err)
	}
	m := lrModel()
	if err := Write(path, m); err != nil {
		t.Fatal(err)
	}
	got, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if !Equal(m, got) {
		t.Errorf("read back %+v", got)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("the directory holds %d entries, want the model file alone", len(entries))
	}
	// A model that does not validate is refused and leaves the file alone.
	bad := lrModel()
	bad.Weights = bad.Weights[:2]
	if err := Write(path, bad); err == nil {
		t.Fatal("wrote a model with too few weights")
	}
	if again, err := Read(path); err != nil || !Equal(m, again) {
		t.Errorf("a refused write changed the file: %v", err)
	}
	// A directory that does not exist: an error naming the path.
	if err := Write(filepath.Join(dir, "no", "m.model"), m); err == nil {
		t.Error("wrote into a missing directory")
	}
}

func TestBadFilesSayWhy(t *testing.T) {
	good, err := Encode(lrModel())
	if err != nil {
		t.Fatal(err)
	}
	flipped := bytes.Clone(good)
	flipped[headerBytes+3] ^= 0x40
	otherVersion := bytes.Clone(good)
	binary.BigEndian.PutUint32(otherVersion[8:], 2)
	badWeight := &Model{Kind: model.LinearRegression, Mapping: Mapping{Dimension: 1}, Weights: []float64{1, 2}}
	nanFile, _ := Encode(badWeight)
	nanFile = bytes.Clone(nanFile)
	// The weights are the last bin before the provenance: put NaN bits
	// in place of 2.0 (0x4000000000000000 little-endian ends in 0x40).
	i := bytes.Index(nanFile, []byte{0, 0, 0, 0, 0, 0, 0, 0x40})
	copy(nanFile[i:], []byte{1, 0, 0, 0, 0, 0, 0xf8, 0x7f})
	reseal(nanFile)

	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "bad magic"},
		{"other file", []byte("+1 1:0.5\n"), "bad magic"},
		{"header cut", good[:10], "truncated"},
		{"body cut", good[:len(good)-7], "truncated"},
		{"trailing bytes", append(bytes.Clone(good), 0), "trailing bytes"},
		{"bad checksum", flipped, "checksum mismatch"},
		{"other version", otherVersion, "format version 2, this build reads version 1"},
		{"NaN weight", nanFile, "is NaN"},
	}
	for _, c := range cases {
		_, err := Decode(c.data)
		if err == nil || !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one wrapping ErrFormat saying %q", c.name, err, c.want)
		}
	}
	path := filepath.Join(t.TempDir(), "cut.model")
	os.WriteFile(path, good[:len(good)/2], 0o644)
	if _, err := Read(path); err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "truncated") {
		t.Errorf("reading a truncated file: %v", err)
	}
}

func TestValidateRefusesInconsistentModels(t *testing.T) {
	cases := map[string]func(m *Model){
		"unknown kind":         func(m *Model) { m.Kind = "tree" },
		"classes on lr":        func(m *Model) { m.Classes = []float64{0, 1} },
		"no dimension":         func(m *Model) { m.Mapping.Dimension = 0 },
		"hash without bits":    func(m *Model) { m.Mapping.Hash = dataset.HashFunction },
		"unknown hash":         func(m *Model) { m.Mapping = Mapping{Dimension: 2, HashBits: 1, Hash: "md5"} },
		"bits off dimension":   func(m *Model) { m.Mapping = Mapping{Dimension: 3, HashBits: 2, Hash: dataset.HashFunction} },
		"weights short":        func(m *Model) { m.Weights = m.Weights[:3] },
		"huge dimension":       func(m *Model) { m.Mapping.Dimension = 1 << 40 },
		"long provenance text": func(m *Model) { m.Provenance.Mesh = strings.Repeat("x", maxTextBytes+1) },
	}
	for name, change := range cases {
		m := lrModel()
		change(m)
		if err := m.Validate(); err == nil {
			t.Errorf("%s: validated", name)
		}
	}
	sm := softmaxHashed()
	sm.Classes = []float64{2, 1, 7}
	if err := sm.Validate(); err == nil {
		t.Error("unsorted classes validated")
	}
}

func TestExport(t *testing.T) {
	m := softmaxHashed()
	var js bytes.Buffer
	if err := m.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Format  string      `json:"format"`
		Kind    string      `json:"kind"`
		Classes []float64   `json:"classes"`
		Weights [][]float64 `json:"weights"`
		Mapping struct {
			HashBits uint   `json:"hash_bits"`
			Hash     string `json:"hash"`
		} `json:"mapping"`
	}
	if err := json.Unmarshal(js.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Format != "sketchmesh-model" || doc.Kind != "softmax" || len(doc.Weights) != 3 || doc.Weights[2][0] != 11 ||
		doc.Mapping.HashBits != 2 || doc.Mapping.Hash != dataset.HashFunction {
		t.Errorf("JSON export: %s", js.String())
	}
	var tsv bytes.Buffer
	if err := lrModel().WriteTSV(&tsv); err != nil {
		t.Fatal(err)
	}
	want := "class\tkey\tweight\n0\t0\t0.5\n0\t1\t-1.25\n0\t3\t3e-09\n"
	if tsv.String() != want {
		t.Errorf("TSV export:\n%q\nwant\n%q", tsv.String(), want)
	}
}

// The model a file describes evaluates its weights.
func TestBuild(t *testing.T) {
	m := lrModel()
	mdl, err := m.Build()
	if err != nil {
		t.Fatal(err)
	}
	if mdl.NumParams() != len(m.Weights) {
		t.Errorf("built a model of %d parameters for %d weights", mdl.NumParams(), len(m.Weights))
	}
}
