package cmd

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestSimulateOnSyntheticData(t *testing.T) {
	code, out, errOut := runMain("simulate", "--nodes", "8", "--iterations", "20", "--optimizer", "sgd",
		"--data", "synth:rows=4000,features=5000,scale=3,seed=2", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(errOut, "test data: synth:rows=4000,features=5000,perrow=20,zipf=1.1,scale=3,seed=2 (test split; the planted model scores accuracy 0.") {
		t.Errorf("stderr does not give the planted model's score:\n%s", errOut)
	}
	var rep struct {
		Dataset           string  `json:"dataset"`
		FinalTestAccuracy float64 `json:"final_test_accuracy"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Dataset != "synth:rows=4000,features=5000,perrow=20,zipf=1.1,scale=3,seed=2" {
		t.Errorf("dataset %q", rep.Dataset)
	}
	// 800 test rows: the mesh learns something of the planted model.
	if rep.FinalTestAccuracy < 0.6 {
		t.Errorf("final test accuracy %.3f, want above 0.6", rep.FinalTestAccuracy)
	}
}

func TestSyntheticDataRefusals(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--data", "synth:rows=10"}, "--data: synthetic data: rows and features are required"},
		{[]string{"--data", "synth:rows=10,features=10,perrow=11"}, "perrow 11"},
		{[]string{"--data", "synth:rows=10,features=100", "--test-data", "x.libsvm"}, "--test-data x.libsvm: synthetic data draws its own test split"},
		{[]string{"--data", "synth:rows=10,features=100", "--format", "criteo"}, "--format criteo: synthetic data has no file format"},
	} {
		code, _, errOut := runMain(append([]string{"simulate", "--nodes", "2", "--iterations", "1"}, c.args...)...)
		if code != 2 || !strings.Contains(errOut, c.want) || strings.Count(strings.TrimSpace(errOut), "\n") > 0 {
			t.Errorf("simulate %v: exit %d, stderr %q; want exit 2 and one line with %q", c.args, code, errOut, c.want)
		}
	}
}
