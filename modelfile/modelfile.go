package modelfile

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"

	"github.com/sketchmesh/sketchmesh/dataset"
	"github.com/sketchmesh/sketchmesh/model"
	"github.com/sketchmesh/sketchmesh/wire"
)

// Model is a trained model with its feature mapping and provenance.
type Model struct {
	Kind model.Kind
	// Classes are the softmax label values, ascending; nil otherwise.
	Classes    []float64
	Mapping    Mapping
	Weights    []float64
	Provenance Provenance
}

// Mapping says how a row's feature ids become the model's keys.
type Mapping struct {
	// Dimension is the largest key with a weight (D).
	Dimension uint64
	// HashBits is 0 when ids are keys; B > 0 when ids are hashed into
	// 2^B keys (then Dimension is 2^B) with the function Hash names.
	HashBits uint
	Hash     string
}

// Provenance says where a model came from.
type Provenance struct {
	Mesh   string
	Member string
	Clock  uint64
	// Settings are the mesh's settings, by name.
	Settings []Setting
	// Data names the training data.
	Data []string
}

// Setting is one named setting and its value as text.
type Setting struct{ Name, Value string }

// ErrFormat is wrapped, with the cause, by every error about the contents
// of a model file.
var ErrFormat = errors.New("not a valid model file")

// Format constants (see the package documentation).
const (
	magic        = "SKMMODL\n"
	Version      = 1
	headerBytes  = 8 + 4 + 8
	trailerBytes = 4
)

// Limits on what a model file may hold.
const (
	// MaxWeights bounds the weights: 2^28 float64 values, 2 GiB.
	MaxWeights   = 1 << 28
	maxClasses   = 1 << 16
	maxTextBytes = 4096
	maxSettings  = 256
	maxDataNames = 1024
	maxBodyBytes = 8*MaxWeights + 8*maxClasses + (maxSettings*2+maxDataNames+8)*(maxTextBytes+8)
	// MaxFileBytes bounds a model file's size.
	MaxFileBytes = headerBytes + maxBodyBytes + trailerBytes
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Blocks is the number of weight blocks: the classes of a softmax model,
// 1 for the others.
func (m *Model) Blocks() int {
	if m.Kind == model.Softmax {
		return len(m.Classes)
	}
	return 1
}

// Validate checks that m is a model a reader can use.
func (m *Model) Validate() error {
	switch m.Kind {
	case model.LogisticRegression, model.LinearSVM, model.LinearRegression:
		if len(m.Classes) != 0 {
			return fmt.Errorf("a %s model has no classes, this one lists %d", m.Kind, len(m.Classes))
		}
	case model.Softmax:
		if len(m.Classes) < 2 || len(m.Classes) > maxClasses {
			return fmt.Errorf("a softmax model needs 2 to %d classes, this one has %d", maxClasses, len(m.Classes))
		}
		for i, c := range m.Classes {
			if math.IsNaN(c) || math.IsInf(c, 0) || i > 0 && c <= m.Classes[i-1] {
				return fmt.Errorf("classes must be finite and strictly ascending: %v", m.Classes)
			}
		}
	default:
		return fmt.Errorf("unknown model kind %q", m.Kind)
	}
	mp := m.Mapping
	switch {
	case mp.Dimension == 0:
		return errors.New("dimension 0: the model has no features")
	case mp.Dimension >= MaxWeights:
		return fmt.Errorf("dimension %d: more than %d weights", mp.Dimension, MaxWeights)
	case mp.HashBits == 0 && mp.Hash != "":
		return fmt.Errorf("hash function %q named without hash bits", mp.Hash)
	case mp.HashBits > 0 && mp.Hash != dataset.HashFunction:
		return fmt.Errorf("unknown hash function %q (this build knows %s)", mp.Hash, dataset.HashFunction)
	case mp.HashBits > 0 && (mp.HashBits > dataset.MaxHashBits || mp.Dimension != 1<<mp.HashBits):
		return fmt.Errorf("hash bits %d do not match dimension %d", mp.HashBits, mp.Dimension)
	}
	want := uint64(m.Blocks()) * (mp.Dimension + 1)
	if want > MaxWeights || uint64(len(m.Weights)) != want {
		return fmt.Errorf("%d weights, the model has %d blocks of %d", len(m.Weights), m.Blocks(), mp.Dimension+1)
	}
	for i, w := range m.Weights {
		if math.IsNaN(w) || math.IsInf(w, 0) {
			return fmt.Errorf("weight %d is %v", i, w)
		}
	}
	p := m.Provenance
	if len(p.Settings) > maxSettings || len(p.Data) > maxDataNames {
		return fmt.Errorf("provenance lists %d settings and %d data names, limits %d and %d", len(p.Settings), len(p.Data), maxSettings, maxDataNames)
	}
	texts := []string{p.Mesh, p.Member}
	for _, s := range p.Settings {
		texts = append(texts, s.Name, s.Value)
	}
	for _, t := range append(texts, p.Data...) {
		if len(t) > maxTextBytes {
			return fmt.Errorf("a provenance text of %d bytes, limit %d", len(t), maxTextBytes)
		}
	}
	return nil
}

// Build returns the model the file describes, ready to evaluate its
// weights (L2 is a training setting and plays no part).
func (m *Model) Build() (*model.Model, error) {
	return model.New(model.Config{Kind: m.Kind, MaxFeature: m.Mapping.Dimension, Classes: m.Classes})
}

// Hasher returns the mapping's hasher: it hashes ids when the model was
// trained with hashing and leaves them as they are otherwise.
func (mp Mapping) Hasher() *dataset.Hasher { return &dataset.Hasher{Bits: mp.HashBits} }

// Encode returns m as the bytes of a model file.
func Encode(m *Model) ([]byte, error) {
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("model file: not written: %w", err)
	}
	w := wire.NewWriter()
	w.Array(5)
	w.String(string(m.Kind))
	w.Floats(m.Classes)
	w.Array(3)
	w.Uint(m.Mapping.Dimension)
	w.Uint(uint64(m.Mapping.HashBits))
	w.String(m.Mapping.Hash)
	w.Floats(m.Weights)
	p := m.Provenance
	w.Array(5)
	w.String(p.Mesh)
	w.String(p.Member)
	w.Uint(p.Clock)
	w.Array(len(p.Settings))
	for _, s := range p.Settings {
		w.Array(2)
		w.String(s.Name)
		w.String(s.Value)
	}
	w.Strings(p.Data)
	body := w.Bytes()

	out := make([]byte, headerBytes, headerBytes+len(body)+trailerBytes)
	copy(out, magic)
	binary.BigEndian.PutUint32(out[8:], Version)
	binary.BigEndian.PutUint64(out[12:], uint64(len(body)))
	out = append(out, body...)
	return binary.BigEndian.AppendUint32(out, crc32.Checksum(out, castagnoli)), nil
}

// Decode checks and decodes the bytes of a model file.
func Decode(data []byte) (*Model, error) {
	body, err := checkFrame(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrFormat, err)
	}
	m, err := decodeBody(body)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrFormat, err)
	}
	return m, nil
}

// checkFrame checks the header, the length and the checksum, and returns
// the body.
func checkFrame(data []byte) ([]byte, error) {
	if k := min(len(data), len(magic)); !bytes.Equal(data[:k], []byte(magic[:k])) || len(data) == 0 {
		return nil, errors.New("bad magic: not a sketchmesh model file")
	}
	if len(data) < headerBytes {
		return nil, fmt.Errorf("truncated: %d bytes, shorter than the %d-byte header", len(data), headerBytes)
	}
	if v := binary.BigEndian.Uint32(data[8:]); v != Version {
		return nil, fmt.Errorf("format version %d, this build reads version %d", v, Version)
	}
	n := binary.BigEndian.Uint64(data[12:])
	if n > maxBodyBytes {
		return nil, fmt.Errorf("header declares a %d-byte body, more than any model file holds", n)
	}
	want := uint64(headerBytes) + n + trailerBytes
	if got := uint64(len(data)); got != want {
		if got < want {
			return nil, fmt.Errorf("truncated: the header declares %d bytes in all, the file holds %d", want, got)
		}
		return nil, fmt.Errorf("%d trailing bytes after the checksum", got-want)
	}
	end := headerBytes + int(n)
	if crc32.Checksum(data[:end], castagnoli) != binary.BigEndian.Uint32(data[end:]) {
		return nil, errors.New("checksum mismatch: the file was changed or damaged after it was written")
	}
	return data[headerBytes:end], nil
}

func decodeBody(body []byte) (*Model, error) {
	r := wire.NewReader(body)
	if err := r.Fields("model", 5); err != nil {
		return nil, err
	}
	m := &Model{}
	kind, err := r.String("kind", 16)
	if err != nil {
		return nil, err
	}
	m.Kind = model.Kind(kind)
	if m.Classes, err = r.Floats("classes", maxClasses); err != nil {
		return nil, err
	}
	if len(m.Classes) == 0 {
		m.Classes = nil
	}
	if err := r.Fields("mapping", 3); err != nil {
		return nil, err
	}
	if m.Mapping.Dimension, err = r.Uint("dimension"); err != nil {
		return nil, err
	}
	bits, err := r.Uint("hash bits")
	if err != nil {
		return nil, err
	}
	if bits > dataset.MaxHashBits {
		return nil, fmt.Errorf("hash bits %d, at most %d", bits, dataset.MaxHashBits)
	}
	m.Mapping.HashBits = uint(bits)
	if m.Mapping.Hash, err = r.String("hash function", 64); err != nil {
		return nil, err
	}
	if m.Weights, err = r.Floats("weights", MaxWeights); err != nil {
		return nil, err
	}
	if err := r.Fields("provenance", 5); err != nil {
		return nil, err
	}
	p := &m.Provenance
	if p.Mesh, err = r.String("mesh", maxTextBytes); err != nil {
		return nil, err
	}
	if p.Member, err = r.String("member", maxTextBytes); err != nil {
		return nil, err
	}
	if p.Clock, err = r.Uint("clock"); err != nil {
		return nil, err
	}
	n, err := r.Array("settings", 3)
	if err != nil {
		return nil, err
	}
	if n > maxSettings {
		return nil, fmt.Errorf("%d settings, limit %d", n, maxSettings)
	}
	if n > 0 {
		p.Settings = make([]Setting, n)
	}
	for i := range p.Settings {
		if err := r.Fields("setting", 2); err != nil {
			return nil, err
		}
		if p.Settings[i].Name, err = r.String("setting name", maxTextBytes); err != nil {
			return nil, err
		}
		if p.Settings[i].Value, err = r.String("setting value", maxTextBytes); err != nil {
			return nil, err
		}
	}
	if p.Data, err = r.Strings("data names", maxDataNames, maxTextBytes); err != nil {
		return nil, err
	}
	if len(p.Data) == 0 {
		p.Data = nil
	}
	if err := r.End(); err != nil {
		return nil, err
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return m, nil
}

// Read reads and decodes the model file at path. Errors about its contents
// wrap ErrFormat and name the file.
func Read(path string) (*Model, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("model file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("model file: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("model file %s: %w: not a regular file", path, ErrFormat)
	}
	if fi.Size() > MaxFileBytes {
		return nil, fmt.Errorf("model file %s: %w: %d bytes, more than any model file holds", path, ErrFormat, fi.Size())
	}
	data := make([]byte, fi.Size())
	if _, err := io.ReadFull(f, data); err != nil {
		return nil, fmt.Errorf("model file %s: %w", path, err)
	}
	m, err := Decode(data)
	if err != nil {
		return nil, fmt.Errorf("model file %s: %w", path, err)
	}
	return m, nil
}

// Write writes m to path atomically: to a temporary file in the same
// directory, synced, then renamed over path.
func Write(path string, m *Model) error {
	data, err := Encode(m)
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("model file: %w", err)
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, 0o644)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("model file %s: %w", path, err)
	}
	if d, err := os.Open(dir); err == nil {
		// Make the rename durable; a directory that cannot be synced
		// (some filesystems refuse) still holds a whole file.
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// Equal reports whether two models are the same, weights bit for bit.
func Equal(a, b *Model) bool {
	bitsEqual := func(x, y []float64) bool {
		return slices.EqualFunc(x, y, func(u, v float64) bool { return math.Float64bits(u) == math.Float64bits(v) })
	}
	return a.Kind == b.Kind && bitsEqual(a.Classes, b.Classes) && a.Mapping == b.Mapping &&
		bitsEqual(a.Weights, b.Weights) && a.Provenance.Mesh == b.Provenance.Mesh &&
		a.Provenance.Member == b.Provenance.Member && a.Provenance.Clock == b.Provenance.Clock &&
		slices.Equal(a.Provenance.Settings, b.Provenance.Settings) && slices.Equal(a.Provenance.Data, b.Provenance.Data)
}
