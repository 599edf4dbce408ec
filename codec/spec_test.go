package codec

import (
	"errors"
	"strings"
	"testing"
)

func TestParseSpec(t *testing.T) {
	c, err := ParseSpec("sketchml:layout=width:target-error=0.25:quantiles=512:keys=huffman:cells=packed:representative=midpoint:rows=3:groups=4:columns=0.5:seed=0x10")
	if err != nil {
		t.Fatal(err)
	}
	want := SketchMLConfig{Quantiles: 512, Rows: 3, Groups: 4, ColumnRatio: 0.5, Seed: 16, KeyCoding: KeyCodingHuffman,
		CellCoding: CellCodingPacked, Representative: RepresentativeSplitMidpoint, GroupLayout: GroupsEqualWidth, TargetError: 0.25}
	if got := c.(*SketchML).Config(); got != want {
		t.Errorf("config %+v, want %+v", got, want)
	}
	if c, err := ParseSpec("sketchml:budget=4096"); err != nil || c.(*SketchML).Config().ByteBudget != 4096 {
		t.Errorf("budget: %v %v", c, err)
	}
	if c, err := ParseSpec("sketchml:fallback=off"); err != nil || !c.(*SketchML).Config().SketchOnly {
		t.Errorf("fallback=off: %v %v", c, err)
	}
	if c, err := ParseSpec("sketchml:fallback=uniform8"); err != nil || c.(*SketchML).Config().SketchOnly {
		t.Errorf("fallback=uniform8: %v %v", c, err)
	}
	if c, err := ParseSpec("uniform8"); err != nil || c.Name() != "uniform8" {
		t.Errorf("uniform8: %v %v", c, err)
	}
	for spec, frag := range map[string]string{
		"sketchml:layout=wide":               `"wide" is not one of width, energy`,
		"sketchml:fallback=zstd":             `"zstd" is not one of uniform8, off`,
		"sketchml:colour=red":                `unknown option "colour"`,
		"sketchml:layout":                    "want option=value",
		"sketchml:quantiles=lots":            "invalid syntax",
		"sketchml:quantiles=2":               "quantiles 2 outside",
		"sketchml:target-error=2":            "target error 2 outside",
		"raw:layout=width":                   "codec raw takes no options",
		"sketchml:budget=1:target-error=0.1": "exclusive",
	} {
		_, err := ParseSpec(spec)
		if !errors.Is(err, ErrBadInput) || !strings.Contains(err.Error(), frag) {
			t.Errorf("%s: error %v, want ErrBadInput containing %q", spec, err, frag)
		}
	}
	if _, err := ParseSpec("lz4"); !errors.Is(err, ErrUnknownCodec) {
		t.Errorf("lz4: error %v, want ErrUnknownCodec", err)
	}
}
