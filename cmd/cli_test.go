package cmd

import (
	"flag"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sketchmesh/sketchmesh/mesh"
)

// The shared training flags have one default and one meaning in run,
// testnet and simulate.
func TestSharedTrainingFlags(t *testing.T) {
	sets := map[string]*flag.FlagSet{}
	var rf runFlags
	sets["run"] = flag.NewFlagSet("run", flag.ContinueOnError)
	rf.register(sets["run"])
	var tf testnetFlags
	sets["testnet"] = flag.NewFlagSet("testnet", flag.ContinueOnError)
	tf.register(sets["testnet"])
	for _, name := range []string{"optimizer", "lr", "batch", "eval-every", "log-level"} {
		want := sets["testnet"].Lookup(name)
		if want == nil {
			t.Fatalf("testnet has no --%s", name)
		}
		got := sets["run"].Lookup(name)
		if got == nil || got.DefValue != want.DefValue || !strings.HasPrefix(got.Usage, want.Usage) {
			t.Errorf("--%s: run %+v, testnet %+v", name, got, want)
		}
	}
	// simulate registers its flags inside its command: read its help.
	code, _, help := runMain("simulate", "--help")
	if code != 0 {
		t.Fatalf("simulate --help: exit %d", code)
	}
	for _, name := range []string{"optimizer", "lr", "batch", "eval-every", "log-level"} {
		fl := sets["testnet"].Lookup(name)
		if !strings.Contains(help, "--"+name) || (fl.DefValue != "0" && !strings.Contains(help, fl.DefValue)) {
			t.Errorf("simulate --help lacks --%s with default %s", name, fl.DefValue)
		}
	}
}

// --help lists the flags in groups, every flag in one of them.
func TestHelpGroupsFlags(t *testing.T) {
	for _, cmd := range []string{"run", "testnet", "simulate"} {
		code, _, help := runMain(cmd, "--help")
		if code != 0 {
			t.Fatalf("%s --help: exit %d", cmd, code)
		}
		var groups []string
		for _, m := range regexp.MustCompile(`(?m)^([A-Z][a-z ]+):$`).FindAllStringSubmatch(help, -1) {
			groups = append(groups, m[1])
		}
		if strings.Contains(help, "\nOther:\n") {
			t.Errorf("%s: flags outside every group:\n%s", cmd, help[strings.Index(help, "\nOther:\n"):])
		}
		if len(groups) < 3 || groups[0] != "Data and model" || groups[1] != "Training" {
			t.Errorf("%s --help groups: %v", cmd, groups)
		}
	}
	code, _, help := runMain("run", "--help")
	if code != 0 || !strings.Contains(help, "a value given to a joiner must match it") {
		t.Errorf("run --help does not say that an explicit mesh-wide value must match")
	}
}

// A bad flag value is one line that points at --help, and exit 2.
func TestBadFlagValueIsOneLine(t *testing.T) {
	for _, args := range [][]string{
		{"testnet", "--lr", "fast"},
		{"run", "--iterations", "-3"},
		{"simulate", "--nodes", "many"},
		{"testnet", "--no-such-flag"},
	} {
		code, out, errOut := runMain(args...)
		lines := strings.Split(strings.TrimSpace(errOut), "\n")
		if code != 2 || out != "" || len(lines) != 1 || !strings.HasSuffix(lines[0], "(see --help)") || !strings.Contains(lines[0], "--") {
			t.Errorf("%v: exit %d, stderr:\n%s", args, code, errOut)
		}
	}
}

// version names the module version, the commit (unknown when the build
// did not stamp it, as with -buildvcs=false) and the Go version.
func TestVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	code, out, errOut := runBinary(t, "version")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 3 || !strings.HasPrefix(lines[0], "sketchmesh ") || !strings.HasPrefix(lines[1], "commit ") ||
		!strings.HasPrefix(lines[2], "go1.") {
		t.Errorf("version: exit %d\n%s%s", code, out, errOut)
	}
}

// libp2p's dial errors list one line per address; the command's error
// holds them on one line.
func TestJoinErrorIsOneLine(t *testing.T) {
	code, _, errOut := runMain("run", "--data", "rcv1", "--listen", "/ip4/127.0.0.1/tcp/0", "--log-level", "error",
		"--join", "/ip4/127.0.0.1/tcp/1/p2p/12D3KooWAk8VbAEPjZhviPdyHXuiVshTFVFtDL6XtpxSgjjkm3yJ",
		"--join", "/ip4/127.0.0.1/tcp/2/p2p/12D3KooWAk8VbAEPjZhviPdyHXuiVshTFVFtDL6XtpxSgjjkm3yJ")
	if code != 1 || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, "no --join member could be reached") {
		t.Errorf("exit %d, stderr:\n%s", code, errOut)
	}
}

// --relay-window takes auto (the default) or a duration, and prints what
// it holds.
func TestRelayWindowFlag(t *testing.T) {
	w := mesh.AutoRelayWindow
	v := relayWindowFlag{&w}
	if v.String() != "auto" {
		t.Errorf("default prints %q, want auto", v.String())
	}
	if err := v.Set("12ms"); err != nil || w != 12*time.Millisecond || v.String() != "12ms" {
		t.Errorf("Set(12ms): err %v, window %v, prints %q", err, w, v.String())
	}
	if err := v.Set("0"); err != nil || w != 0 {
		t.Errorf("Set(0): err %v, window %v", err, w)
	}
	if err := v.Set("auto"); err != nil || w != mesh.AutoRelayWindow {
		t.Errorf("Set(auto): err %v, window %v", err, w)
	}
	if err := v.Set("-1ns"); err == nil || w != mesh.AutoRelayWindow {
		t.Errorf("Set(-1ns): err %v, window %v; want an error and no change", err, w)
	}
}
