package dataset

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// Auto asks the readers' callers to detect the format (see Detect); it is
// not a format a reader parses.
const Auto Format = "auto"

// Detection reads at most detectBytes of text and detectRows rows: enough
// to see a format's shape, little enough to cost nothing next to a read.
const (
	detectBytes = 256 << 10
	detectRows  = 100
)

// ErrAmbiguousFormat is the cause of a Detect error when the sample reads
// as more than one format.
var ErrAmbiguousFormat = errors.New("the format is ambiguous")

// ErrUnknownFormat is the cause of a Detect error when the sample reads as
// none of the formats.
var ErrUnknownFormat = errors.New("the data is in none of the formats libsvm, criteo, vw")

// Detect tells the format of data from its first lines (up to 100 rows or
// 256 KiB of text, after gzip decompression when the input starts with
// gzip's magic bytes): the format is the one in which every line of the
// sample parses. The shapes barely overlap: a Criteo line has 40
// tab-separated columns and integers in columns 2 to 14, a VW line a '|'
// before its features, and a LIBSVM line neither ('|' is no part of a
// LIBSVM token, and "id:value" is not an integer). A sample that parses in
// two formats (Criteo lines whose columns are all empty read as LIBSVM
// rows without features) gives ErrAmbiguousFormat. A sample that parses in
// none is in the format that read the most lines before its first error,
// whose reader will then name that line; when no format reads past the
// first line, Detect gives ErrUnknownFormat with the first error of each.
// Data with no rows in its sample is LIBSVM. name labels errors.
func Detect(r io.Reader, name string) (Format, error) {
	if name == "" {
		name = "input"
	}
	br := bufio.NewReaderSize(r, ioBufSize)
	var src io.Reader = br
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == gzipMagic[0] && magic[1] == gzipMagic[1] {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return "", fmt.Errorf("%s: reading gzip header: %w", name, err)
		}
		defer zr.Close()
		src = zr
	}
	sample, err := io.ReadAll(io.LimitReader(src, detectBytes))
	if err != nil {
		return "", fmt.Errorf("%s: reading: %w", name, err)
	}
	if len(sample) == detectBytes {
		// The last line may be cut: judge the whole lines only (a
		// single line longer than the sample up to its last blank).
		if i := bytes.LastIndexByte(sample, '\n'); i >= 0 {
			sample = sample[:i+1]
		} else if i := bytes.LastIndexAny(sample, " \t"); i >= 0 {
			sample = sample[:i]
		}
	}
	var fits []Format
	var failures []string
	var furthest Format // the format that parsed most lines before failing
	best, tie := 0, false
	for _, f := range []Format{LIBSVM, Criteo, VW} {
		rows, line, err := sampleRows(sample, f)
		switch {
		case err != nil:
			failures = append(failures, fmt.Sprintf("not %s (line %v)", f, err))
			if line > best {
				furthest, best, tie = f, line, false
			} else if line == best {
				tie = true
			}
		case rows == 0 && f == LIBSVM:
			return LIBSVM, nil
		case rows == 0:
			failures = append(failures, fmt.Sprintf("not %s (no rows)", f))
		default:
			fits = append(fits, f)
		}
	}
	if len(fits) == 0 && !tie && best > 1 {
		// Lines of one format and then a malformed one: that format's
		// reader names the line.
		return furthest, nil
	}
	switch len(fits) {
	case 1:
		return fits[0], nil
	case 0:
		return "", fmt.Errorf("%s: %w: %s", name, ErrUnknownFormat, strings.Join(failures, "; "))
	}
	names := make([]string, len(fits))
	for i, f := range fits {
		names[i] = string(f)
	}
	return "", fmt.Errorf("%s: %w: its first lines read as %s", name, ErrAmbiguousFormat, strings.Join(names, " and "))
}

// sampleRows parses up to detectRows rows of sample in format f and
// returns how many it found, or the line of its first error.
func sampleRows(sample []byte, f Format) (rows, errLine int, err error) {
	s, err := NewScannerWith(bytes.NewReader(sample), "", Options{Format: f, HashBits: 18})
	if err != nil {
		return 0, 0, err
	}
	for rows < detectRows && s.Scan() {
		rows++
	}
	if err := s.Err(); err != nil {
		// "input:3: cause" becomes "3: cause".
		return 0, s.Line(), errors.New(strings.TrimPrefix(err.Error(), "input:"))
	}
	return rows, 0, nil
}

// DetectFile is Detect on a file; a built-in split or set name is LIBSVM.
func DetectFile(path string) (Format, error) {
	f, err := os.Open(path)
	if err != nil {
		if name, _, _ := strings.Cut(path, "."); IsBuiltin(name) {
			return LIBSVM, nil
		}
		return "", fmt.Errorf("dataset: %w", err)
	}
	defer f.Close()
	return Detect(f, path)
}

// IsBuiltin reports whether name is a built-in set.
func IsBuiltin(name string) bool {
	_, ok := lookupBuiltin(name)
	return ok
}
