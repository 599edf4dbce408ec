package codec

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// randomKeySets returns sorted unique key sets of many shapes: empty,
// single keys at both ends of the range, consecutive runs, gaps of 2^32
// and more, keys spread over all of uint64, and mixtures.
func randomKeySets(r *rand.Rand) [][]uint64 {
	sets := [][]uint64{
		{},
		{0},
		{math.MaxUint64},
		{0, math.MaxUint64},
		{0, 1, 2, 3, 4, 5, 6, 7, 8},
		{math.MaxUint64 - 2, math.MaxUint64 - 1, math.MaxUint64},
		{1 << 32, 1<<33 + 7, 1 << 63, math.MaxUint64},
		{255, 256, 65535, 65536, 1<<24 - 1, 1 << 24, 1<<32 - 1, 1 << 32, 1<<40 + 1, 1 << 56, 1<<56 + 1<<48},
	}
	for range 40 {
		n := r.IntN(2000)
		set := map[uint64]bool{}
		switch r.IntN(4) {
		case 0: // anywhere in uint64
			for len(set) < n {
				set[r.Uint64()] = true
			}
		case 1: // dense runs with occasional jumps of 2^32 and more
			k := r.Uint64N(1 << 20)
			for len(set) < n {
				set[k] = true
				if r.IntN(50) == 0 {
					k += 1<<32 + r.Uint64N(1<<40)
				} else {
					k += 1 + r.Uint64N(3)
				}
				if k > math.MaxUint64-1<<42 {
					break
				}
			}
		case 2: // a sparse subset of a moderate range
			for len(set) < n {
				set[r.Uint64N(uint64(n)*50+1)] = true
			}
		default: // gaps of every byte length
			k := uint64(0)
			for range n {
				set[k] = true
				step := r.Uint64N(1 << uint(r.IntN(60)))
				if k > math.MaxUint64-step-1 {
					break
				}
				k += step + 1
			}
		}
		if r.IntN(3) == 0 {
			set[0], set[math.MaxUint64] = true, true
		}
		keys := make([]uint64, 0, len(set))
		for k := range set {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		sets = append(sets, keys)
	}
	return sets
}

func decodeKeyList(t testing.TB, coder int, payload []byte, n int, dec *huffDecoder) []uint64 {
	t.Helper()
	r, err := newKeyReader(coder, payload, n, dec)
	if err != nil {
		t.Fatalf("newKeyReader: %v", err)
	}
	out := make([]uint64, n)
	// Uneven batches exercise the reader's resumption.
	for done := 0; done < n; {
		m := min(n-done, 1+done%37)
		if err := r.batch(out[done : done+m]); err != nil {
			t.Fatalf("batch: %v", err)
		}
		done += m
	}
	if err := r.finish(); err != nil {
		t.Fatalf("finish: %v", err)
	}
	return out
}

func TestDeltaBinaryLossless(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	for _, keys := range randomKeySets(r) {
		payload := appendDeltaBinary(nil, keys)
		var st gapStats
		st.addList(keys)
		_, data := chooseWidths(&st.byteHist)
		if len(keys) > 0 && len(payload) != dbPayloadLen(len(keys), data) {
			t.Fatalf("payload %d bytes, planned %d", len(payload), dbPayloadLen(len(keys), data))
		}
		if got := decodeKeyList(t, keyCodeDeltaBinary, payload, len(keys), nil); !slices.Equal(got, keys) {
			t.Fatalf("delta-binary round trip of %d keys differs", len(keys))
		}
	}
}

func TestHuffmanGapsLossless(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	for _, keys := range randomKeySets(r) {
		if len(keys) == 0 {
			continue
		}
		var st gapStats
		st.addList(keys)
		lens := huffLengths(st.symHist[:])
		enc := newHuffEncoder(lens)
		table := appendHuffTable(nil, lens)
		dec, rest, err := parseHuffTable(table, gapSymbols, "gap")
		if err != nil || len(rest) != 0 {
			t.Fatalf("parseHuffTable: %v, %d bytes left", err, len(rest))
		}
		payload := appendHuffGaps(nil, keys, &enc)
		if want := (huffBits(st.symHist[:], lens) + st.extraBits + 7) / 8; len(payload) != want {
			t.Fatalf("payload %d bytes, statistics say %d", len(payload), want)
		}
		if got := decodeKeyList(t, keyCodeHuffman, payload, len(keys), dec); !slices.Equal(got, keys) {
			t.Fatalf("Huffman round trip of %d keys differs", len(keys))
		}
	}
}

func TestGapSymbol(t *testing.T) {
	xs := []uint64{0, 1, 15, 16, 17, 23, 24, 31, 32, 1000, 1<<32 - 1, 1 << 32, 1<<63 - 1, 1 << 63, math.MaxUint64}
	for _, x := range xs {
		sym, eb := gapSymbol(x)
		if sym < 0 || sym >= gapSymbols {
			t.Fatalf("gap %d: symbol %d out of range", x, sym)
		}
		// Decode as the key reader does.
		got := uint64(sym)
		if sym >= 16 {
			e := uint(sym-16)>>2 + 2
			if e != eb {
				t.Fatalf("gap %d: %d extra bits, decoder expects %d", x, eb, e)
			}
			got = uint64(4|sym&3)<<e | x&(1<<e-1)
		}
		if got != x {
			t.Fatalf("gap %d decodes as %d", x, got)
		}
	}
}

// TestDeltaBinaryWidths checks the width choice on known histograms: the
// paper's one-byte case, and 8-byte gaps that the 1/2/3/4 widths of the
// paper could not hold.
func TestDeltaBinaryWidths(t *testing.T) {
	keys := []uint64{10, 20, 300, 1 << 50}
	payload := appendDeltaBinary(nil, keys)
	// widths: {1, 2, 3?, 7}: 10 and 9 take 1 byte, 279 takes 2, 2^50-301 7.
	if len(payload) != 2+1+1+1+2+7 {
		t.Fatalf("payload %d bytes, want 14", len(payload))
	}
	if got := decodeKeyList(t, keyCodeDeltaBinary, payload, len(keys), nil); !slices.Equal(got, keys) {
		t.Fatalf("got %v", got)
	}
	dense := make([]uint64, 1000)
	for i := range dense {
		dense[i] = uint64(3 * i)
	}
	if got := len(appendDeltaBinary(nil, dense)); got != 2+250+1000 {
		t.Fatalf("1000 small gaps: %d bytes, want 1252 (1.25 bytes a key)", got)
	}
}
