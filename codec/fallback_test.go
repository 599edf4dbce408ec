package codec

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestSketchMLWritesUniform8WhereItServesBetter checks the rule of
// SketchML.encode on real gradients and random updates of every size: the
// frame written never costs more bits than the sketch frame alone, counting
// a bit a value for each doubling of the L2 error; small updates get a
// uniform8 frame, large ones keep the sketch.
func TestSketchMLWritesUniform8WhereItServesBetter(t *testing.T) {
	def := mustSketchML(t, DefaultSketchMLConfig())
	alone := mustSketchML(t, sketchOnly())
	updates := realGradients(t)
	updates["heavy tail"] = syntheticGradients()["heavy tail"]
	r := rand.New(rand.NewPCG(9, 9))
	for i := range 60 {
		n := 1 + r.IntN(3000)
		u := laplaceUpdate(r.Uint64(), n, uint64(n)+r.Uint64N(1<<20), 1e-3)
		if i%4 == 0 {
			u.Keys = nil
		}
		updates[fmt.Sprintf("random %d (%d values)", i, n)] = u
	}
	wrote := map[string]int{}
	for name, u := range updates {
		f, err := def.Encode(nil, u)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		s, err := alone.Encode(nil, u)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got, _ := FrameCodec(f)
		wrote[got]++
		fErr, err := decodedSqError(f, u)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		sErr, err := decodedSqError(s, u)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !fewerBits(len(f), fErr, len(s), sErr, u.Len()) || (got == "sketchml" && len(f) != len(s)) {
			t.Errorf("%s: wrote a %s frame of %d bytes, squared error %g; the sketch alone %d bytes, %g", name, got, len(f), fErr, len(s), sErr)
		}
		d := mustDecode(t, f)
		sameKeys(t, u, d)
	}
	for name, want := range map[string]string{"a9a first": "uniform8", "rcv1 first": "sketchml", "rcv1 later": "sketchml", "heavy tail": "sketchml"} {
		got, _ := FrameCodec(must(def.Encode(nil, updates[name])))
		if got != want {
			t.Errorf("%s (%d pairs): a %s frame, want %s", name, updates[name].Len(), got, want)
		}
	}
	if wrote["uniform8"] == 0 || wrote["sketchml"] == 0 {
		t.Errorf("frames written: %v; want both kinds", wrote)
	}
}

// TestByteBudgetTakesUniform8WhereTheSketchCannotFit: a budget below the
// smallest sketch frame that a uniform8 frame fits is met with that frame;
// one that neither fits is refused.
func TestByteBudgetTakesUniform8WhereTheSketchCannotFit(t *testing.T) {
	u := realGradients(t)["a9a first"]
	u8 := must(Uniform8{}.Encode(nil, u))
	cfg := sketchOnly()
	cfg.ByteBudget = len(u8)
	if _, err := mustSketchML(t, cfg).Encode(nil, u); !errors.Is(err, ErrBadInput) {
		t.Fatalf("the sketch alone within %d bytes: error %v, want the budget refused", len(u8), err)
	}
	cfg.SketchOnly = false
	f, err := mustSketchML(t, cfg).Encode(nil, u)
	if err != nil {
		t.Fatalf("budget %d: %v", cfg.ByteBudget, err)
	}
	if got, _ := FrameCodec(f); got != "uniform8" || len(f) > cfg.ByteBudget {
		t.Errorf("budget %d: a %s frame of %d bytes", cfg.ByteBudget, got, len(f))
	}
	cfg.ByteBudget = len(u8) - 1
	if _, err := mustSketchML(t, cfg).Encode(nil, u); !errors.Is(err, ErrBadInput) {
		t.Errorf("budget %d, below both frames: error %v, want ErrBadInput", cfg.ByteBudget, err)
	}
}

// TestFewerBits pins the exchange rate: a frame may take up to n/8 bytes
// more for each halving of its L2 error, no more than maxGainBits a value,
// and an exact frame against an inexact one earns the cap.
func TestFewerBits(t *testing.T) {
	for _, tc := range []struct {
		aBytes int
		aSq    float64
		bBytes int
		bSq    float64
		want   bool
	}{
		{100, 1, 100, 1, true},     // the same
		{100, 1, 99, 1, false},     // a byte more for nothing
		{225, 0.25, 100, 1, true},  // 1000 bits more, L2 error halved: 1000 bits over 1000 values
		{226, 0.25, 100, 1, false}, // a byte past that
		{600, 0, 100, 1, true},     // exact: the cap, 4 bits a value
		{601, 0, 100, 1, false},
		{100, 0, 100, 0, true},
		{100, 1, 100, 0, false}, // inexact against exact at the same size
		{600, 1e-30, 100, 1, true},
	} {
		if got := fewerBits(tc.aBytes, tc.aSq, tc.bBytes, tc.bSq, 1000); got != tc.want {
			t.Errorf("fewerBits(%d bytes, %g, %d bytes, %g, 1000 values) = %v, want %v", tc.aBytes, tc.aSq, tc.bBytes, tc.bSq, got, tc.want)
		}
	}
}
