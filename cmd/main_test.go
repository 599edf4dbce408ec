package cmd

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func runMain(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = Main(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestTestnetJSONReport(t *testing.T) {
	code, out, errOut := runMain("testnet", "--nodes", "3", "--iterations", "10", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rep map[string]any
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("stdout is not one JSON document: %v\n%s", err, out)
	}
	for _, field := range []string{"nodes", "model", "dataset", "iterations", "wall_seconds", "final_test_loss",
		"final_test_accuracy", "final_test_auc", "bytes_sent_total", "bytes_sent_per_node_per_iteration", "per_node", "codec", "compression_ratio"} {
		if _, ok := rep[field]; !ok {
			t.Errorf("report lacks %q", field)
		}
	}
	if rep["nodes"].(float64) != 3 || rep["iterations"].(float64) != 10 || rep["dataset"] != "rcv1.train" {
		t.Errorf("report = nodes %v iterations %v dataset %v", rep["nodes"], rep["iterations"], rep["dataset"])
	}
	perNode := rep["per_node"].([]any)
	if len(perNode) != 3 {
		t.Fatalf("per_node has %d entries", len(perNode))
	}
	if _, ok := perNode[0].(map[string]any)["test_accuracy"]; !ok {
		t.Error("per_node entry lacks test_accuracy")
	}
	if !strings.Contains(errOut, "iter   10/10") {
		t.Errorf("no progress line on stderr:\n%s", errOut)
	}
}

func TestTestnetTable(t *testing.T) {
	code, out, errOut := runMain("testnet", "--nodes", "2", "--iterations", "5", "--data", "a9a")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"test acc", "2 nodes, lr, a9a.train", "final test accuracy"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
}

func TestTestnetHoldsOutTestRowsFromAFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tiny.libsvm.gz")
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	for i := 0; i < 50; i++ {
		if i%2 == 0 {
			zw.Write([]byte("+1 1:1 3:0.5\n"))
		} else {
			zw.Write([]byte("-1 2:1 3:-0.5\n"))
		}
	}
	zw.Close()
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runMain("testnet", "--nodes", "2", "--iterations", "20", "--data", path, "--json", "--optimizer", "sgd", "--lr", "1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rep struct {
		TestDataset string  `json:"test_dataset"`
		Accuracy    float64 `json:"final_test_accuracy"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(rep.TestDataset, "held out") || rep.Accuracy != 1 {
		t.Fatalf("test set %q, accuracy %v; want a held-out split learned perfectly", rep.TestDataset, rep.Accuracy)
	}
}

// Bad input: one line on stderr naming the cause, exit 2, nothing on stdout.
func TestTestnetBadInput(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.libsvm")
	if err := os.WriteFile(bad, []byte("+1 1:1\n-1 2:x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--model", "tree"}, `--model "tree"`},
		{[]string{"--optimizer", "lbfgs"}, `--optimizer "lbfgs"`},
		{[]string{"--codec", "nope"}, `--codec "nope"`},
		{[]string{"--sites", "on"}, `--sites "on"`},
		{[]string{"--nodes", "0"}, "--nodes 0"},
		{[]string{"--lr", "-1"}, "--lr -1"},
		{[]string{"--batch", "2.5"}, "--batch 2.5"},
		{[]string{"--iterations", "0"}, "--iterations 0"},
		{[]string{"--data", filepath.Join(dir, "missing.libsvm")}, "missing.libsvm"},
		{[]string{"--data", bad}, "bad.libsvm:2"},
		{[]string{"--nodes", "abc"}, "invalid value"},
		{[]string{"--frobnicate"}, "not defined"},
		{[]string{"extra"}, `unexpected argument "extra"`},
	}
	for _, c := range cases {
		code, out, errOut := runMain(append([]string{"testnet"}, c.args...)...)
		if code != 2 {
			t.Errorf("%v: exit %d, want 2 (stderr %q)", c.args, code, errOut)
		}
		if out != "" {
			t.Errorf("%v: wrote to stdout: %q", c.args, out)
		}
		if !strings.Contains(errOut, c.want) {
			t.Errorf("%v: stderr %q does not name %q", c.args, errOut, c.want)
		}
	}
}

func TestUnknownCommand(t *testing.T) {
	if code, _, errOut := runMain("frob"); code != 2 || !strings.Contains(errOut, `unknown command "frob"`) {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	if code, _, errOut := runMain(); code != 2 || !strings.Contains(errOut, "testnet") {
		t.Fatalf("no-argument usage: exit %d, stderr %q", code, errOut)
	}
}

func TestTopologyJSON(t *testing.T) {
	code, out, errOut := runMain("topology", "--nodes", "100", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var r struct {
		Nodes        int  `json:"nodes"`
		Connected    bool `json:"connected"`
		Diameter     int  `json:"diameter"`
		OutDegreeMax int  `json:"out_degree_max"`
		Messages     int  `json:"messages_per_iteration"`
		FullMessages int  `json:"full_mesh_messages_per_iteration"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	// ⌈log2 100⌉ = 7: degree at most 8, diameter at most 8.
	if r.Nodes != 100 || !r.Connected || r.Diameter > 8 || r.OutDegreeMax > 8 || r.FullMessages != 9900 || r.Messages >= r.FullMessages {
		t.Fatalf("report %+v", r)
	}
	if code, _, errOut := runMain("topology", "--nodes", "0"); code != 2 || !strings.Contains(errOut, "--nodes 0") {
		t.Fatalf("--nodes 0: exit %d, stderr %q", code, errOut)
	}
	code, out, errOut = runMain("topology", "--nodes", "60", "--sites", "3", "--json")
	type report struct {
		Sites        int     `json:"sites"`
		Construction string  `json:"construction"`
		Deliveries   int     `json:"update_deliveries_per_iteration"`
		InterSite    float64 `json:"inter_site_links_per_update"`
		WorstPath    int     `json:"inter_site_hops_max"`
	}
	var both struct{ Sites, Flat report }
	err := json.Unmarshal([]byte(out), &both)
	if s := both.Sites; code != 0 || err != nil || s.Sites != 3 || s.Construction != "sites" || s.Deliveries != 60*59 || s.InterSite != 2 || s.WorstPath != 1 ||
		both.Flat.Construction != "halton" || both.Flat.InterSite <= 2 || both.Flat.WorstPath < 2 {
		t.Fatalf("--sites 3: exit %d, %+v, %v, stderr %q", code, both, err, errOut)
	}
	if code, _, errOut := runMain("topology", "--nodes", "8", "--sites", "9"); code != 2 || !strings.Contains(errOut, "--sites 9") {
		t.Fatalf("--sites 9: exit %d, stderr %q", code, errOut)
	}
}

func TestSimulateJSONAndReplay(t *testing.T) {
	// One step an exchange: the script counts exchanges, and the default
	// would take 7 steps each over geo3, leaving its steps unreached.
	args := []string{"simulate", "--nodes", "12", "--iterations", "45", "--wan", "geo3,loss=0.01", "--seed", "5", "--local-steps", "1",
		"--faults", "../sim/testdata/scenarios/faults.txt", "--json"}
	code, out, errOut := runMain(args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rep map[string]any
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"nodes", "iterations", "seed", "trace_hash", "wall_seconds", "simulated_seconds", "node_iterations_per_second",
		"final_test_accuracy", "final_test_auc", "final_test_loss", "staleness_observed_max", "messages_per_node_per_iteration", "bytes_per_node_per_iteration", "view_digests_compared"} {
		if _, ok := rep[f]; !ok {
			t.Errorf("report lacks %q", f)
		}
	}
	inv := rep["invariants"].(map[string]any)
	if _, ok := inv["view_divergence"]; inv["ok"] != true || !ok {
		t.Fatalf("invariants %v", inv)
	}
	_, again, _ := runMain(args...)
	var rep2 map[string]any
	if err := json.Unmarshal([]byte(again), &rep2); err != nil {
		t.Fatal(err)
	}
	if rep["trace_hash"] != rep2["trace_hash"] {
		t.Fatalf("same seed, trace hashes %v and %v", rep["trace_hash"], rep2["trace_hash"])
	}
}

// A simulate run that goes quiet for simulateStatusEvery prints a status
// line: cores built while it starts, then the slowest and fastest clocks.
func TestSimulateStatusLines(t *testing.T) {
	defer func(every time.Duration) { simulateStatusEvery = every }(simulateStatusEvery)
	simulateStatusEvery = 0
	code, _, errOut := runMain("simulate", "--nodes", "70", "--iterations", "3", "--hash-bits", "12")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"building cores 64/70  wall ", "running  iterations 0 to ", "  live 70  sent ", " (membership "} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	if strings.Contains(errOut, "building cores 70/") {
		t.Errorf("a status line counts all the cores as still building:\n%s", errOut)
	}
}

func TestSimulateBadInput(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "bad.txt")
	if err := os.WriteFile(script, []byte("at 3: kill 1\nat five: heal\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--faults", filepath.Join(dir, "missing.txt")}, "missing.txt"},
		{[]string{"--faults", script}, "bad.txt:2"},
		{[]string{"--wan", "geo4"}, "geo4"},
		{[]string{"--nodes", "0"}, "--nodes 0"},
		{[]string{"--topology", "ring"}, `--topology "ring"`},
		{[]string{"--sites", "geo"}, `--sites "geo"`},
	}
	for _, c := range cases {
		code, out, errOut := runMain(append([]string{"simulate"}, c.args...)...)
		if code != 2 || out != "" || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 naming %q", c.args, code, out, errOut, c.want)
		}
	}
}
