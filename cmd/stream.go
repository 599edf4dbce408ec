package cmd

import (
	"errors"
	"flag"
	"fmt"

	"github.com/sketchmesh/sketchmesh/dataset"
	"github.com/sketchmesh/sketchmesh/model"
)

// defaultStreamBatch is the mini-batch of a streamed node when --batch is
// left at its default, a fraction of rows a stream does not count.
const defaultStreamBatch = 1000

// streamFlags are the flags of --stream, shared by testnet and run.
type streamFlags struct {
	on      bool
	buffer  int
	holdout int
}

func (f *streamFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&f.on, "stream", false, fmt.Sprintf("read --data as a stream of mini-batches through a bounded shuffle buffer, epoch after epoch, instead of loading it (data larger than memory); needs --hash-bits (run: or --dim), a file, and a model other than softmax; --batch is a row count (default %d rows)", defaultStreamBatch))
	fs.IntVar(&f.buffer, "shuffle-buffer", 100_000, "with --stream: rows in each node's shuffle buffer, which bounds its memory (about twice the rows' size in the file)")
	fs.IntVar(&f.holdout, "holdout-rows", 10_000, "with --stream and no --test-data: the file's first rows, held out as test data and left out of training")
}

// streamed is what --stream prepares: the training data's stand-in (its
// name and dimension, no rows), the test rows, and a stream per part.
type streamed struct {
	train, test *dataset.Dataset
	path        string
	opts        dataset.Options
	skip        int
	buffer      int
}

// prepare checks the flags of a streamed run and reads its test rows. dim
// is the model's dimension when ids are not hashed (run --dim).
func (f *streamFlags) prepare(fs *flag.FlagSet, data, testData, format, kind string, hashBits uint, dim uint64, batch *float64) (*streamed, error) {
	switch {
	case f.buffer < 1:
		return nil, badInput("--shuffle-buffer %d: want >= 1 rows", f.buffer)
	case f.holdout < 1 && testData == "":
		return nil, badInput("--holdout-rows %d: want >= 1 rows, or give --test-data", f.holdout)
	case kind == string(model.Softmax):
		return nil, badInput("--stream: softmax needs its classes before training, and a stream has not been read yet; give a file that fits in memory (without --stream)")
	case hashBits == 0 && dim == 0:
		return nil, badInput("--stream needs --hash-bits B (or, for run, --dim): the largest feature id of a stream is not known before it is read to its end")
	}
	if *batch < 1 {
		if flagGiven(fs, "batch") {
			return nil, badInput("--batch %v: a fraction of the rows, which a stream does not count; give a row count (e.g. --batch %d)", *batch, defaultStreamBatch)
		}
		*batch = defaultStreamBatch
	}
	if dataset.IsBuiltin(data) {
		return nil, badInput("--stream reads a file; %s is a built-in set, which is loaded whole without --stream", data)
	}
	fmtData, err := dataFormat(format, data, hashBits)
	if err != nil {
		return nil, err
	}
	s := &streamed{path: data, opts: dataset.Options{Format: fmtData, HashBits: hashBits}, buffer: f.buffer}
	if testData != "" {
		fmtTest, err := dataFormat(format, testData, hashBits)
		if err != nil {
			return nil, err
		}
		if s.test, err = dataset.ReadHead(testData, dataset.Options{Format: fmtTest, HashBits: hashBits}, int(^uint(0)>>1)); err != nil {
			return nil, usageError{fmt.Errorf("--test-data: %w", err)}
		}
	} else {
		if s.test, err = dataset.ReadHead(data, s.opts, f.holdout); err != nil {
			return nil, usageError{fmt.Errorf("--data: %w", err)}
		}
		s.skip = len(s.test.Rows)
		s.test.Name = fmt.Sprintf("%s (first %d rows held out)", data, s.skip)
	}
	maxFeature := dim
	if hashBits > 0 {
		maxFeature = 1 << hashBits
	}
	s.test.MaxFeature = maxFeature
	s.train = &dataset.Dataset{Name: data + " (streamed)", MaxFeature: maxFeature}
	return s, nil
}

// open opens part of parts of the stream, batch rows a batch.
func (s *streamed) open(part, parts, batch int, seed uint64) (*streamSource, error) {
	st, err := dataset.OpenStream(dataset.StreamConfig{
		Path: s.path, Options: s.opts, Skip: s.skip, Part: part, Parts: parts, Buffer: s.buffer, Batch: batch, Seed: seed,
	})
	if err != nil {
		return nil, usageError{fmt.Errorf("--data: %w", err)}
	}
	return &streamSource{st}, nil
}

// streamSource is a stream whose errors are bad input: a malformed row
// found while training names its file and line and exits with status 2.
type streamSource struct{ *dataset.Stream }

func (s *streamSource) Next() ([]dataset.Row, error) {
	rows, err := s.Stream.Next()
	if err != nil {
		return nil, usageError{err}
	}
	return rows, nil
}

// dataError is the bad input inside err, if any: a stream's malformed row
// reaches the command wrapped by the node and the driver, and is reported
// as its one line.
func dataError(err error) error {
	var ue usageError
	if errors.As(err, &ue) {
		return ue
	}
	return err
}

// flagGiven reports whether the flag called name was set on the command
// line.
func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(fl *flag.Flag) { given = given || fl.Name == name })
	return given
}
