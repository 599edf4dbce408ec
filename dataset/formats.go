package dataset

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
)

// Format names a text format of training data.
type Format string

// The formats the readers parse.
//
//   - LIBSVM: "<label> <id>:<value> ...", ids any uint64 from 1 (see the
//     package documentation).
//   - Criteo: the layout of the Criteo display-advertising logs, one row a
//     line of 40 tab-separated columns: the label (0 or 1), 13 integer
//     columns I1..I13 and 26 categorical columns C1..C26 (hashed strings in
//     the public files); an empty column is missing. Integer v becomes the
//     categorical token of its log bucket, v itself for v ≤ 2 and
//     ⌊(ln v)²⌋ above (the transform of the competition's winning entry,
//     also used by libffm's examples), so counts spanning decades share
//     weights; negative integers keep their own token. Each present column
//     is one feature of value 1, hashed together with its column name
//     ("I3=5", "C7=68fd1e64").
//   - VW: Vowpal Wabbit's text format,
//     "[label [importance]] ['tag]|ns feature[:value] ... |ns2 ...": every
//     feature is hashed together with its namespace ("ns^feature"), its
//     value is 1 unless given, and a namespace's value ("|ns:0.5") scales
//     its features. Binary labels are −1 and 1 (0 also reads as negative);
//     the importance weight and the tag are accepted and not used.
//
// Criteo and VW features are strings, so their rows are always hashed into
// 2^bits keys (HashString); LIBSVM ids are hashed only when asked.
const (
	LIBSVM Format = "libsvm"
	Criteo Format = "criteo"
	VW     Format = "vw"
)

// Formats lists the format names a user may select.
func Formats() []string { return []string{string(LIBSVM), string(Criteo), string(VW)} }

// ParseFormat returns the Format a name selects.
func ParseFormat(name string) (Format, error) {
	switch f := Format(name); f {
	case LIBSVM, Criteo, VW:
		return f, nil
	}
	return "", fmt.Errorf("unknown data format %q (known: libsvm, criteo, vw)", name)
}

// HashesFeatures reports whether rows of the format are hashed as they are
// read (their features are strings).
func (f Format) HashesFeatures() bool { return f == Criteo || f == VW }

// Options selects how a reader parses: the format, and for the formats
// that hash, the hash bits (1..MaxHashBits).
type Options struct {
	Format   Format
	HashBits uint
}

func (o Options) check() error {
	if o.Format == "" || o.Format == LIBSVM {
		return nil
	}
	if _, err := ParseFormat(string(o.Format)); err != nil {
		return err
	}
	if err := CheckHashBits(o.HashBits); err != nil {
		return fmt.Errorf("%s features are strings and must be hashed: %w", o.Format, err)
	}
	return nil
}

// ReadWith is Read for any format.
func ReadWith(r io.Reader, name string, o Options) (*Dataset, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	return readFormat(r, name, MaxLineLen, o)
}

// NewScannerWith is NewScanner for any format.
func NewScannerWith(r io.Reader, name string, o Options) (*Scanner, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	s, err := NewScanner(r, name)
	if err != nil {
		return nil, err
	}
	s.p.opts = o
	return s, nil
}

// Parse errors of the hashed formats.
var (
	errColumns  = errors.New("wrong number of columns")
	errNoLabel  = errors.New("no label")
	errFeature  = errors.New("bad feature")
	errNoFields = errors.New("no '|' namespace: a VW line needs at least one")
)

// Criteo layout.
const (
	criteoInts    = 13
	criteoCats    = 26
	criteoColumns = 1 + criteoInts + criteoCats
)

// hashedRow collects a hashed row's features and returns them sorted, with
// keys that collide summed in input order.
type hashedRow struct {
	keys []uint64
	vals []float32
	idx  []int
	name []byte
}

func (h *hashedRow) reset() { h.keys, h.vals = h.keys[:0], h.vals[:0] }

func (h *hashedRow) add(bits uint, name []byte, v float32) {
	h.keys = append(h.keys, bucket(Hash64(name), bits))
	h.vals = append(h.vals, v)
}

// emit stores the collected features in the parser's arrays as one row.
func (h *hashedRow) emit(p *parser, label float64) error {
	n := len(h.keys)
	h.idx = slices.Grow(h.idx[:0], n)[:n]
	for i := range h.idx {
		h.idx[i] = i
	}
	slices.SortStableFunc(h.idx, func(a, b int) int { return cmp.Compare(h.keys[a], h.keys[b]) })
	distinct := 0
	for i, j := range h.idx {
		if i == 0 || h.keys[j] != h.keys[h.idx[i-1]] {
			distinct++
		}
	}
	var keys []uint64
	var vals []float32
	if distinct > 0 {
		keys, vals = p.alloc(distinct)
	}
	m := -1
	for i, j := range h.idx {
		if i == 0 || h.keys[j] != h.keys[h.idx[i-1]] {
			m++
			keys[m], vals[m] = h.keys[j], 0
		}
		vals[m] += h.vals[j]
		if math.IsInf(float64(vals[m]), 0) {
			return fmt.Errorf("%w: values hashed to one key sum beyond the float32 range", errValueRange)
		}
	}
	row := Row{Label: label}
	if distinct > 0 {
		row.Keys, row.Values = keys, vals
		if k := keys[distinct-1]; k > p.maxFeature {
			p.maxFeature, p.maxFeatureLine = k, p.lineNo
		}
	}
	p.emitRow(row)
	return nil
}

// parseCriteoLine parses one line of the Criteo layout.
func (p *parser) parseCriteoLine(line []byte) error {
	line = bytes.TrimRight(line, "\r\n")
	if len(line) == 0 {
		return nil
	}
	if c := bytes.Count(line, []byte{'\t'}) + 1; c != criteoColumns {
		return fmt.Errorf("%w: %d tab-separated columns, the Criteo layout has %d (label, 13 integers, 26 categories)", errColumns, c, criteoColumns)
	}
	h := &p.hashed
	h.reset()
	col, rest := 0, line
	var label float64
	for ; ; col++ {
		field := rest
		i := bytes.IndexByte(rest, '\t')
		if i >= 0 {
			field, rest = rest[:i], rest[i+1:]
		}
		switch {
		case col == 0:
			switch string(field) {
			case "0":
				label = 0
			case "1":
				label = 1
			default:
				return fmt.Errorf("label %s: %w: want 0 or 1", quote(field), errBadLabel)
			}
		case len(field) == 0:
			// missing
		case col <= criteoInts:
			v, err := strconv.ParseInt(string(field), 10, 64)
			if err != nil {
				return fmt.Errorf("column I%d %s: %w: not an integer", col, quote(field), errFeature)
			}
			if v > 2 {
				v = int64(math.Floor(math.Pow(math.Log(float64(v)), 2)))
			}
			h.name = append(strconv.AppendInt(append(h.name[:0], 'I'), int64(col), 10), '=')
			h.add(p.opts.HashBits, strconv.AppendInt(h.name, v, 10), 1)
		default:
			h.name = append(strconv.AppendInt(append(h.name[:0], 'C'), int64(col-criteoInts), 10), '=')
			h.add(p.opts.HashBits, append(h.name, field...), 1)
		}
		if i < 0 {
			break
		}
	}
	return h.emit(p, label)
}

// parseVWLine parses one line of Vowpal Wabbit's text format.
func (p *parser) parseVWLine(line []byte) error {
	line = bytes.TrimRight(line, "\r\n")
	if len(bytes.TrimSpace(line)) == 0 {
		return nil
	}
	bar := bytes.IndexByte(line, '|')
	if bar < 0 {
		return errNoFields
	}
	head, tok := line[:bar], []byte(nil)
	tok, head = nextToken(head)
	if tok == nil || tok[0] == '\'' {
		return errNoLabel
	}
	label, err := strconv.ParseFloat(string(tok), 64)
	if err != nil || hasUnderscore(tok) || math.IsNaN(label) || math.IsInf(label, 0) {
		return fmt.Errorf("label %s: %w", quote(tok), errBadLabel)
	}
	if tok, head = nextToken(head); tok != nil && tok[0] != '\'' {
		if w, err := strconv.ParseFloat(string(tok), 64); err != nil || !(w >= 0) || math.IsInf(w, 0) {
			return fmt.Errorf("importance weight %s: %w: want a finite number >= 0", quote(tok), errFeature)
		}
		tok, head = nextToken(head)
	}
	if tok != nil && tok[0] != '\'' || tok != nil && len(bytes.TrimSpace(head)) > 0 {
		return fmt.Errorf("%s before the first '|': %w: want [label [importance]] ['tag]", quote(tok), errFeature)
	}
	h := &p.hashed
	h.reset()
	for _, section := range bytes.Split(line[bar+1:], []byte{'|'}) {
		ns, scale := []byte(" "), float32(1)
		if len(section) > 0 && !isSpace(section[0]) {
			var name []byte
			name, section = nextToken(section)
			if c := bytes.IndexByte(name, ':'); c >= 0 {
				v, err := parseValue(name[c+1:])
				if err != nil {
					return fmt.Errorf("namespace %s: %w", quote(name), err)
				}
				name, scale = name[:c], v
			}
			ns = name
		}
		for {
			var f []byte
			if f, section = nextToken(section); f == nil {
				break
			}
			v, name := float32(1), f
			if c := bytes.LastIndexByte(f, ':'); c >= 0 {
				var err error
				if v, err = parseValue(f[c+1:]); err != nil {
					return fmt.Errorf("feature %s: %w", quote(f), err)
				}
				name = f[:c]
			}
			if len(name) == 0 {
				return fmt.Errorf("feature %s: %w: empty name", quote(f), errFeature)
			}
			h.name = append(append(append(h.name[:0], ns...), '^'), name...)
			h.add(p.opts.HashBits, h.name, v*scale)
		}
	}
	return h.emit(p, label)
}

// ReadFileWith is ReadFile for any format.
func ReadFileWith(path string, o Options) (*Dataset, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("dataset: %w", err)
	}
	defer f.Close()
	return ReadWith(f, path, o)
}

// OpenScannerWith is OpenScanner for any format; built-in splits are
// LIBSVM only.
func OpenScannerWith(path string, o Options) (*Scanner, error) {
	if !o.Format.HashesFeatures() {
		return OpenScanner(path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("dataset: %w", err)
	}
	s, err := NewScannerWith(f, path, o)
	return owning(s, err, f.Close)
}
