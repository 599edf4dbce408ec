package cmd

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sketchmesh/sketchmesh/dataset"
)

// a9aFiles writes the built-in a9a's splits as LIBSVM files, the training
// rows shuffled (a stream is only as shuffled as its buffer).
func a9aFiles(t *testing.T) (train, test string) {
	t.Helper()
	tr, te, err := dataset.Builtin("a9a")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	train, test = filepath.Join(dir, "a9a.train"), filepath.Join(dir, "a9a.test")
	ids := map[uint64]uint64{}
	for id := range tr.MaxFeature + 1 {
		ids[id] = id
	}
	writeRemapped(t, train, tr.Shuffled(3), ids)
	writeRemapped(t, test, te, ids)
	return train, test
}

// A streamed testnet trains to within a point of the same testnet on the
// loaded file, its per-node rows are the batches it drew, and its saved
// model scores the test file as node 0 did.
func TestStreamTrainsLikeLoadedData(t *testing.T) {
	train, test := a9aFiles(t)
	common := []string{"--json", "--nodes", "4", "--iterations", "150", "--batch", "100", "--hash-bits", "14", "--data", train, "--test-data", test}
	loaded := testnetAccuracy(t, common[1:]...)
	modelPath := filepath.Join(t.TempDir(), "stream.model")
	code, out, errOut := runMain(append([]string{"testnet", "--stream", "--shuffle-buffer", "2000", "--save-model", modelPath}, common...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rep struct {
		Accuracy float64          `json:"final_test_accuracy"`
		PerNode  []map[string]any `json:"per_node"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	t.Logf("streamed %.2f %%, loaded %.2f %%", 100*rep.Accuracy, 100*loaded)
	if math.Abs(rep.Accuracy-loaded) > 0.01 {
		t.Errorf("streamed: %.2f %%, loaded: %.2f %%", 100*rep.Accuracy, 100*loaded)
	}
	for i, n := range rep.PerNode {
		if n["train_rows"] != 150*100.0 {
			t.Errorf("node %d: %v train rows, want the 15000 of its batches", i, n["train_rows"])
		}
	}
	code, out, errOut = runMain("predict", "--model", modelPath, "--data", test, "--json")
	if code != 0 {
		t.Fatalf("predict: exit %d: %s", code, errOut)
	}
	var pred map[string]any
	json.Unmarshal([]byte(out), &pred)
	if pred["accuracy"] != rep.PerNode[0]["test_accuracy"] || pred["loss"] != rep.PerNode[0]["test_loss"] {
		t.Errorf("predict %v, node 0 %v", pred, rep.PerNode[0])
	}
}

// Without --test-data the file's first rows are the test rows, and the
// streams train on the rest: a run node and a testnet both train.
func TestStreamHoldsOutTheFirstRows(t *testing.T) {
	train, _ := a9aFiles(t)
	code, _, errOut := runMain("testnet", "--stream", "--nodes", "2", "--iterations", "20", "--hash-bits", "12", "--holdout-rows", "3000", "--data", train)
	if code != 0 || !strings.Contains(errOut, "(first 3000 rows held out)") && !strings.Contains(errOut, "3000 test rows") {
		t.Errorf("testnet: exit %d: %s", code, errOut)
	}
	code, out, errOut := runMain("run", "--stream", "--data", train, "--hash-bits", "12", "--shard", "2/3", "--iterations", "20",
		"--listen", "/ip4/127.0.0.1/tcp/0", "--json", "--log-level", "error")
	if code != 0 {
		t.Fatalf("run: exit %d: %s", code, errOut)
	}
	var rep runReport
	if err := json.Unmarshal([]byte(out[strings.LastIndex(strings.TrimSpace(out), "\n")+1:]), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Clock != 20 || rep.TestAccuracy < 0.75 {
		t.Errorf("run: %+v", rep)
	}
}

func TestStreamBadInput(t *testing.T) {
	train, _ := a9aFiles(t)
	dir := t.TempDir()
	// A malformed row far past the first buffer is found while training.
	late := filepath.Join(dir, "late.libsvm")
	data, _ := os.ReadFile(train)
	lines := strings.SplitAfter(string(data), "\n")
	lines[2000] = "1 3:1 2:1\n"
	os.WriteFile(late, []byte(strings.Join(lines, "")), 0o644)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"testnet", "--stream", "--data", train}, "--stream needs --hash-bits B"},
		{[]string{"testnet", "--stream", "--data", "a9a", "--hash-bits", "10"}, "a9a is a built-in set"},
		{[]string{"testnet", "--stream", "--data", train, "--hash-bits", "10", "--model", "softmax"}, "softmax needs its classes"},
		{[]string{"testnet", "--stream", "--data", train, "--hash-bits", "10", "--batch", "0.1"}, "--batch 0.1: a fraction of the rows, which a stream does not count"},
		{[]string{"testnet", "--stream", "--data", train, "--hash-bits", "10", "--shuffle-buffer", "0"}, "--shuffle-buffer 0"},
		{[]string{"testnet", "--stream", "--data", late, "--hash-bits", "10", "--holdout-rows", "100", "--shuffle-buffer", "10", "--batch", "50", "--iterations", "100", "--nodes", "2"},
			fmt.Sprintf("sketchmesh testnet: %s:2001: feature \"2:1\": indices are not strictly ascending", late)},
		{[]string{"run", "--stream", "--data", late, "--hash-bits", "10", "--holdout-rows", "100", "--shuffle-buffer", "10", "--batch", "50", "--iterations", "100",
			"--listen", "/ip4/127.0.0.1/tcp/0"}, fmt.Sprintf("sketchmesh run: %s:2001: feature \"2:1\"", late)},
	} {
		code, _, errOut := runMain(tc.args...)
		if code != 2 || !strings.Contains(errOut, tc.want) || strings.Count(errOut, "sketchmesh ") != 1 {
			t.Errorf("%v: exit %d, %q; want exit 2 and one line holding %q", tc.args, code, errOut, tc.want)
		}
	}
}
