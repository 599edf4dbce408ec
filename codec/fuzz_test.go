package codec

import (
	"encoding/binary"
	"math"
	"slices"
	"testing"
)

// seedFrames are valid frames of every codec and layout, for fuzz seeds.
func seedFrames(t testing.TB) [][]byte {
	var out [][]byte
	small := []Sparse{
		{Keys: []uint64{}, Values: []float32{}},
		{Keys: []uint64{7}, Values: []float32{-2}},
		goldenUpdate(),
		{Values: goldenUpdate().Values},
		laplaceUpdate(1, 300, 1<<40, 1e-2),
	}
	codecs := []Codec{}
	for _, n := range Names() {
		c, _ := ByName(n)
		codecs = append(codecs, c)
	}
	for _, cfg := range sketchConfigs() {
		c, err := NewSketchML(cfg)
		if err != nil {
			t.Fatal(err)
		}
		codecs = append(codecs, c)
	}
	for _, c := range codecs {
		for _, u := range small {
			out = append(out, must(c.Encode(nil, u)))
		}
	}
	return append(out, smValid())
}

// FuzzDecode feeds arbitrary bytes to Decode: it must return an error or a
// well-formed update, never panic. TestDecodeAllocations runs the corpus
// against the allocation bound.
func FuzzDecode(f *testing.F) {
	for _, fr := range seedFrames(f) {
		f.Add(fr)
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		u, err := Decode(frame)
		if err != nil {
			return
		}
		if u.Keys != nil && len(u.Keys) != len(u.Values) {
			t.Fatalf("%d keys, %d values", len(u.Keys), len(u.Values))
		}
		for i := 1; i < len(u.Keys); i++ {
			if u.Keys[i] <= u.Keys[i-1] {
				t.Fatalf("keys not ascending at %d", i)
			}
		}
		for i, v := range u.Values {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				t.Fatalf("value %d is %v", i, v)
			}
		}
	})
}

// FuzzKeyLists decodes arbitrary key-list payloads with either coder.
func FuzzKeyLists(f *testing.F) {
	keys := []uint64{0, 3, 300, 1 << 40, math.MaxUint64}
	var st gapStats
	st.addList(keys)
	lens := huffLengths(st.symHist[:])
	enc := newHuffEncoder(lens)
	f.Add(byte(keyCodeDeltaBinary), uint16(len(keys)), appendDeltaBinary(nil, keys), []byte(nil))
	f.Add(byte(keyCodeHuffman), uint16(len(keys)), appendHuffGaps(nil, keys, &enc), appendHuffTable(nil, lens))
	f.Fuzz(func(t *testing.T, coder byte, count uint16, payload, table []byte) {
		var dec *huffDecoder
		c := int(coder & 1)
		if c == keyCodeHuffman {
			var err error
			if dec, _, err = parseHuffTable(table, gapSymbols, "gap"); err != nil {
				return
			}
		}
		r, err := newKeyReader(c, payload, int(count), dec)
		if err != nil {
			return
		}
		out := make([]uint64, count)
		if err := r.batch(out); err != nil {
			return
		}
		_ = r.finish()
	})
}

// keysFromBytes turns fuzz bytes into a sorted unique key set, spreading
// keys over all of uint64 or packing them densely depending on the first
// byte.
func keysFromBytes(data []byte) []uint64 {
	var keys []uint64
	dense := len(data) > 0 && data[0]&1 == 1
	for i := 0; i+8 <= len(data); i += 8 {
		k := binary.LittleEndian.Uint64(data[i:])
		if dense {
			k >>= 48
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

// FuzzKeyRoundTrip checks both key coders reproduce any sorted key set.
func FuzzKeyRoundTrip(f *testing.F) {
	f.Add([]byte{})
	f.Add(binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, 0), math.MaxUint64))
	f.Add([]byte("\x01some keys packed densely into a small range of ids, then more"))
	f.Fuzz(func(t *testing.T, data []byte) {
		keys := keysFromBytes(data)
		if got := decodeKeyList(t, keyCodeDeltaBinary, appendDeltaBinary(nil, keys), len(keys), nil); !slices.Equal(got, keys) {
			t.Fatalf("delta-binary: %v, want %v", got, keys)
		}
		if len(keys) == 0 {
			return
		}
		var st gapStats
		st.addList(keys)
		lens := huffLengths(st.symHist[:])
		enc := newHuffEncoder(lens)
		dec, _, err := parseHuffTable(appendHuffTable(nil, lens), gapSymbols, "gap")
		if err != nil {
			t.Fatal(err)
		}
		if got := decodeKeyList(t, keyCodeHuffman, appendHuffGaps(nil, keys, &enc), len(keys), dec); !slices.Equal(got, keys) {
			t.Fatalf("Huffman: %v, want %v", got, keys)
		}
	})
}

// FuzzSketchMLRoundTrip encodes fuzz-made updates with fuzz-chosen
// parameters and checks lossless keys and the value guarantee, and that
// the frame written in the sketch's place never costs more bits.
func FuzzSketchMLRoundTrip(f *testing.F) {
	f.Add([]byte("\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f\x10\x11"), uint16(256), uint8(2), uint16(8), uint8(3), false)
	f.Add(slices.Repeat([]byte{0x3f, 0x80, 0, 0, 0xbf, 0, 0, 1, 0, 0, 0, 0}, 50), uint16(3), uint8(1), uint16(1), uint8(0), true)
	f.Fuzz(func(t *testing.T, data []byte, q uint16, rows uint8, groups uint16, ratio uint8, dense bool) {
		cfg := sketchOnly()
		cfg.Quantiles = 3 + int(q)%(maxQuantiles-2)
		cfg.Rows = 1 + int(rows)%maxRows
		cfg.Groups = 1 + int(groups)%cfg.Quantiles
		cfg.ColumnRatio = float64(1+int(ratio)) / 16
		cfg.KeyCoding = KeyCoding(ratio % 3)
		cfg.CellCoding = CellCoding(rows % 3)
		c := mustSketchML(t, cfg)
		// Each 12-byte chunk is a key and a value.
		u := Sparse{}
		for i := 0; i+12 <= len(data); i += 12 {
			v := math.Float32frombits(binary.LittleEndian.Uint32(data[i+8:]))
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				continue
			}
			u.Keys = append(u.Keys, binary.LittleEndian.Uint64(data[i:]))
			u.Values = append(u.Values, v)
		}
		idx := make([]int, len(u.Keys))
		for i := range idx {
			idx[i] = i
		}
		slices.SortStableFunc(idx, func(a, b int) int {
			switch {
			case u.Keys[a] < u.Keys[b]:
				return -1
			case u.Keys[a] > u.Keys[b]:
				return 1
			}
			return 0
		})
		s := Sparse{Keys: []uint64{}, Values: []float32{}}
		for _, i := range idx {
			if len(s.Keys) > 0 && s.Keys[len(s.Keys)-1] == u.Keys[i] {
				continue
			}
			s.Keys = append(s.Keys, u.Keys[i])
			s.Values = append(s.Values, u.Values[i])
		}
		if dense {
			s.Keys = nil
		}
		frame, err := c.Encode(nil, s)
		if err != nil {
			t.Fatal(err)
		}
		d := mustDecode(t, frame)
		sameKeys(t, s, d)
		checkSketchGuarantee(t, c, s, d)
		// The same parameters free to write a uniform8 frame instead: keys
		// still exact, and never more bits than the sketch frame.
		cfg.SketchOnly = false
		chosen, err := mustSketchML(t, cfg).Encode(nil, s)
		if err != nil {
			t.Fatal(err)
		}
		dc := mustDecode(t, chosen)
		sameKeys(t, s, dc)
		if !fewerBits(len(chosen), sqError(dc.Values, s.Values), len(frame), sqError(d.Values, s.Values), s.Len()) {
			name, _ := FrameCodec(chosen)
			t.Fatalf("a %s frame of %d bytes in place of the sketch's %d costs more bits", name, len(chosen), len(frame))
		}
	})
}

// FuzzHuffTable parses arbitrary code tables and decodes with them.
func FuzzHuffTable(f *testing.F) {
	f.Add(appendHuffTable(nil, huffLengths([]uint32{5, 1, 1, 9, 0, 3})), []byte{0xA5, 0x3C})
	f.Fuzz(func(t *testing.T, table, stream []byte) {
		dec, _, err := parseHuffTable(table, huffMaxSymbols, "fuzz")
		if err != nil {
			return
		}
		br := newBitReader(stream)
		for range 8 * len(stream) {
			s, ok := dec.next(&br)
			if !ok {
				return
			}
			if s >= dec.alphabet {
				t.Fatalf("symbol %d outside alphabet %d", s, dec.alphabet)
			}
		}
	})
}
