package cmd

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sketchmesh/sketchmesh/dataset"
	"github.com/sketchmesh/sketchmesh/model"
	"github.com/sketchmesh/sketchmesh/node"
)

func TestCheckFit(t *testing.T) {
	rows := []dataset.Row{
		{Label: 1, Keys: []uint64{1, 2, 50}, Values: []float32{1, 1, 1}},
		{Label: 2, Keys: []uint64{3, 60, 70}, Values: []float32{1, 1, 1}},
		{Label: 3, Keys: []uint64{4}, Values: []float32{1}},
	}
	d := &dataset.Dataset{Name: "d.libsvm", Rows: rows, MaxFeature: 70}
	lr := node.Settings{Model: model.LogisticRegression, MaxFeature: 10}
	if got := measureFit(d, lr); got.nonzeros != 7 || got.dropped != 3 || got.largestID != 70 {
		t.Errorf("fit %+v: want 3 of 7 non-zeros dropped", got)
	}
	for _, tc := range []struct {
		name    string
		s       node.Settings
		max     float64
		err     string
		warning string
	}{
		{"3 of 7 dropped, limit 10 %", lr, 10, "d.libsvm: 3 of its 7 non-zeros (42.9 %) have feature ids above the mesh's dimension 10 and would be dropped (the limit is 10 %, --max-dropped)", ""},
		{"3 of 7 dropped, limit 50 %", lr, 50, "", "dropped_percent=42.857"},
		{"hashed: nothing dropped", node.Settings{Model: model.LogisticRegression, MaxFeature: 1 << 4, HashBits: 4}, 0, "", ""},
		{"all fit", node.Settings{Model: model.LogisticRegression, MaxFeature: 70}, 0, "", ""},
		{"a much larger dimension", node.Settings{Model: model.LogisticRegression, MaxFeature: 47236}, 0, "", "uses only the lowest feature ids"},
		{"a class the mesh lacks", node.Settings{Model: model.Softmax, MaxFeature: 70, Classes: []float64{1, 2}}, 10, "d.libsvm: 1 of its 3 rows (33.3 %) have labels that are none of the mesh's classes [1 2]", ""},
	} {
		var logs bytes.Buffer
		err := checkFit(d, tc.s, tc.max, slog.New(slog.NewTextHandler(&logs, nil)))
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err) || !errors.As(err, new(usageError))):
			t.Errorf("%s: %v, want bad input holding %q", tc.name, err, tc.err)
		case tc.warning == "" && logs.Len() > 0:
			t.Errorf("%s: warned %q", tc.name, logs.String())
		case !strings.Contains(logs.String(), tc.warning):
			t.Errorf("%s: log %q, want %q", tc.name, logs.String(), tc.warning)
		}
	}
}

// An rcv1 node that dials an a9a mesh (123 features) is refused before it
// trains: nearly all of its non-zeros lie above the mesh's dimension.
func TestJoinerWhoseDataDoesNotFitIsRefused(t *testing.T) {
	bin, dir := e2eSetup(t)
	founder := startNode(t, bin, "a9a-founder", append(keyArgs(dir, "a"), "--wait-members", "2")...)
	defer func() { _ = founder.cmd.Process.Kill() }()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "run", "--data", "rcv1", "--listen", "/ip4/127.0.0.1/tcp/0", "--join", founder.addr, "--log-level", "warn").CombinedOutput()
	code := -1
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	}
	want := "have feature ids above the mesh's dimension 123 and would be dropped (the limit is 10 %, --max-dropped): this data does not fit the mesh's feature mapping"
	if code != 2 || !strings.Contains(string(out), "sketchmesh run: rcv1.train: ") || !strings.Contains(string(out), want) {
		t.Errorf("exit %d (%v), output:\n%s\nwant exit 2 and %q", code, err, out, want)
	}
}
