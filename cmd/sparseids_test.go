package cmd

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/sketchmesh/sketchmesh/dataset"
)

func TestWarnSparseIDs(t *testing.T) {
	rows := []dataset.Row{{Label: 1, Keys: []uint64{5, 20_000_000}, Values: []float32{1, 1}}, {Label: -1, Keys: []uint64{7}, Values: []float32{1}}}
	for _, tc := range []struct {
		name string
		d    *dataset.Dataset
		want string
	}{
		{"one large id", &dataset.Dataset{Name: "big-id", Rows: rows, MaxFeature: 20_000_000}, "suggested_hash_bits=10"},
		{"small dimension", &dataset.Dataset{Name: "small", Rows: rows, MaxFeature: 1 << 20}, ""},
	} {
		var buf bytes.Buffer
		warnSparseIDs(slog.New(slog.NewTextHandler(&buf, nil)), tc.d, 4)
		switch got := buf.String(); {
		case tc.want == "" && got != "":
			t.Errorf("%s: warned %q", tc.name, got)
		case tc.want != "" && !strings.Contains(got, tc.want):
			t.Errorf("%s: log %q, want it to hold %q", tc.name, got, tc.want)
		case tc.want != "" && !strings.Contains(got, "weights_mib_per_node=152"):
			t.Errorf("%s: log %q does not give the weights per node", tc.name, got)
		}
	}
}
