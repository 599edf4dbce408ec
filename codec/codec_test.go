package codec

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
)

func TestNames(t *testing.T) {
	want := []string{"raw", "sketchml", "uniform8", "zstd"}
	if got := Names(); !slices.Equal(got, want) {
		t.Fatalf("Names() = %v, want %v", got, want)
	}
	for _, n := range want {
		c, err := ByName(n)
		if err != nil || c.Name() != n {
			t.Fatalf("ByName(%q) = %v, %v", n, c, err)
		}
		// Large enough that sketchml writes its own frame (a small update
		// gets a uniform8 one, TestSketchMLWritesUniform8WhereItServesBetter).
		f, err := c.Encode(nil, syntheticGradients()["heavy tail"])
		if err != nil {
			t.Fatal(err)
		}
		if got, err := FrameCodec(f); err != nil || got != n {
			t.Fatalf("FrameCodec(%s frame) = %q, %v", n, got, err)
		}
	}
	if _, err := ByName("gzip"); !errors.Is(err, ErrUnknownCodec) {
		t.Fatalf("ByName(gzip) error = %v, want ErrUnknownCodec", err)
	}
}

// testUpdates are edge cases every codec must carry: empty, single, key 0
// and MaxUint64, gaps of 2^32 and more, dense runs, zeros and -0,
// subnormals and extreme magnitudes, and dense vectors.
func testUpdates() map[string]Sparse {
	r := rand.New(rand.NewPCG(1, 2))
	sub := math.Float32frombits(1) // smallest subnormal
	m := map[string]Sparse{
		"empty sparse": {Keys: []uint64{}, Values: []float32{}},
		"empty dense":  {Values: []float32{}},
		"single":       {Keys: []uint64{42}, Values: []float32{-0.125}},
		"extremes": {Keys: []uint64{0, 1, 1 << 32, 1<<32 + 1, 1 << 63, math.MaxUint64 - 1, math.MaxUint64},
			Values: []float32{math.MaxFloat32, -math.MaxFloat32, sub, -sub, 0, float32(math.Copysign(0, -1)), 1}},
		"all zero":        {Keys: []uint64{5, 6, 7}, Values: []float32{0, 0, 0}},
		"one sign":        {Keys: []uint64{1, 10, 100, 1000}, Values: []float32{1, 2, 3, 4}},
		"dense":           {Values: []float32{0.5, -0.25, 0, 3, -3, 1e-30}},
		"dense all equal": {Values: slices.Repeat([]float32{0.75}, 1000)},
		"laplace":         laplaceUpdate(3, 5000, 1<<20, 1e-3),
		"huge gaps":       hugeGapUpdate(r, 3000),
		"dense run":       runUpdate(r, 4000),
	}
	d := laplaceUpdate(4, 3000, 1<<20, 1)
	d.Keys = nil
	m["dense laplace"] = d
	return m
}

// hugeGapUpdate has keys spread over all of uint64, so most gaps exceed
// 2^32 and need 8 bytes, including 0 and MaxUint64.
func hugeGapUpdate(r *rand.Rand, n int) Sparse {
	set := map[uint64]bool{0: true, math.MaxUint64: true}
	for len(set) < n {
		set[r.Uint64()] = true
	}
	keys := make([]uint64, 0, n)
	for k := range set {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	vals := make([]float32, n)
	for i := range vals {
		vals[i] = laplace(r, 10)
	}
	return Sparse{Keys: keys, Values: vals}
}

// runUpdate has consecutive keys: every gap is zero.
func runUpdate(r *rand.Rand, n int) Sparse {
	u := Sparse{Keys: make([]uint64, n), Values: make([]float32, n)}
	for i := range u.Keys {
		u.Keys[i] = 1<<40 + uint64(i)
		u.Values[i] = laplace(r, 1e-4)
	}
	return u
}

func mustDecode(t testing.TB, f []byte) Sparse {
	t.Helper()
	d, err := Decode(f)
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	return d
}

func sameKeys(t testing.TB, u, d Sparse) {
	t.Helper()
	if u.Dense() != d.Dense() || len(d.Values) != len(u.Values) || len(d.Keys) != len(u.Keys) {
		t.Fatalf("decoded %d keys %d values (dense %v), want %d keys %d values (dense %v)",
			len(d.Keys), len(d.Values), d.Dense(), len(u.Keys), len(u.Values), u.Dense())
	}
	for i := range u.Keys {
		if d.Keys[i] != u.Keys[i] {
			t.Fatalf("key %d decoded as %d", u.Keys[i], d.Keys[i])
		}
	}
}

func TestLosslessRoundTrip(t *testing.T) {
	for _, name := range []string{"raw", "zstd"} {
		c, _ := ByName(name)
		for what, u := range testUpdates() {
			f, err := c.Encode(nil, u)
			if err != nil {
				t.Fatalf("%s %s: %v", name, what, err)
			}
			d := mustDecode(t, f)
			sameKeys(t, u, d)
			for i, v := range u.Values {
				if math.Float32bits(d.Values[i]) != math.Float32bits(v) {
					t.Fatalf("%s %s: value %d = %v decoded as %v", name, what, i, v, d.Values[i])
				}
			}
		}
	}
}

// sketchConfigs covers the coders, representatives and some unusual
// parameters, all writing the sketch frame (never a uniform8 one in its
// place), whose guarantee the tests check.
func sketchConfigs() map[string]SketchMLConfig {
	m := map[string]SketchMLConfig{}
	base := sketchOnly()
	m["default"] = base
	for _, kc := range []KeyCoding{KeyCodingDeltaBinary, KeyCodingHuffman} {
		for _, cc := range []CellCoding{CellCodingPacked, CellCodingHuffman} {
			c := base
			c.KeyCoding, c.CellCoding = kc, cc
			m[[]string{"", "db", "huff"}[kc]+"-"+[]string{"", "packed", "huff"}[cc]] = c
		}
	}
	c := base
	c.Representative = RepresentativeSplitMidpoint
	m["midpoint"] = c
	c = base
	c.Quantiles, c.Groups, c.Rows, c.ColumnRatio = 3, 3, 1, 0.01
	m["tiny"] = c
	c = base
	c.Quantiles, c.Groups, c.Rows, c.ColumnRatio = 4096, 1, 16, 16
	m["wide"] = c
	c = base
	c.Groups = 256
	m["width1"] = c
	c = base
	c.Quantiles, c.Groups = 4096, 64
	m["many lists"] = c
	c = base
	c.GroupLayout = GroupsEqualEnergy
	m["energy"] = c
	c.Quantiles, c.Groups, c.ColumnRatio = 1000, 30, 1
	m["energy wide"] = c
	return m
}

// checkSketchGuarantee asserts the SketchML guarantee for every pair: the
// decoded value is the representative of the original's bucket or of a
// bucket closer to zero in the same group (MinMaxSketch only lowers ranks),
// hence it never has the opposite sign and its magnitude never exceeds the
// largest magnitude among the original's bucket members. Zeros decode to
// zero exactly.
func checkSketchGuarantee(t testing.TB, c *SketchML, u, d Sparse) {
	t.Helper()
	qz, ok := quantize(u.Values, c.cfg.Quantiles, c.cfg.Groups, c.cfg.Representative)
	if !ok {
		t.Fatal("quantize refused finite values")
	}
	// Largest member magnitude per bucket, computed here from the values.
	upper := make([]float32, qz.qpos+qz.qneg)
	for i, id := range qz.ids {
		if id != qz.zeroID() {
			upper[id] = max(upper[id], float32(math.Abs(float64(u.Values[i]))))
		}
	}
	first := make([]int, len(upper)) // first bucket of each bucket's group
	for _, g := range groupsOf(c.groupWidths(&qz))[1:] {
		for b := g.first; b < g.first+g.width; b++ {
			first[b] = g.first
		}
	}
	for i, v := range u.Values {
		x := d.Values[i]
		id := int(qz.ids[i])
		if id == int(qz.zeroID()) {
			if x != 0 {
				t.Fatalf("zero at %d decoded as %v", i, x)
			}
			continue
		}
		if (v > 0 && x < 0) || (v < 0 && x > 0) {
			t.Fatalf("value %v at %d decoded with the opposite sign: %v", v, i, x)
		}
		if float32(math.Abs(float64(x))) > upper[id] {
			t.Fatalf("value %v at %d decoded as %v, above its bucket's largest magnitude %v", v, i, x, upper[id])
		}
		found := false
		for b := first[id]; b <= id; b++ {
			rep := qz.reps[b]
			if b >= qz.qpos {
				rep = -rep
			}
			if rep == x {
				found = true
				break
			}
		}
		if !found {
			t.Fatalf("value %v at %d (bucket %d) decoded as %v, not a representative of buckets %d..%d", v, i, id, x, first[id], id)
		}
	}
}

func TestSketchMLRoundTrip(t *testing.T) {
	for cname, cfg := range sketchConfigs() {
		c, err := NewSketchML(cfg)
		if err != nil {
			t.Fatal(err)
		}
		for what, u := range testUpdates() {
			f, err := c.Encode(nil, u)
			if err != nil {
				t.Fatalf("%s %s: %v", cname, what, err)
			}
			d := mustDecode(t, f)
			sameKeys(t, u, d)
			checkSketchGuarantee(t, c, u, d)
		}
	}
}

// TestSketchMLProperties checks the guarantee and lossless keys on random
// updates of random sizes, densities and scales.
func TestSketchMLProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	cfgs := sketchConfigs()
	names := slices.Sorted(func(yield func(string) bool) {
		for k := range cfgs {
			if !yield(k) {
				return
			}
		}
	})
	for iter := range 300 {
		n := r.IntN(3000)
		keyRange := uint64(n) + r.Uint64N(1<<uint(r.IntN(64)))
		if keyRange < uint64(n) {
			keyRange = math.MaxUint64
		}
		u := laplaceUpdate(r.Uint64(), n, keyRange, math.Pow(10, float64(r.IntN(20)-10)))
		if iter%3 == 0 {
			for i := range u.Values {
				if r.IntN(4) == 0 {
					u.Values[i] = 0
				}
			}
		}
		if iter%5 == 0 {
			u.Keys = nil
		}
		c, _ := NewSketchML(cfgs[names[iter%len(names)]])
		f, err := c.Encode(nil, u)
		if err != nil {
			t.Fatal(err)
		}
		d := mustDecode(t, f)
		sameKeys(t, u, d)
		checkSketchGuarantee(t, c, u, d)
	}
}

// TestSketchMLError pins the error of the default codec on a Laplace
// gradient and shows it comes from the sketch: with wide sketches only the
// quantification error remains, which the test computes directly.
func TestSketchMLError(t *testing.T) {
	u := laplaceUpdate(11, 20000, 1<<20, 1e-3)
	m, err := Measure(mustSketchML(t, sketchOnly()), u)
	if err != nil {
		t.Fatal(err)
	}
	if m.SignFlips != 0 || m.Overestimates != 0 {
		t.Fatalf("default: %d sign flips, %d overestimates", m.SignFlips, m.Overestimates)
	}
	if m.RelL2Error > 0.5 || m.RelL2Error < 0.2 {
		t.Fatalf("default: relative L2 error %.3f outside the expected [0.2, 0.5]", m.RelL2Error)
	}
	defaultErr := m.RelL2Error
	qz, _ := quantize(u.Values, 256, 8, RepresentativeMemberMean)
	var errSq, normSq float64
	for i, v := range u.Values {
		rep := float64(qz.reps[qz.ids[i]])
		if int(qz.ids[i]) >= qz.qpos {
			rep = -rep
		}
		errSq += (rep - float64(v)) * (rep - float64(v))
		normSq += float64(v) * float64(v)
	}
	quantErr := math.Sqrt(errSq / normSq)
	wide := sketchOnly()
	wide.Rows, wide.ColumnRatio = 8, 16
	m, err = Measure(mustSketchML(t, wide), u)
	if err != nil {
		t.Fatal(err)
	}
	if m.RelL2Error < quantErr || m.RelL2Error > quantErr*1.05 {
		t.Fatalf("wide sketch: relative L2 error %.4f, want the quantification error %.4f (+5%%)", m.RelL2Error, quantErr)
	}
	t.Logf("relative L2 error: default %.4f, wide sketch %.4f, quantification alone %.4f", defaultErr, m.RelL2Error, quantErr)
}

// TestRepresentativeChoice records the measurement behind the default: the
// mean of a bucket's members quantifies with less error than the mean of
// its splits, with and without sketch error.
func TestRepresentativeChoice(t *testing.T) {
	for _, ratio := range []float64{0.3, 16} {
		u := laplaceUpdate(12, 20000, 1<<20, 1e-3)
		errs := map[Representative]float64{}
		for _, rep := range []Representative{RepresentativeMemberMean, RepresentativeSplitMidpoint} {
			cfg := sketchOnly()
			cfg.ColumnRatio, cfg.Representative = ratio, rep
			m, err := Measure(mustSketchML(t, cfg), u)
			if err != nil {
				t.Fatal(err)
			}
			errs[rep] = m.RelL2Error
		}
		if errs[RepresentativeMemberMean] >= errs[RepresentativeSplitMidpoint] {
			t.Fatalf("column ratio %v: member mean error %.4f not below midpoint %.4f", ratio, errs[RepresentativeMemberMean], errs[RepresentativeSplitMidpoint])
		}
		t.Logf("column ratio %v: rel L2 member mean %.4f, split midpoint %.4f", ratio, errs[RepresentativeMemberMean], errs[RepresentativeSplitMidpoint])
	}
}

// sketchOnly is the default configuration without the uniform8 frame in
// place of the sketch: what a test of the sketch itself measures.
func sketchOnly() SketchMLConfig {
	cfg := DefaultSketchMLConfig()
	cfg.SketchOnly = true
	return cfg
}

func mustSketchML(t testing.TB, cfg SketchMLConfig) *SketchML {
	t.Helper()
	c, err := NewSketchML(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestUniform8RoundTrip(t *testing.T) {
	for _, c := range []Uniform8{{Stochastic: true}, {}} {
		for what, u := range testUpdates() {
			m, err := Measure(c, u)
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			if m.SignFlips != 0 || m.Overestimates != 0 {
				t.Fatalf("%v %s: %d sign flips, %d overestimates", c, what, m.SignFlips, m.Overestimates)
			}
			f, _ := c.Encode(nil, u)
			d := mustDecode(t, f)
			scale := 0.0
			for _, v := range u.Values {
				scale = max(scale, math.Abs(float64(v)))
			}
			for i, v := range u.Values {
				// One grid step stochastically, half a step rounding to
				// nearest, plus float32 rounding.
				step := scale / 127
				if !c.Stochastic {
					step /= 2
				}
				if e := math.Abs(float64(d.Values[i]) - float64(v)); e > step*(1+1e-6) {
					t.Fatalf("%v %s: value %v decoded as %v, error %g above %g", c, what, v, d.Values[i], e, step)
				}
			}
		}
	}
}

// TestUniform8Unbiased checks that stochastic rounding is unbiased: the
// mean decoded value of many copies of one value matches it.
func TestUniform8Unbiased(t *testing.T) {
	n := 20000
	u := Sparse{Keys: make([]uint64, n+1), Values: make([]float32, n+1)}
	for i := range u.Keys {
		u.Keys[i] = uint64(i)
		u.Values[i] = 0.3 // 0.3·127 = 38.1 grid steps
	}
	u.Values[n] = 1 // sets the scale
	d := mustDecode(t, must(Uniform8{Stochastic: true}.Encode(nil, u)))
	sum := 0.0
	for _, v := range d.Values[:n] {
		sum += float64(v)
	}
	if mean := sum / float64(n); math.Abs(mean-0.3) > 0.0005 {
		t.Fatalf("mean decoded value %v, want 0.3 ± 0.0005", mean)
	}
}

func must(f []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return f
}

func TestDeterministic(t *testing.T) {
	u := laplaceUpdate(9, 20000, 1<<24, 1e-2)
	dense := laplaceUpdate(10, 5000, 1<<24, 1e-2)
	dense.Keys = nil
	codecs := []Codec{}
	for _, n := range Names() {
		c, _ := ByName(n)
		codecs = append(codecs, c)
	}
	codecs = append(codecs, mustSketchML(t, DefaultSketchMLConfig()), &Zstd{})
	for _, c := range codecs {
		for _, x := range []Sparse{u, dense} {
			a := must(c.Encode(nil, x))
			b := must(c.Encode([]byte("prefix"), x))
			if !bytes.Equal(a, b[len("prefix"):]) || string(b[:len("prefix")]) != "prefix" {
				t.Fatalf("%s: encoding twice gave different bytes", c.Name())
			}
		}
	}
}

func TestEncodeRejects(t *testing.T) {
	bad := []struct {
		name string
		u    Sparse
		frag string
	}{
		{"NaN", Sparse{Keys: []uint64{1, 77}, Values: []float32{1, float32(math.NaN())}}, "at key 77"},
		{"Inf", Sparse{Keys: []uint64{5}, Values: []float32{float32(math.Inf(-1))}}, "value -Inf at key 5"},
		{"dense Inf", Sparse{Values: []float32{0, float32(math.Inf(1))}}, "at index 1"},
		{"unsorted", Sparse{Keys: []uint64{2, 1}, Values: []float32{1, 1}}, "key 1 follows key 2"},
		{"repeated", Sparse{Keys: []uint64{2, 2}, Values: []float32{1, 1}}, "key 2 follows key 2"},
		{"lengths", Sparse{Keys: []uint64{1, 2}, Values: []float32{1}}, "2 keys but 1 values"},
	}
	codecs := []Codec{}
	for _, n := range Names() {
		c, _ := ByName(n)
		codecs = append(codecs, c)
	}
	for _, c := range codecs {
		for _, b := range bad {
			_, err := c.Encode(nil, b.u)
			if !errors.Is(err, ErrBadInput) || !strings.Contains(err.Error(), b.frag) {
				t.Errorf("%s %s: error %v, want ErrBadInput containing %q", c.Name(), b.name, err, b.frag)
			}
		}
	}
}

func TestNewSketchMLRejects(t *testing.T) {
	for _, tc := range []struct {
		f    func(*SketchMLConfig)
		frag string
	}{
		{func(c *SketchMLConfig) { c.Quantiles = 2 }, "quantiles 2"},
		{func(c *SketchMLConfig) { c.Quantiles = 5000 }, "quantiles 5000"},
		{func(c *SketchMLConfig) { c.Rows = 0 }, "rows 0"},
		{func(c *SketchMLConfig) { c.Rows = 17 }, "rows 17"},
		{func(c *SketchMLConfig) { c.Groups = 0 }, "groups 0"},
		{func(c *SketchMLConfig) { c.Groups = 300 }, "groups 300"},
		{func(c *SketchMLConfig) { c.ColumnRatio = 0 }, "column ratio 0"},
		{func(c *SketchMLConfig) { c.ColumnRatio = math.NaN() }, "column ratio NaN"},
		{func(c *SketchMLConfig) { c.KeyCoding = 9 }, "key coding 9"},
		{func(c *SketchMLConfig) { c.TargetError = 1 }, "target error 1 outside"},
		{func(c *SketchMLConfig) { c.TargetError = -0.1 }, "target error -0.1 outside"},
		{func(c *SketchMLConfig) { c.TargetError = math.NaN() }, "target error NaN outside"},
		{func(c *SketchMLConfig) { c.ByteBudget = -1 }, "byte budget -1 bytes is negative"},
		{func(c *SketchMLConfig) { c.TargetError, c.ByteBudget = 0.3, 1000 }, "exclusive"},
	} {
		cfg := DefaultSketchMLConfig()
		tc.f(&cfg)
		if _, err := NewSketchML(cfg); !errors.Is(err, ErrBadInput) || !strings.Contains(err.Error(), tc.frag) {
			t.Errorf("NewSketchML: error %v, want ErrBadInput containing %q", err, tc.frag)
		}
	}
}

// TestBudgetPadding encodes updates that compress far better than the
// decode budget allows and checks that the frames are padded just enough.
func TestBudgetPadding(t *testing.T) {
	run := runUpdate(rand.New(rand.NewPCG(1, 1)), 200000)
	for i := range run.Values {
		run.Values[i] = 1 // one bucket, no cells
	}
	denseZero := Sparse{Values: make([]float32, 300000)}
	for _, tc := range []struct {
		c Codec
		u Sparse
	}{
		{mustSketchML(t, DefaultSketchMLConfig()), run},
		{mustSketchML(t, DefaultSketchMLConfig()), denseZero},
		{zstdCodec, denseZero},
	} {
		f, st, err := tc.c.(measurer).encode(nil, tc.u, false)
		if err != nil {
			t.Fatal(err)
		}
		if st.padBytes == 0 {
			t.Fatalf("%s: %d-byte frame for %d values was not padded", tc.c.Name(), len(f), tc.u.Len())
		}
		out := 12 * tc.u.Len()
		if tc.u.Dense() {
			out = 4 * tc.u.Len()
		}
		if out > decodeBudgetFactor*len(f)+decodeBudgetSlack {
			t.Fatalf("%s: padded %d-byte frame decodes to %d bytes", tc.c.Name(), len(f), out)
		}
		// One byte less of padding and the decoder refuses the frame.
		short := f[:len(f)-1]
		if _, err := Decode(short); err == nil || !strings.Contains(err.Error(), "needs") {
			t.Fatalf("%s: frame one byte short of its padding decoded (err %v)", tc.c.Name(), err)
		}
		d := mustDecode(t, f)
		sameKeys(t, tc.u, d)
	}
}

// TestNoGoroutines checks that no codec leaves goroutines behind (zstd's
// stream modes would; the codec uses only its one-shot calls).
func TestNoGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	u := laplaceUpdate(61, 300000, 1<<30, 1) // several zstd blocks
	for _, c := range []Codec{&Zstd{}, mustSketchML(t, DefaultSketchMLConfig()), Uniform8{}, Raw{}} {
		mustDecode(t, must(c.Encode(nil, u)))
	}
	if after := runtime.NumGoroutine(); after > before {
		t.Fatalf("%d goroutines before, %d after", before, after)
	}
}
