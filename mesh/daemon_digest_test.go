package mesh

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/sketchmesh/sketchmesh/dataset"
	"github.com/sketchmesh/sketchmesh/node"
)

// A view divergence the core reports is a warning in the daemon's log,
// naming the member and the row.
func TestDaemonLogsViewDivergence(t *testing.T) {
	train, _, err := dataset.Builtin("rcv1")
	if err != nil {
		t.Fatal(err)
	}
	mdl, opt, cdc, err := daemonSettings(train).Build()
	if err != nil {
		t.Fatal(err)
	}
	n, err := node.New(node.Config{ID: "a", Members: []string{"a", "b"}, Model: mdl, Optimizer: opt, Codec: cdc,
		BatchSize: 10, Shard: train.Rows[:10]})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	a := &Daemon{n: n, log: slog.New(slog.NewTextHandler(&out, nil))}
	a.onEvent(node.Event{Kind: node.EventDiverged, Member: "b", Clock: 48})
	line := out.String()
	for _, want := range []string{"level=WARN", "view diverged", "member=b", "row=48", "divergences=0"} {
		if !strings.Contains(line, want) {
			t.Errorf("log %q lacks %q", line, want)
		}
	}
}
