package dataset

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strconv"
)

// StreamConfig describes a Stream.
type StreamConfig struct {
	// Path is the data file, plain or gzip, in Options.Format (LIBSVM when
	// empty). With Options.HashBits above 0, LIBSVM ids are hashed as they
	// are read (Criteo and VW rows always are).
	Path    string
	Options Options
	// Skip leaves out the file's first Skip rows (held out for
	// evaluation, see ReadHead). Of the rows after them, the stream takes
	// those whose index i has i mod Parts == Part: P readers of one file
	// with Parts P share its rows, each row once.
	Skip        int
	Part, Parts int
	// Buffer is the number of rows in the shuffle buffer, Batch the rows
	// of a mini-batch; Seed and Part seed the shuffle.
	Buffer, Batch int
	Seed          uint64
}

// Stream reads mini-batches from a file larger than memory, epoch after
// epoch: rows enter a shuffle buffer of bounded size in file order, and
// each row of a batch is drawn uniformly from the buffer, its place taken
// by the next row of the file. At the end of the file the buffer drains
// and the file is read again. Memory is the buffer and one batch, each a
// fixed number of rows whose feature arrays are reused.
//
// Rows are only as shuffled as the buffer allows: a file sorted by label
// needs a buffer that spans the sorted runs, or a shuffle beforehand.
//
// A row that does not parse ends the stream with an error naming the file
// and line; rows of the other parts are only told apart from blank and
// comment lines, so each reader checks the syntax of its own rows.
type Stream struct {
	cfg     StreamConfig
	sc      *Scanner
	hasher  Hasher
	rng     *rand.Rand
	buf     []Row // the shuffle buffer; capacity Buffer
	batch   []Row
	index   int // rows seen after the skipped ones, in this epoch
	eof     bool
	epoch   int
	rowsOut uint64
}

// OpenStream validates cfg, opens the file and fills the buffer, so an
// empty part or a malformed first row is found before training starts.
func OpenStream(cfg StreamConfig) (*Stream, error) {
	switch {
	case cfg.Parts < 1 || cfg.Part < 0 || cfg.Part >= cfg.Parts:
		return nil, fmt.Errorf("stream %s: part %d of %d: need 0 <= part < parts", cfg.Path, cfg.Part, cfg.Parts)
	case cfg.Buffer < 1 || cfg.Batch < 1 || cfg.Skip < 0:
		return nil, fmt.Errorf("stream %s: buffer %d, batch %d and skip %d rows: need buffer and batch >= 1, skip >= 0", cfg.Path, cfg.Buffer, cfg.Batch, cfg.Skip)
	}
	if cfg.Options.Format == "" {
		cfg.Options.Format = LIBSVM
	}
	if err := cfg.Options.check(); err != nil {
		return nil, fmt.Errorf("stream %s: %w", cfg.Path, err)
	}
	h := fnv.New64a()
	h.Write([]byte(strconv.Itoa(cfg.Part)))
	s := &Stream{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, h.Sum64())), buf: make([]Row, 0, cfg.Buffer), batch: make([]Row, cfg.Batch)}
	if cfg.Options.Format == LIBSVM {
		s.hasher.Bits = cfg.Options.HashBits
	}
	if err := s.restart(); err != nil {
		return nil, err
	}
	if len(s.buf) == 0 {
		s.Close()
		return nil, fmt.Errorf("stream %s: no rows for part %d of %d after the %d held out", cfg.Path, cfg.Part+1, cfg.Parts, cfg.Skip)
	}
	return s, nil
}

// restart opens the file at its first row, skips the held-out rows and
// fills the buffer.
func (s *Stream) restart() error {
	if s.sc != nil {
		if err := s.sc.Close(); err != nil {
			return fmt.Errorf("stream %s: %w", s.cfg.Path, err)
		}
	}
	sc, err := OpenScannerWith(s.cfg.Path, s.cfg.Options)
	if err != nil {
		return err
	}
	s.sc, s.index, s.eof = sc, 0, false
	for range s.cfg.Skip {
		if !s.sc.skipRow() {
			if err := s.sc.Err(); err != nil {
				return err
			}
			break
		}
	}
	for n := len(s.buf); n < cap(s.buf); n++ {
		// Slots past the length keep the arrays of rows drained last
		// epoch: refilling reuses them.
		s.buf = s.buf[:n+1]
		ok, err := s.read(&s.buf[n])
		if err != nil {
			return err
		}
		if !ok {
			s.buf = s.buf[:n]
			break
		}
	}
	return nil
}

// read reads this part's next row into r, reusing r's arrays; false at the
// end of the file.
func (s *Stream) read(r *Row) (bool, error) {
	for !s.eof {
		mine := s.index%s.cfg.Parts == s.cfg.Part
		s.index++
		if !mine {
			if !s.sc.skipRow() {
				s.eof = true
				if err := s.sc.Err(); err != nil {
					return false, err
				}
			}
			continue
		}
		if !s.sc.Scan() {
			s.eof = true
			if err := s.sc.Err(); err != nil {
				return false, err
			}
			break
		}
		row := s.hasher.Row(s.sc.Row())
		r.Label = row.Label
		r.Keys = append(r.Keys[:0], row.Keys...)
		r.Values = append(r.Values[:0], row.Values...)
		return true, nil
	}
	return false, nil
}

// Next returns the next mini-batch; its rows are valid until the next call.
func (s *Stream) Next() ([]Row, error) {
	for i := range s.batch {
		if len(s.buf) == 0 {
			s.epoch++
			if err := s.restart(); err != nil {
				return nil, err
			}
			if len(s.buf) == 0 {
				return nil, fmt.Errorf("stream %s: no rows on epoch %d", s.cfg.Path, s.epoch+1)
			}
		}
		j := s.rng.IntN(len(s.buf))
		// The batch row takes the drawn row's arrays and gives it its
		// own to read the next row into: nothing is copied twice.
		s.batch[i], s.buf[j] = s.buf[j], s.batch[i]
		ok, err := s.read(&s.buf[j])
		if err != nil {
			return nil, err
		}
		if !ok {
			// The file has ended: the buffer drains, and the slot
			// leaves it with its arrays for the next epoch.
			last := len(s.buf) - 1
			s.buf[j], s.buf[last] = s.buf[last], s.buf[j]
			s.buf = s.buf[:last]
		}
		s.rowsOut++
	}
	return s.batch, nil
}

// Epoch is the number of times the file has been read to its end.
func (s *Stream) Epoch() int { return s.epoch }

// Rows is the number of rows the batches have held so far.
func (s *Stream) Rows() uint64 { return s.rowsOut }

// Close releases the file.
func (s *Stream) Close() error {
	if s.sc == nil {
		return nil
	}
	err := s.sc.Close()
	s.sc = nil
	return err
}

// ReadHead reads the first n rows of a file as a Dataset (the held-out rows
// of a Stream with Skip n), hashing LIBSVM ids when o.HashBits is above 0.
func ReadHead(path string, o Options, n int) (*Dataset, error) {
	if o.Format == "" {
		o.Format = LIBSVM
	}
	if err := o.check(); err != nil {
		return nil, err
	}
	sc, err := OpenScannerWith(path, o)
	if err != nil {
		return nil, err
	}
	defer sc.Close()
	var h Hasher
	if !o.Format.HashesFeatures() {
		h.Bits = o.HashBits
	}
	d := &Dataset{Name: path}
	for len(d.Rows) < n && sc.Scan() {
		r := h.Row(sc.Row())
		row := Row{Label: r.Label, Keys: append([]uint64(nil), r.Keys...), Values: append([]float32(nil), r.Values...)}
		if k := len(row.Keys); k > 0 && row.Keys[k-1] > d.MaxFeature {
			d.MaxFeature = row.Keys[k-1]
		}
		d.Rows = append(d.Rows, row)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(d.Rows) == 0 {
		return nil, errors.New(path + ": no rows")
	}
	return d, nil
}
