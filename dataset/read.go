package dataset

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
)

// MaxLineLen is the longest line, in bytes without its terminator, that the
// reader accepts. It bounds the memory one line can demand, so a file with no
// newlines (or a gzip bomb of one) fails with an error instead of exhausting
// memory.
const MaxLineLen = 16 << 20

// Causes of parse errors. They are wrapped with the file name, line and the
// offending token, so messages read like
//
//	rcv1.train:17: feature "12x:0.5": bad index
var (
	errLineTooLong   = errors.New("line too long")
	errBadLabel      = errors.New("bad label")
	errLabelInfinite = errors.New("label is not finite")
	errMissingColon  = errors.New("missing ':' between index and value")
	errBadIndex      = errors.New("bad index")
	errZeroIndex     = errors.New("index 0 is not allowed: feature ids are 1-based and key 0 is reserved for the model's bias")
	errNotAscending  = errors.New("indices are not strictly ascending")
	errBadValue      = errors.New("bad value")
	errValueInfinite = errors.New("value is not finite")
	errValueRange    = errors.New("value is outside the float32 range")
)

// ioBufSize is the size of each bufio buffer. Lines up to this length are
// parsed in place without copying.
const ioBufSize = 64 << 10

// gzipMagic starts every gzip member (RFC 1952).
var gzipMagic = [2]byte{0x1f, 0x8b}

// ReadFile reads a LIBSVM file, gzip-compressed or plain. The dataset and its
// errors are named by path.
func ReadFile(path string) (*Dataset, error) {
	f, err := os.Open(path)
	if err != nil {
		// *os.PathError already names the path and the operation.
		return nil, fmt.Errorf("dataset: %w", err)
	}
	defer f.Close()
	return Read(f, path)
}

// Read parses LIBSVM data from r, which may be gzip-compressed (detected by
// its magic bytes) or plain. name labels the dataset and every error, which
// reads "name:line: cause". r is consumed as a stream; only the parsed rows
// are kept.
func Read(r io.Reader, name string) (*Dataset, error) {
	return read(r, name, MaxLineLen)
}

// read is Read with the line cap as a parameter, so tests can exercise the
// cap without building 16 MiB inputs for every case.
func read(r io.Reader, name string, maxLine int) (*Dataset, error) {
	return readFormat(r, name, maxLine, Options{})
}

// readFormat is read for any format.
func readFormat(r io.Reader, name string, maxLine int, o Options) (*Dataset, error) {
	if name == "" {
		name = "input"
	}
	br := bufio.NewReaderSize(r, ioBufSize)
	src := br
	// Peek errors just mean fewer than two bytes exist: such input cannot
	// be gzip and is parsed as plain text.
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == gzipMagic[0] && magic[1] == gzipMagic[1] {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("%s: reading gzip header: %w", name, err)
		}
		defer zr.Close()
		src = bufio.NewReaderSize(zr, ioBufSize)
	}

	p := parser{src: src, maxLine: maxLine, arenaNext: firstArenaChunk, rowsNext: firstRowsChunk, opts: o}
	for lineNo := 1; ; lineNo++ {
		p.lineNo = lineNo
		line, readErr := p.readLine()
		if readErr != nil && readErr != io.EOF {
			if errors.Is(readErr, errLineTooLong) {
				return nil, fmt.Errorf("%s:%d: %w", name, lineNo, readErr)
			}
			return nil, fmt.Errorf("%s:%d: reading: %w", name, lineNo, readErr)
		}
		if err := p.parseLine(line); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, lineNo, err)
		}
		if readErr == io.EOF {
			break
		}
	}
	return &Dataset{Name: name, Rows: p.rows(), MaxFeature: p.maxFeature, MaxFeatureLine: p.maxFeatureLine}, nil
}

// Allocation sizes. The arena and the row list grow geometrically from small
// first chunks, so tiny inputs stay cheap, up to a cap, so the unused tail of
// the last chunk stays small next to a large input.
const (
	firstArenaChunk = 256
	maxArenaChunk   = 1 << 16
	firstRowsChunk  = 64
	maxRowsChunk    = 1 << 12
)

// parser holds the state of one Read.
type parser struct {
	src     *bufio.Reader
	maxLine int
	long    []byte // assembles lines longer than src's buffer

	// Arena for the features of all rows. Rows take capacity-capped
	// subslices, so appending to one row never overwrites its neighbour.
	arenaKeys []uint64
	arenaVals []float32
	arenaNext int

	// Rows are collected in chunks and copied once into an exactly sized
	// slice at the end: growing one slice by append would allocate several
	// times the final size over its lifetime.
	chunks   [][]Row
	cur      []Row
	nrows    int
	rowsNext int

	maxFeature uint64
	// lineNo is the line being parsed; maxFeatureLine the line where
	// maxFeature was first seen.
	lineNo         int
	maxFeatureLine int

	// A Scanner's parser keeps one row at a time in scratch arrays instead
	// of collecting rows.
	stream      bool
	scratchKeys []uint64
	scratchVals []float32
	last        Row
	haveRow     bool

	// opts selects the format; hashed collects a hashed format\'s row.
	opts   Options
	hashed hashedRow
}

// readLine returns the next line including its '\n' (absent on the last line
// of a file without a final newline). The slice is valid until the next call.
// At the end of input it returns the final, possibly empty, line with io.EOF.
func (p *parser) readLine() ([]byte, error) {
	line, err := p.src.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		// Longer than the buffer: accumulate, checking the cap before
		// each append so an endless line costs at most the cap.
		p.long = append(p.long[:0], line...)
		for err == bufio.ErrBufferFull {
			line, err = p.src.ReadSlice('\n')
			if len(p.long)+len(line) > p.maxLine+1 { // +1 for the '\n'
				return nil, fmt.Errorf("%w: the limit is %d bytes", errLineTooLong, p.maxLine)
			}
			p.long = append(p.long, line...)
		}
		line = p.long
	}
	if err != nil && err != io.EOF {
		return nil, err
	}
	n := len(line)
	if n > 0 && line[n-1] == '\n' {
		n--
	}
	if n > p.maxLine {
		return nil, fmt.Errorf("%w: the limit is %d bytes", errLineTooLong, p.maxLine)
	}
	return line, err
}

// isSpace reports whether c separates tokens. '\r' counts so CRLF files parse
// the same as LF files; treating a stray CR elsewhere as a blank is harmless.
// '\n' only ever ends the line.
func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// parseLine parses one line and, unless it is blank or a comment, appends its
// row. The returned error is the bare cause; the caller adds file and line.
func (p *parser) parseLine(line []byte) error {
	switch p.opts.Format {
	case Criteo:
		return p.parseCriteoLine(line)
	case VW:
		return p.parseVWLine(line)
	}
	// A '#' starts a comment that runs to the end of the line.
	if i := bytes.IndexByte(line, '#'); i >= 0 {
		line = line[:i]
	}
	tok, rest := nextToken(line)
	if tok == nil {
		return nil // blank or comment-only line
	}
	label, err := strconv.ParseFloat(string(tok), 64)
	if err == nil && hasUnderscore(tok) {
		err = strconv.ErrSyntax
	}
	if err != nil {
		var ne *strconv.NumError
		// ParseFloat reports overflow ("1e999") as ErrRange with ±Inf.
		if errors.As(err, &ne) && ne.Err == strconv.ErrRange {
			return fmt.Errorf("label %s: %w", quote(tok), errLabelInfinite)
		}
		return fmt.Errorf("label %s: %w", quote(tok), errBadLabel)
	}
	if math.IsNaN(label) || math.IsInf(label, 0) {
		return fmt.Errorf("label %s: %w", quote(tok), errLabelInfinite)
	}

	// Every feature token holds exactly one ':' and the label none, so on
	// a valid line the colons count the features: the row is parsed
	// straight into exactly sized arena slices, with no scratch copy and no
	// growth by append. A malformed line may reserve more, at most 12 bytes
	// per byte of the line, and ends the read.
	var keys []uint64
	var vals []float32
	if c := bytes.Count(rest, colonSep); c > 0 {
		keys, vals = p.alloc(c)
	}
	n := 0
	var prev uint64
	for {
		tok, rest = nextToken(rest)
		if tok == nil {
			break
		}
		key, val, err := parseFeature(tok)
		if err != nil {
			return fmt.Errorf("feature %s: %w", quote(tok), err)
		}
		if key <= prev {
			return fmt.Errorf("feature %s: %w (%d after %d)", quote(tok), errNotAscending, key, prev)
		}
		prev = key
		keys[n], vals[n] = key, val
		n++
	}

	row := Row{Label: label}
	if n > 0 {
		row.Keys, row.Values = keys[:n:n], vals[:n:n]
		// Keys ascend, so the last one is the row's largest.
		if prev > p.maxFeature {
			p.maxFeature, p.maxFeatureLine = prev, p.lineNo
		}
	}
	p.emitRow(row)
	return nil
}

// emitRow hands a parsed row on: kept as the current row by a Scanner,
// collected by Read.
func (p *parser) emitRow(row Row) {
	if p.stream {
		p.last, p.haveRow = row, true
		return
	}
	p.appendRow(row)
}

var colonSep = []byte{':'}

// nextToken skips separators and returns the next token and the remainder,
// or a nil token when the line is exhausted.
func nextToken(b []byte) (tok, rest []byte) {
	i := 0
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	if i == len(b) {
		return nil, nil
	}
	j := i
	for j < len(b) && !isSpace(b[j]) {
		j++
	}
	return b[i:j], b[j:]
}

// parseFeature parses "index:value".
func parseFeature(tok []byte) (uint64, float32, error) {
	colon := bytes.IndexByte(tok, ':')
	if colon < 0 {
		return 0, 0, errMissingColon
	}
	key, ok := parseIndex(tok[:colon])
	if !ok {
		return 0, 0, errBadIndex
	}
	if key == 0 {
		return 0, 0, errZeroIndex
	}
	val, err := parseValue(tok[colon+1:])
	return key, val, err
}

// parseIndex parses a decimal uint64. It is hand-written rather than
// strconv.ParseUint because it runs once per feature and a byte loop avoids
// converting the token to a string; it also refuses signs and spaces, which
// have no place in an index.
func parseIndex(b []byte) (uint64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	var v uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if v > (math.MaxUint64-d)/10 {
			return 0, false // overflows uint64
		}
		v = v*10 + d
	}
	return v, true
}

// parseValue parses a finite float32.
func parseValue(b []byte) (float32, error) {
	// Binary and one-hot data (a9a is all "1") is mostly single digits;
	// skip the general float parser for them.
	if len(b) == 1 && b[0] >= '0' && b[0] <= '9' {
		return float32(b[0] - '0'), nil
	}
	f, err := strconv.ParseFloat(string(b), 32)
	if err == nil && hasUnderscore(b) {
		err = strconv.ErrSyntax
	}
	if err != nil {
		var ne *strconv.NumError
		if errors.As(err, &ne) && ne.Err == strconv.ErrRange {
			return 0, errValueRange
		}
		return 0, errBadValue
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, errValueInfinite
	}
	return float32(f), nil
}

// hasUnderscore reports whether b contains '_'. strconv.ParseFloat accepts
// Go literal syntax such as "1_000", which no LIBSVM tool writes; a stray
// underscore is far more likely corruption than a digit separator.
func hasUnderscore(b []byte) bool {
	for _, c := range b {
		if c == '_' {
			return true
		}
	}
	return false
}

// quote renders a token for an error message, shortened so a huge malformed
// token cannot blow up the message.
func quote(tok []byte) string {
	const maxShown = 40
	if len(tok) > maxShown {
		return strconv.Quote(string(tok[:maxShown])) + "..."
	}
	return strconv.Quote(string(tok))
}

// alloc returns n-element key and value slices carved from the arena.
func (p *parser) alloc(n int) ([]uint64, []float32) {
	if p.stream {
		if n > len(p.scratchKeys) {
			p.scratchKeys, p.scratchVals = make([]uint64, n), make([]float32, n)
		}
		return p.scratchKeys[:n:n], p.scratchVals[:n:n]
	}
	if n > len(p.arenaKeys) {
		if n > p.arenaNext/2 {
			// A row this long gets its own arrays, and the current
			// chunk keeps its tail for the rows that follow.
			return make([]uint64, n), make([]float32, n)
		}
		p.arenaKeys = make([]uint64, p.arenaNext)
		p.arenaVals = make([]float32, p.arenaNext)
		p.arenaNext = min(2*p.arenaNext, maxArenaChunk)
	}
	k, v := p.arenaKeys[:n:n], p.arenaVals[:n:n]
	p.arenaKeys, p.arenaVals = p.arenaKeys[n:], p.arenaVals[n:]
	return k, v
}

func (p *parser) appendRow(r Row) {
	if len(p.cur) == cap(p.cur) {
		if p.cur != nil {
			p.chunks = append(p.chunks, p.cur)
		}
		p.cur = make([]Row, 0, p.rowsNext)
		p.rowsNext = min(2*p.rowsNext, maxRowsChunk)
	}
	p.cur = append(p.cur, r)
	p.nrows++
}

// rows returns all rows in one exactly sized slice.
func (p *parser) rows() []Row {
	if p.nrows == 0 {
		return nil
	}
	if len(p.chunks) == 0 && len(p.cur) == cap(p.cur) {
		return p.cur
	}
	out := make([]Row, 0, p.nrows)
	for _, c := range p.chunks {
		out = append(out, c...)
	}
	return append(out, p.cur...)
}
