package cmd

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testnetAndPredict trains a testnet that saves node 0's model, scores the
// test data with predict, and returns both JSON reports.
func testnetAndPredict(t *testing.T, testnetArgs []string, testData string) (node0 map[string]any, pred map[string]any, modelPath string) {
	t.Helper()
	modelPath = filepath.Join(t.TempDir(), "m.model")
	code, out, errOut := runMain(append([]string{"testnet", "--json", "--save-model", modelPath}, testnetArgs...)...)
	if code != 0 {
		t.Fatalf("testnet: exit %d: %s", code, errOut)
	}
	var rep struct {
		PerNode []map[string]any `json:"per_node"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = runMain("predict", "--model", modelPath, "--data", testData, "--json")
	if code != 0 {
		t.Fatalf("predict: exit %d: %s", code, errOut)
	}
	if err := json.Unmarshal([]byte(out), &pred); err != nil {
		t.Fatalf("predict's stdout is not one JSON object: %v\n%s", err, out)
	}
	return rep.PerNode[0], pred, modelPath
}

// A saved model reproduces node 0's test figures to the last digit.
func TestSaveModelThenPredictGivesNode0Figures(t *testing.T) {
	node0, pred, modelPath := testnetAndPredict(t, []string{"--nodes", "3", "--iterations", "20"}, "rcv1.test")
	if pred["accuracy"] != node0["test_accuracy"] || pred["log_loss"] != node0["test_loss"] || pred["loss"] != node0["test_loss"] {
		t.Errorf("predict accuracy %v log loss %v; node 0 test accuracy %v loss %v", pred["accuracy"], pred["log_loss"], node0["test_accuracy"], node0["test_loss"])
	}
	if pred["auc"] != node0["test_auc"] || pred["auc"] == nil {
		t.Errorf("predict AUC %v, node 0 %v", pred["auc"], node0["test_auc"])
	}
	if pred["rows"] != 249.0 || pred["macro_f1"] != nil || pred["rmse"] != nil {
		t.Errorf("predict report %v", pred)
	}

	// Scores to a file: one line per row, each a probability.
	out := filepath.Join(t.TempDir(), "scores.txt")
	code, stdout, errOut := runMain("predict", "--model", modelPath, "--data", "rcv1.test", "--out", out)
	if code != 0 || !strings.Contains(stdout, "249 rows of rcv1.test") {
		t.Fatalf("predict --out: exit %d: %s %s", code, stdout, errOut)
	}
	data, _ := os.ReadFile(out)
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(lines) != 249 || strings.ContainsAny(lines[0], "\t ") || lines[0] == "" {
		t.Errorf("%d score lines, first %q", len(lines), lines[0])
	}
}

// Softmax with hashed ids: predict applies the model's hashing, and the
// figures still match node 0's.
func TestHashedSoftmaxModelPredicts(t *testing.T) {
	digits := "../testnet/testdata/digits.libsvm.gz"
	node0, pred, modelPath := testnetAndPredict(t, []string{"--nodes", "2", "--iterations", "20", "--model", "softmax",
		"--data", digits, "--test-data", digits, "--hash-bits", "10", "--optimizer", "sgd", "--lr", "0.5"}, digits)
	if pred["accuracy"] != node0["test_accuracy"] || pred["log_loss"] != node0["test_loss"] || pred["macro_f1"] == nil || pred["auc"] != nil {
		t.Errorf("predict %v; node 0 %v", pred, node0)
	}
	code, out, errOut := runMain("export", "--model", modelPath, "--format", "json")
	if code != 0 {
		t.Fatalf("export: exit %d: %s", code, errOut)
	}
	var doc struct {
		Kind    string      `json:"kind"`
		Classes []float64   `json:"classes"`
		Weights [][]float64 `json:"weights"`
		Mapping struct {
			Dimension uint64 `json:"dimension"`
			HashBits  uint   `json:"hash_bits"`
			Hash      string `json:"hash"`
		} `json:"mapping"`
		Provenance struct {
			Settings map[string]string `json:"settings"`
			Data     []string          `json:"data"`
		} `json:"provenance"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Kind != "softmax" || len(doc.Classes) != 10 || len(doc.Weights) != 10 || len(doc.Weights[0]) != 1025 ||
		doc.Mapping.Dimension != 1024 || doc.Mapping.HashBits != 10 || doc.Mapping.Hash != "fnv1a64-fmix64" ||
		doc.Provenance.Settings["hash-bits"] != "10" || len(doc.Provenance.Data) != 2 {
		t.Errorf("export: kind %s, %d classes, %d blocks, mapping %+v, provenance %+v", doc.Kind, len(doc.Classes), len(doc.Weights), doc.Mapping, doc.Provenance)
	}
	code, out, _ = runMain("export", "--model", modelPath, "--format", "tsv")
	if first, _, _ := strings.Cut(out, "\n"); code != 0 || first != "class\tkey\tweight" {
		t.Errorf("TSV export: exit %d, first line %q", code, first)
	}
}

// Bad model files, bad formats and data that does not fit: one line, exit 2.
func TestPredictAndExportBadInput(t *testing.T) {
	dir := t.TempDir()
	modelPath := filepath.Join(dir, "m.model")
	if code, _, errOut := runMain("testnet", "--nodes", "1", "--iterations", "2", "--save-model", modelPath); code != 0 {
		t.Fatalf("testnet: %s", errOut)
	}
	good, err := os.ReadFile(modelPath)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	truncated := write("truncated.model", good[:len(good)/2])
	flipped := bytes.Clone(good)
	flipped[len(flipped)/2] ^= 1
	badSum := write("badsum.model", flipped)
	v2 := bytes.Clone(good)
	binary.BigEndian.PutUint32(v2[8:], 2)
	otherVersion := write("v2.model", v2)
	// Ids far above rcv1's dimension.
	foreign := write("foreign.libsvm", []byte("1 900000:1 900001:1\n-1 900002:1\n"))
	malformed := write("malformed.libsvm", []byte("1 1:1\n-1 2:x\n"))

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"predict", "--model", truncated, "--data", "rcv1.test"}, "truncated"},
		{[]string{"predict", "--model", badSum, "--data", "rcv1.test"}, "checksum mismatch"},
		{[]string{"predict", "--model", otherVersion, "--data", "rcv1.test"}, "format version 2, this build reads version 1"},
		{[]string{"predict", "--model", foreign, "--data", "rcv1.test"}, "bad magic"},
		{[]string{"predict", "--model", modelPath, "--data", foreign}, foreign + ":1: 3 of 3 non-zeros"},
		{[]string{"predict", "--model", modelPath, "--data", malformed}, malformed + `:2: feature "2:x"`},
		{[]string{"predict", "--model", modelPath, "--data", filepath.Join(dir, "missing")}, "no such file"},
		{[]string{"predict", "--data", "rcv1.test"}, "--model is required"},
		{[]string{"predict", "--model", modelPath}, "--data is required"},
		{[]string{"export", "--model", modelPath, "--format", "xml"}, `--format "xml": want one of json, tsv`},
		{[]string{"export", "--model", truncated}, "truncated"},
		{[]string{"testnet", "--save-model", modelPath, "--compare", "raw,sketchml"}, "--save-model saves one run's model"},
	} {
		code, out, errOut := runMain(c.args...)
		if code != 2 || out != "" || !strings.Contains(errOut, c.want) || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and one line naming %q", c.args, code, out, errOut, c.want)
		}
	}
	// A failed predict --out leaves no file behind.
	out := filepath.Join(dir, "scores.txt")
	if code, _, _ := runMain("predict", "--model", modelPath, "--data", malformed, "--out", out); code != 2 {
		t.Errorf("exit %d", code)
	}
	if entries, _ := filepath.Glob(filepath.Join(dir, "*scores*")); len(entries) != 0 {
		t.Errorf("a failed predict left %v", entries)
	}
}

// A run node saves its model at the end (and with its checkpoints), and
// its report carries the test AUC that predict reproduces.
func TestRunSavesModel(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	modelPath := filepath.Join(t.TempDir(), "run.model")
	var out, errb bytes.Buffer
	err := runRun(ctx, []string{"--data", "rcv1", "--listen", "/ip4/127.0.0.1/tcp/0", "--iterations", "20",
		"--checkpoint-every", "5", "--save-model", modelPath, "--json", "--log-level", "warn"}, &out, &errb)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, errb.String())
	}
	var rep map[string]any
	last := strings.TrimSpace(out.String())
	last = last[strings.LastIndex(last, "\n")+1:]
	if err := json.Unmarshal([]byte(last), &rep); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	code, pout, perr := runMain("predict", "--model", modelPath, "--data", "rcv1.test", "--json")
	if code != 0 {
		t.Fatalf("predict: %s", perr)
	}
	var pred map[string]any
	json.Unmarshal([]byte(pout), &pred)
	if rep["clock"] != 20.0 || rep["test_auc"] == nil || pred["auc"] != rep["test_auc"] || pred["accuracy"] != rep["test_accuracy"] || pred["loss"] != rep["test_loss"] {
		t.Errorf("run report %v; predict %v", rep, pred)
	}
}

// Criteo and VW files train, save and predict, reproducing node 0's figures.
// One step an exchange: with the default 8 on the VW sample's 600 rows (8
// exchanges of 2 nodes) node 0 ends anywhere from 79 to 94 % from one run
// to the next, with the arrival order; with one it ends at 85.8–85.9 %.
func TestCriteoAndVWTrainSavePredict(t *testing.T) {
	for _, c := range []struct{ format, path string }{
		{"criteo", "../dataset/testdata/criteo-sample.tsv.gz"},
		{"vw", "../dataset/testdata/vw-sample.txt.gz"},
	} {
		modelPath := filepath.Join(t.TempDir(), c.format+".model")
		code, out, errOut := runMain("testnet", "--json", "--nodes", "2", "--iterations", "60", "--local-steps", "1", "--format", c.format, "--hash-bits", "16",
			"--data", c.path, "--test-data", c.path, "--save-model", modelPath)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", c.format, code, errOut)
		}
		var rep struct {
			PerNode []map[string]any `json:"per_node"`
		}
		json.Unmarshal([]byte(out), &rep)
		code, out, errOut = runMain("predict", "--model", modelPath, "--format", c.format, "--data", c.path, "--json")
		if code != 0 {
			t.Fatalf("%s predict: %s", c.format, errOut)
		}
		var pred map[string]any
		json.Unmarshal([]byte(out), &pred)
		if pred["accuracy"] != rep.PerNode[0]["test_accuracy"] || pred["loss"] != rep.PerNode[0]["test_loss"] || pred["accuracy"].(float64) < 0.85 {
			t.Errorf("%s: predict %v, node 0 %v", c.format, pred, rep.PerNode[0])
		}
		bad := filepath.Join(t.TempDir(), "bad.txt")
		os.WriteFile(bad, []byte("1 a:1 b\n"), 0o644)
		code, _, errOut = runMain("predict", "--model", modelPath, "--format", c.format, "--data", bad)
		if code != 2 || !strings.Contains(errOut, bad+":1: ") {
			t.Errorf("%s: a malformed line: exit %d, %q", c.format, code, errOut)
		}
	}
	if code, _, errOut := runMain("testnet", "--format", "arff"); code != 2 || !strings.Contains(errOut, `--format "arff"`) {
		t.Errorf("unknown format: exit %d, %q", code, errOut)
	}
}
