package cmd

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// An attack run prints the attack's figures in its JSON report.
func TestTestnetAttackJSON(t *testing.T) {
	code, out, errOut := runMain("testnet", "--nodes", "3", "--iterations", "10", "--attack", "headers", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rep struct {
		Attack map[string]any `json:"attack"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("stdout is not one JSON document: %v\n%s", err, out)
	}
	for _, field := range []string{"kind", "tried", "rejected", "applied_invalid", "honest_accuracy", "baseline_accuracy", "peak_heap_bytes"} {
		if _, ok := rep.Attack[field]; !ok {
			t.Errorf("attack report lacks %q: %v", field, rep.Attack)
		}
	}
	if rep.Attack["kind"] != "headers" || rep.Attack["applied_invalid"].(float64) != 0 {
		t.Errorf("attack report %v", rep.Attack)
	}
}

// A signed private testnet with allow lists trains as usual; bad security
// flags are refused with their cause.
func TestTestnetSecurityFlags(t *testing.T) {
	key := filepath.Join(t.TempDir(), "swarm.key")
	if err := os.WriteFile(key, []byte("/key/swarm/psk/1.0.0/\n/base16/\n"+strings.Repeat("0f", 32)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runMain("testnet", "--nodes", "3", "--iterations", "5", "--sign", "--psk", key, "--allow-list", "--robust", "clip")
	if code != 0 || !strings.Contains(out, "final test accuracy") {
		t.Fatalf("exit %d: %s\n%s", code, errOut, out)
	}
	bad := filepath.Join(t.TempDir(), "bad.key")
	if err := os.WriteFile(bad, []byte("not a key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--attack", "tickle"}, `--attack "tickle"`},
		{[]string{"--robust", "median"}, `--robust "median"`},
		{[]string{"--psk", bad}, "--psk"},
		{[]string{"--psk", filepath.Join(t.TempDir(), "missing.key")}, "missing.key"},
		{[]string{"--attack", "nan", "--compare", "raw,sketchml"}, "--attack cannot be combined"},
	} {
		code, out, errOut := runMain(append([]string{"testnet"}, c.args...)...)
		if code != 2 || out != "" || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 naming %q", c.args, code, out, errOut, c.want)
		}
	}
}
