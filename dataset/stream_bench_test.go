//go:build unix

package dataset

import (
	"bufio"
	"flag"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"
)

var (
	streamBytes = flag.Int64("stream.bytes", 64<<20, "size of the click-like LIBSVM file BenchmarkStream generates and reads, in bytes")
	streamFile  = flag.String("stream.file", "", "where BenchmarkStream keeps its generated file (default: a temporary file); an existing file of at least -stream.bytes is reused, so a multi-GB file is made once")
)

// writeClickFile writes at least size bytes of click-like LIBSVM rows, the
// shape of a display-advertising log after hashing: a 0/1 label (about one
// row in four a click), 13 count features with their own ids 1..13 and
// log-scaled values, and 26 categorical features of value 1 whose ids are
// random 64-bit integers drawn from a skewed vocabulary of a million per
// column. The label follows a logistic model over the categorical values,
// so the file can be learnt. Seeded: the same size gives the same file.
func writeClickFile(tb testing.TB, path string, size int64) {
	tb.Helper()
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	w := bufio.NewWriterSize(f, 1<<20)
	rng := rand.New(rand.NewPCG(1, 2))
	const vocabulary = 1 << 20
	ids := make([]uint64, 0, 39)
	var line []byte
	var written int64
	for written < size {
		ids = ids[:0]
		margin := -1.2
		for c := range 26 {
			// Squaring a uniform skews the draws toward small values:
			// a few values of each column are frequent, most rare.
			u := rng.Float64()
			v := uint64(u*u*vocabulary) + uint64(c)*vocabulary
			id := Mix64(v + 0x9e3779b97f4a7c15)
			ids = append(ids, id)
			margin += float64(int64(id%2001)-1000) / 1000 * 0.3
		}
		slices.Sort(ids)
		label := "0"
		if rng.Float64() < 1/(1+math.Exp(-margin)) {
			label = "1"
		}
		line = append(line[:0], label...)
		for i := 1; i <= 13; i++ {
			count := math.Floor(rng.ExpFloat64() * float64(i) * 3)
			line = append(line, ' ')
			line = strconv.AppendInt(line, int64(i), 10)
			line = append(line, ':')
			line = strconv.AppendFloat(line, math.Log1p(count), 'g', 4, 64)
		}
		for _, id := range ids {
			if id <= 13 {
				continue
			}
			line = append(line, ' ')
			line = strconv.AppendUint(line, id, 10)
			line = append(line, ":1"...)
		}
		line = append(line, '\n')
		n, err := w.Write(line)
		if err != nil {
			tb.Fatal(err)
		}
		written += int64(n)
	}
	if err := w.Flush(); err != nil {
		tb.Fatal(err)
	}
}

// cpuSeconds is the CPU time this process has used, user and system.
func cpuSeconds(tb testing.TB) float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// BenchmarkStream reads a generated click-like file as a stream, one epoch
// per operation, hashing its ids into 2^20 keys through a buffer of 100,000
// rows in batches of 1,000, and reports rows and megabytes per second, and
// rows per second of CPU time:
//
//	go test ./dataset -run '^$' -bench Stream -benchtime 1x -stream.bytes 3000000000 -stream.file click-3g.libsvm
func BenchmarkStream(b *testing.B) {
	path := *streamFile
	if path == "" {
		path = filepath.Join(b.TempDir(), "click.libsvm")
	}
	if st, err := os.Stat(path); err != nil || st.Size() < *streamBytes {
		start := time.Now()
		writeClickFile(b, path, *streamBytes)
		b.Logf("wrote %s (%d bytes) in %.1f s", path, *streamBytes, time.Since(start).Seconds())
	}
	st, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	s, err := OpenStream(StreamConfig{Path: path, Options: Options{Format: LIBSVM, HashBits: 20}, Parts: 1, Buffer: 100_000, Batch: 1000, Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	b.ResetTimer()
	start, cpu0 := time.Now(), cpuSeconds(b)
	for range b.N {
		for epoch := s.Epoch(); s.Epoch() == epoch; {
			if _, err := s.Next(); err != nil {
				b.Fatal(err)
			}
		}
	}
	secs, cpu := time.Since(start).Seconds(), cpuSeconds(b)-cpu0
	b.ReportMetric(float64(s.Rows())/secs, "rows/s")
	// On a shared machine the wall time depends on the others' load;
	// rows per CPU second do not.
	b.ReportMetric(float64(s.Rows())/cpu, "rows/cpu-s")
	b.ReportMetric(float64(b.N)*float64(st.Size())/1e6/secs, "MB/s")
}
