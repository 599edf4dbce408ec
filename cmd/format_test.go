package cmd

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Without --format the format is detected: Criteo and VW samples train and
// predict as with --format, LIBSVM and built-in sets as before.
func TestFormatDetected(t *testing.T) {
	for _, path := range []string{"../dataset/testdata/criteo-sample.tsv.gz", "../dataset/testdata/vw-sample.txt.gz"} {
		modelPath := filepath.Join(t.TempDir(), "m.model")
		code, out, errOut := runMain("testnet", "--json", "--nodes", "2", "--iterations", "20", "--hash-bits", "16",
			"--data", path, "--test-data", path, "--save-model", modelPath)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", path, code, errOut)
		}
		var rep struct {
			PerNode []map[string]any `json:"per_node"`
		}
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatal(err)
		}
		code, out, errOut = runMain("predict", "--model", modelPath, "--data", path, "--json")
		if code != 0 {
			t.Fatalf("%s predict: exit %d: %s", path, code, errOut)
		}
		var pred map[string]any
		if err := json.Unmarshal([]byte(out), &pred); err != nil {
			t.Fatal(err)
		}
		if pred["loss"] != rep.PerNode[0]["test_loss"] {
			t.Errorf("%s: predict loss %v, node 0 %v", path, pred["loss"], rep.PerNode[0]["test_loss"])
		}
	}
}

// What detection cannot decide is bad input, in one line, exit 2.
func TestFormatDetectionBadInput(t *testing.T) {
	dir := t.TempDir()
	ambiguous := filepath.Join(dir, "ambiguous.tsv")
	os.WriteFile(ambiguous, []byte("0"+strings.Repeat("\t", 39)+"\n1"+strings.Repeat("\t", 39)+"\n"), 0o644)
	csv := filepath.Join(dir, "data.csv")
	os.WriteFile(csv, []byte("1,2,3\n4,5,6\n"), 0o644)
	unhashed := filepath.Join(dir, "unhashed.model")
	if code, _, errOut := runMain("testnet", "--nodes", "1", "--iterations", "2", "--save-model", unhashed); code != 0 {
		t.Fatalf("testnet: %s", errOut)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"predict", "--model", unhashed, "--data", "../dataset/testdata/vw-sample.txt.gz"}, "reads as vw, whose features are strings that must be hashed, and the model was trained without --hash-bits"},
		{[]string{"predict", "--model", unhashed, "--data", "rcv1.test", "--format", "arff"}, `--format "arff": want auto, libsvm, criteo or vw`},
		{[]string{"predict", "--model", unhashed, "--data", ambiguous}, "the format is ambiguous"},
		{[]string{"testnet", "--data", ambiguous}, ambiguous + ": the format is ambiguous: its first lines read as libsvm and criteo; give --format libsvm, criteo or vw"},
		{[]string{"testnet", "--data", csv}, csv + ": the data is in none of the formats libsvm, criteo, vw: not libsvm (line 1: "},
		{[]string{"testnet", "--data", "../dataset/testdata/criteo-sample.tsv.gz"}, "reads as criteo, whose features are strings and must be hashed; give --hash-bits B"},
		{[]string{"run", "--data", "../dataset/testdata/vw-sample.txt.gz"}, "reads as vw, whose features are strings and must be hashed"},
		{[]string{"simulate", "--data", csv}, "none of the formats"},
	} {
		code, _, errOut := runMain(tc.args...)
		if code != 2 || !strings.Contains(errOut, tc.want) || strings.Count(errOut, "sketchmesh ") != 1 {
			t.Errorf("%v: exit %d, %q; want exit 2 and one line holding %q", tc.args, code, errOut, tc.want)
		}
	}
}
