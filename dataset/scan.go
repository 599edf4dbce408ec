package dataset

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
)

// Scanner reads LIBSVM rows one at a time, in constant memory beyond the
// longest line, for data larger than memory. It accepts what Read accepts
// and reports errors the same way ("name:line: cause").
type Scanner struct {
	name  string
	p     parser
	line  int
	done  bool
	err   error
	close func() error
}

// NewScanner reads rows from r, plain or gzip-compressed (detected by its
// magic bytes); name labels its errors.
func NewScanner(r io.Reader, name string) (*Scanner, error) {
	if name == "" {
		name = "input"
	}
	br := bufio.NewReaderSize(r, ioBufSize)
	s := &Scanner{name: name, close: func() error { return nil }}
	src := br
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == gzipMagic[0] && magic[1] == gzipMagic[1] {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("%s: reading gzip header: %w", name, err)
		}
		s.close = zr.Close
		src = bufio.NewReaderSize(zr, ioBufSize)
	}
	s.p = parser{src: src, maxLine: MaxLineLen, stream: true}
	return s, nil
}

// OpenScanner opens a data file for streaming, or a split of a built-in
// set named "<name>.train" or "<name>.test" (a9a.test, rcv1.test). A file
// of that name that exists wins; write "./rcv1.test" to be sure. Close
// releases the file.
func OpenScanner(spec string) (*Scanner, error) {
	f, err := os.Open(spec)
	if errors.Is(err, fs.ErrNotExist) {
		if name, split, ok := strings.Cut(spec, "."); ok {
			if b, found := lookupBuiltin(name); found && (split == "train" || split == "test") {
				path := b.train
				if split == "test" {
					path = b.test
				}
				ef, eerr := builtinFS.Open(path)
				if eerr != nil {
					return nil, fmt.Errorf("dataset: built-in %s: %w", spec, eerr)
				}
				sc, err := NewScanner(ef, spec)
				return owning(sc, err, ef.Close)
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("dataset: %w", err)
	}
	sc, err := NewScanner(f, spec)
	return owning(sc, err, f.Close)
}

// owning makes a new Scanner's Close close the file under it too, and
// closes the file at once when the Scanner could not be made.
func owning(s *Scanner, err error, closeFile func() error) (*Scanner, error) {
	if err != nil {
		closeFile()
		return nil, err
	}
	inner := s.close
	s.close = func() error {
		err := inner()
		if ferr := closeFile(); err == nil {
			err = ferr
		}
		return err
	}
	return s, nil
}

// Scan advances to the next row, skipping blank and comment lines. It
// returns false at the end of the input or at the first error (see Err).
func (s *Scanner) Scan() bool {
	for !s.done {
		s.line++
		s.p.lineNo = s.line
		line, readErr := s.p.readLine()
		if readErr != nil && readErr != io.EOF {
			if errors.Is(readErr, errLineTooLong) {
				s.err = fmt.Errorf("%s:%d: %w", s.name, s.line, readErr)
			} else {
				s.err = fmt.Errorf("%s:%d: reading: %w", s.name, s.line, readErr)
			}
			s.done = true
			return false
		}
		s.p.haveRow = false
		if err := s.p.parseLine(line); err != nil {
			s.err = fmt.Errorf("%s:%d: %w", s.name, s.line, err)
			s.done = true
			return false
		}
		if readErr == io.EOF {
			s.done = true
		}
		if s.p.haveRow {
			return true
		}
	}
	return false
}

// skipRow advances past the next row without parsing it: only blank and
// comment lines are told apart from rows. It returns false at the end of
// the input or at a read error (see Err).
func (s *Scanner) skipRow() bool {
	for !s.done {
		s.line++
		line, readErr := s.p.readLine()
		if readErr != nil && readErr != io.EOF {
			if errors.Is(readErr, errLineTooLong) {
				s.err = fmt.Errorf("%s:%d: %w", s.name, s.line, readErr)
			} else {
				s.err = fmt.Errorf("%s:%d: reading: %w", s.name, s.line, readErr)
			}
			s.done = true
			return false
		}
		if readErr == io.EOF {
			s.done = true
		}
		if s.p.opts.Format == "" || s.p.opts.Format == LIBSVM {
			if i := bytes.IndexByte(line, '#'); i >= 0 {
				line = line[:i]
			}
		}
		if len(bytes.TrimSpace(line)) > 0 {
			return true
		}
	}
	return false
}

// Row is the current row; its slices are valid until the next Scan.
func (s *Scanner) Row() Row { return s.p.last }

// Line is the line of the current row.
func (s *Scanner) Line() int { return s.line }

// Name is the name the Scanner's errors carry.
func (s *Scanner) Name() string { return s.name }

// Err is the error that ended the scan, nil at a clean end of input.
func (s *Scanner) Err() error { return s.err }

// HashedAsRead reports whether the rows' keys were hashed by the reader
// (a format of string features).
func (s *Scanner) HashedAsRead() bool { return s.p.opts.Format.HashesFeatures() }

// Close releases what the Scanner holds.
func (s *Scanner) Close() error { return s.close() }
