package dataset

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// indexedFile writes n LIBSVM rows whose label is the row's index, with a
// comment and a blank line among them, and returns its path.
func indexedFile(t testing.TB, n int) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("# rows labelled by index\n")
	for i := range n {
		fmt.Fprintf(&b, "%d %d:1 %d:0.5\n", i, 1+i%7, 8+i%5)
		if i == n/2 {
			b.WriteString("\n")
		}
	}
	path := filepath.Join(t.TempDir(), "indexed.libsvm")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func openStream(t *testing.T, cfg StreamConfig) *Stream {
	t.Helper()
	s, err := OpenStream(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// draw returns the labels of the next n rows, one batch of one at a time.
func draw(t *testing.T, s *Stream, n int) []int {
	t.Helper()
	out := make([]int, n)
	for i := range out {
		b, err := s.Next()
		if err != nil {
			t.Fatal(err)
		}
		out[i] = int(b[0].Label)
	}
	return out
}

// P streams of one file share the rows after the held-out ones, each row
// once per epoch; every epoch reads the part again, shuffled anew; no row
// is drawn from further ahead than the buffer reaches.
func TestStreamPartsEpochsAndBuffer(t *testing.T) {
	const rows, skip, parts, buffer = 103, 10, 3, 8
	path := indexedFile(t, rows)
	seen := map[int]int{}
	for part := range parts {
		s := openStream(t, StreamConfig{Path: path, Skip: skip, Part: part, Parts: parts, Buffer: buffer, Batch: 1, Seed: 5})
		var mine []int
		for i := skip; i < rows; i++ {
			if (i-skip)%parts == part {
				mine = append(mine, i)
			}
		}
		first := draw(t, s, len(mine))
		for pos, label := range first {
			seen[label]++
			if at := slices.Index(mine, label); at < 0 || at > pos+buffer-1 {
				t.Fatalf("part %d drew row %d at %d: not its row, or beyond the buffer of %d", part, label, pos, buffer)
			}
		}
		if slices.Equal(first, mine) {
			t.Errorf("part %d: rows in file order, not shuffled", part)
		}
		if got := slices.Sorted(slices.Values(first)); !slices.Equal(got, mine) {
			t.Errorf("part %d epoch 1: %v, want each of %v once", part, got, mine)
		}
		second := draw(t, s, len(mine))
		if got := slices.Sorted(slices.Values(second)); !slices.Equal(got, mine) || slices.Equal(first, second) {
			t.Errorf("part %d epoch 2: %v after %v", part, second, first)
		}
		if s.Epoch() != 1 || s.Rows() != uint64(2*len(mine)) {
			t.Errorf("part %d: epoch %d, %d rows", part, s.Epoch(), s.Rows())
		}
	}
	for i := range rows {
		if want := map[bool]int{true: 0, false: 1}[i < skip]; seen[i] != want {
			t.Errorf("row %d drawn %d times in the first epochs, want %d", i, seen[i], want)
		}
	}
	// The seed alone fixes the batches.
	a := draw(t, openStream(t, StreamConfig{Path: path, Parts: 1, Buffer: 16, Batch: 1, Seed: 9}), 50)
	b := draw(t, openStream(t, StreamConfig{Path: path, Parts: 1, Buffer: 16, Batch: 1, Seed: 9}), 50)
	if !slices.Equal(a, b) {
		t.Errorf("same seed, different batches: %v and %v", a, b)
	}
}

// The held-out head and the hashed rows match what Read and Hashed give.
func TestStreamHashesAndHead(t *testing.T) {
	path := indexedFile(t, 20)
	whole, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	hashed := whole.Hashed(6)
	head, err := ReadHead(path, Options{HashBits: 6}, 5)
	if err != nil {
		t.Fatal(err)
	}
	if !sameRows(head.Rows, hashed.Rows[:5]) {
		t.Errorf("head %v, want %v", head.Rows, hashed.Rows[:5])
	}
	s := openStream(t, StreamConfig{Path: path, Options: Options{HashBits: 6}, Skip: 5, Parts: 1, Buffer: 1, Batch: 3})
	var got []Row
	for range 5 {
		b, err := s.Next()
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range b {
			got = append(got, Row{Label: r.Label, Keys: slices.Clone(r.Keys), Values: slices.Clone(r.Values)})
		}
	}
	if !sameRows(got, hashed.Rows[5:]) {
		t.Errorf("streamed %v, want %v", got, hashed.Rows[5:])
	}
}

// In steady state a batch costs no allocation: rows move between the
// buffer and the batch with their arrays.
func TestStreamReusesItsRows(t *testing.T) {
	s := openStream(t, StreamConfig{Path: indexedFile(t, 5000), Parts: 1, Buffer: 100, Batch: 10})
	if _, err := s.Next(); err != nil {
		t.Fatal(err)
	}
	if allocs := testing.AllocsPerRun(100, func() { s.Next() }); allocs != 0 {
		t.Errorf("%v allocations per batch", allocs)
	}
}

func TestStreamBadInput(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.libsvm")
	os.WriteFile(bad, []byte("1 1:1\n0 2:1\n1 3:x\n0 4:1\n"), 0o644)
	// Part 0 of 2 holds rows 0 and 2: row 2 (line 3) is malformed.
	s, err := OpenStream(StreamConfig{Path: bad, Parts: 2, Buffer: 4, Batch: 1})
	if err == nil {
		s.Close()
		t.Fatal("a malformed row of the part was not found when the buffer filled")
	}
	if !strings.Contains(err.Error(), bad+":3: ") {
		t.Errorf("error %q does not name the file and line", err)
	}
	// Part 1 holds rows 1 and 3, which parse.
	openStream(t, StreamConfig{Path: bad, Part: 1, Parts: 2, Buffer: 4, Batch: 1})
	for _, cfg := range []StreamConfig{
		{Path: bad, Part: 2, Parts: 2, Buffer: 1, Batch: 1},
		{Path: bad, Parts: 1, Buffer: 0, Batch: 1},
		{Path: bad, Parts: 1, Buffer: 1, Batch: 1, Skip: 4},
		{Path: filepath.Join(dir, "missing"), Parts: 1, Buffer: 1, Batch: 1},
		{Path: bad, Parts: 1, Buffer: 1, Batch: 1, Options: Options{Format: Criteo}},
	} {
		if s, err := OpenStream(cfg); err == nil {
			s.Close()
			t.Errorf("%+v: no error", cfg)
		}
	}
}

// Whatever Read accepts, streams of buffer 1 (file order) give Read's rows,
// part by part.
func FuzzStream(f *testing.F) {
	f.Add([]byte("1 1:1\n# c\n\n0 2:1 3:2\n1\n0 5:1\n"), uint8(2), uint8(1))
	f.Add(gz(f, "1 1:1\n0 2:2\n1 3:3\n"), uint8(3), uint8(0))
	f.Fuzz(func(t *testing.T, data []byte, parts, skip uint8) {
		d, err := ReadWith(strings.NewReader(string(data)), "fuzz", Options{})
		if err != nil {
			return
		}
		p := 1 + int(parts%4)
		k := int(skip) % (len(d.Rows) + 1)
		path := filepath.Join(t.TempDir(), "data")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		for part := range p {
			var want []Row
			for i := k + part; i < len(d.Rows); i += p {
				want = append(want, d.Rows[i])
			}
			s, err := OpenStream(StreamConfig{Path: path, Skip: k, Part: part, Parts: p, Buffer: 1, Batch: 1})
			if len(want) == 0 {
				if err == nil {
					t.Fatalf("part %d of %d after %d: no rows, yet the stream opened", part, p, k)
				}
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			for i, w := range want {
				b, err := s.Next()
				if err != nil {
					t.Fatal(err)
				}
				if !sameRows(b, []Row{w}) {
					t.Fatalf("part %d row %d: %v, want %v", part, i, b, w)
				}
			}
			s.Close()
		}
	})
}
