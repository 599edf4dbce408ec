package codec

import (
	"math"
	"math/rand/v2"
	"testing"
)

func kraft(lens []uint8) float64 {
	s := 0.0
	for _, l := range lens {
		if l > 0 {
			s += math.Ldexp(1, -int(l))
		}
	}
	return s
}

func TestHuffLengths(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	fib := make([]uint32, 40) // Fibonacci counts force depths far past 12
	fib[0], fib[1] = 1, 1
	for i := 2; i < len(fib); i++ {
		fib[i] = fib[i-1] + fib[i-2]
	}
	cases := [][]uint32{fib, {5}, {0, 0, 9, 0}, {1, 1}, make([]uint32, huffMaxSymbols)}
	for i := range cases[len(cases)-1] {
		cases[len(cases)-1][i] = 1 // 4096 equal symbols: all exactly 12 bits
	}
	for range 50 {
		f := make([]uint32, 1+r.IntN(300))
		for i := range f {
			if r.IntN(3) > 0 {
				f[i] = uint32(r.ExpFloat64() * math.Pow(10, float64(r.IntN(5))))
			}
		}
		cases = append(cases, f)
	}
	for _, freq := range cases {
		lens := huffLengths(freq)
		used, total := 0, 0
		for s, f := range freq {
			if (f > 0) != (lens[s] > 0) {
				t.Fatalf("symbol %d with count %d got length %d", s, f, lens[s])
			}
			if lens[s] > huffMaxBits {
				t.Fatalf("length %d exceeds %d", lens[s], huffMaxBits)
			}
			if f > 0 {
				used++
				total += int(f)
			}
		}
		if used >= 2 && kraft(lens) != 1 {
			t.Fatalf("Kraft sum %v, want exactly 1 for a complete code", kraft(lens))
		}
		if used >= 2 {
			// Within one bit a symbol of the entropy (Huffman's bound); the
			// length limit costs a little on the Fibonacci case only.
			h := 0.0
			for _, f := range freq {
				if f > 0 {
					p := float64(f) / float64(total)
					h -= p * math.Log2(p)
				}
			}
			if avg := float64(huffBits(freq, lens)) / float64(total); avg > h+1.01 {
				t.Fatalf("average %.3f bits a symbol, entropy %.3f", avg, h)
			}
		}
		// The table round-trips and decodes every code.
		table := appendHuffTable(nil, lens)
		if len(table) != huffTableLen(lens) {
			t.Fatalf("table %d bytes, huffTableLen says %d", len(table), huffTableLen(lens))
		}
		if used == 0 {
			continue
		}
		dec, rest, err := parseHuffTable(table, len(freq), "test")
		if err != nil || len(rest) != 0 {
			t.Fatalf("parseHuffTable: %v", err)
		}
		enc := newHuffEncoder(lens)
		bw := bitWriter{}
		var syms []int
		for s, f := range freq {
			if f > 0 {
				syms = append(syms, s, s)
			}
		}
		for _, s := range syms {
			enc.put(&bw, s)
		}
		br := newBitReader(bw.flush())
		for _, s := range syms {
			if got, ok := dec.next(&br); !ok || got != s {
				t.Fatalf("decoded %d (ok %v), want %d", got, ok, s)
			}
		}
		if err := br.finish(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestParseHuffTableRejects(t *testing.T) {
	for _, tc := range []struct {
		table []byte
		frag  string
	}{
		{[]byte{}, "bad alphabet size"},
		{[]byte{0}, "alphabet size 0"},
		{[]byte{3, 0x11}, "needs 2 bytes"},
		{[]byte{2, 0xDD}, "exceeds 12"},
		{[]byte{3, 0x11, 0x01}, "over-subscribed"},
		{[]byte{2, 0x00}, "no symbols"},
		{[]byte{1, 0x11}, "padding nibble"},
	} {
		if _, _, err := parseHuffTable(tc.table, 16, "test"); err == nil || !containsAll(err.Error(), tc.frag) {
			t.Errorf("table %x: error %v, want %q", tc.table, err, tc.frag)
		}
	}
}

func TestBitIO(t *testing.T) {
	r := rand.New(rand.NewPCG(33, 34))
	type item struct {
		v  uint64
		nb uint
	}
	var items []item
	w := bitWriter{}
	for range 5000 {
		nb := uint(r.IntN(65))
		v := r.Uint64() & (1<<nb - 1)
		if nb == 64 {
			v = r.Uint64()
		}
		items = append(items, item{v, nb})
		w.writeLong(v, nb)
	}
	br := newBitReader(w.flush())
	for _, it := range items {
		got := br.read(min(it.nb, 32))
		if it.nb > 32 {
			got |= br.read(it.nb-32) << 32
		}
		if got != it.v {
			t.Fatalf("read %#x, want %#x (%d bits)", got, it.v, it.nb)
		}
	}
	if err := br.finish(); err != nil {
		t.Fatal(err)
	}
	// Reading past the end yields zeros and an overrun error.
	br = newBitReader([]byte{0xff})
	if br.read(16) != 0xff {
		t.Fatal("short stream did not read as zero-extended")
	}
	if err := br.finish(); err == nil {
		t.Fatal("overrun not reported")
	}
}

// Every entry of a parsed table is the symbol whose code starts the 12
// bits that index it, or 0 where no code does, whatever table the decoder
// held before: decoders are recycled, and only the first 2^longest
// entries are filled by code before they are repeated.
func TestHuffTableEntriesAfterReuse(t *testing.T) {
	tables := [][]uint8{
		huffLengths([]uint32{1, 1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 233, 377, 610}), // long codes
		{1, 2},          // '11' starts no code
		{2, 0, 3, 3, 1}, // complete, symbol 1 unused
		{3},             // one symbol: 7 of 8 patterns start no code
	}
	for round := range 3 {
		for i, lens := range tables {
			d, rest, err := parseHuffTable(appendHuffTable(nil, lens), huffMaxSymbols, "test")
			if err != nil || len(rest) != 0 {
				t.Fatalf("table %d: %v (%d bytes left)", i, err, len(rest))
			}
			codes := make([]uint16, len(lens))
			huffCanonical(lens, codes)
			for k := range huffTableSize {
				want := uint16(0)
				for s, l := range lens {
					if l > 0 && uint16(k)&(1<<l-1) == codes[s] {
						want = uint16(s)<<4 | uint16(l)
					}
				}
				if d.table[k] != want {
					t.Fatalf("round %d, table %d: entry %#x is %#x, want %#x", round, i, k, d.table[k], want)
				}
			}
			releaseHuff(d)
		}
	}
}
