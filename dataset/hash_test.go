package dataset

import (
	"hash/fnv"
	"slices"
	"testing"
)

// The hash is pinned: model files name it, so a change would silently
// break every hashed model already saved.
func TestHashIsPinned(t *testing.T) {
	for _, c := range []struct {
		in   string
		want uint64
	}{
		{"", 0xefd01f60ba992926},
		{"a", 0x82a2a958a9bece5b},
		{"foobar", 0x2c22194922d1672b},
	} {
		if got := Hash64([]byte(c.in)); got != c.want {
			t.Errorf("Hash64(%q) = %#x, want %#x", c.in, got, c.want)
		}
		// The first stage is the standard FNV-1a.
		h := fnv.New64a()
		h.Write([]byte(c.in))
		if got := Mix64(h.Sum64()); got != c.want {
			t.Errorf("Mix64(FNV-1a(%q)) = %#x, want %#x", c.in, got, c.want)
		}
		if got := HashString(c.in, 18); got != 1+c.want>>46 {
			t.Errorf("HashString(%q, 18) = %d", c.in, got)
		}
	}
	if got := HashID(5790070132776482915, 18); got != 82233 {
		t.Errorf("HashID(5790070132776482915, 18) = %d, want 82233", got)
	}
	for _, bits := range []uint{1, 8, 30} {
		for id := uint64(0); id < 1000; id++ {
			if k := HashID(id, bits); k < 1 || k > 1<<bits {
				t.Fatalf("HashID(%d, %d) = %d, outside 1..2^bits", id, bits, k)
			}
		}
	}
}

func TestHasherMergesCollisions(t *testing.T) {
	// With one bit every id lands on key 1 or 2.
	h := Hasher{Bits: 1}
	in := Row{Label: 1, Keys: []uint64{3, 10, 11, 500, 1 << 62}, Values: []float32{1, 2, 4, 8, 16}}
	out := h.Row(in)
	var want [3]float32
	for i, id := range in.Keys {
		want[HashID(id, 1)] += in.Values[i]
	}
	var got [3]float32
	for i, k := range out.Keys {
		got[k] = out.Values[i]
	}
	if got != want || !slices.IsSorted(out.Keys) || len(out.Keys) != len(out.Values) || out.Label != 1 {
		t.Errorf("hashed row %+v, want sums %v", out, want)
	}
	for i := 1; i < len(out.Keys); i++ {
		if out.Keys[i] == out.Keys[i-1] {
			t.Errorf("duplicate key %d", out.Keys[i])
		}
	}
	if same := (&Hasher{}).Row(in); !slices.Equal(same.Keys, in.Keys) {
		t.Error("a Hasher without bits changed the ids")
	}
}

func TestHashedDataset(t *testing.T) {
	d := &Dataset{Name: "d", Rows: []Row{
		{Label: 1, Keys: []uint64{1, 1 << 63}, Values: []float32{1, 2}},
		{Label: -1},
		{Label: 1, Keys: []uint64{7}, Values: []float32{3}},
	}}
	hd := d.Hashed(10)
	if hd.MaxFeature != 1024 || len(hd.Rows) != 3 || len(hd.Rows[1].Keys) != 0 {
		t.Fatalf("hashed dataset %+v", hd)
	}
	if err := checkRows(&Dataset{Rows: hd.Rows, MaxFeature: max(hd.Rows[0].Keys[len(hd.Rows[0].Keys)-1], hd.Rows[2].Keys[0])}); err != nil {
		t.Error(err)
	}
	if hd.Rows[2].Keys[0] != HashID(7, 10) || hd.Rows[2].Values[0] != 3 {
		t.Errorf("row 2 hashed to %+v", hd.Rows[2])
	}
	if d.Rows[0].Keys[1] != 1<<63 {
		t.Error("Hashed changed its input")
	}
}
