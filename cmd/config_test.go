package cmd

import (
	"errors"
	"flag"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// configTestList is a repeatable flag for these tests.
type configTestList []string

func (l *configTestList) String() string     { return strings.Join(*l, ",") }
func (l *configTestList) Set(v string) error { *l = append(*l, v); return nil }

// testFlags is a flag set of every kind a config file sets.
type testFlags struct {
	fs           *flag.FlagSet
	data, mesh   string
	staleness    int
	lr           float64
	feedback     bool
	json         bool
	deadAfter    time.Duration
	iterations   uint64
	listen, join configTestList
	config       string
}

func newTestFlags() *testFlags {
	f := &testFlags{fs: flag.NewFlagSet("run", flag.ContinueOnError)}
	f.fs.SetOutput(io.Discard)
	f.fs.StringVar(&f.config, "config", "", "config file")
	f.fs.StringVar(&f.data, "data", "", "data")
	f.fs.StringVar(&f.mesh, "mesh", "sketchmesh", "mesh name")
	f.fs.IntVar(&f.staleness, "staleness", 2, "staleness")
	f.fs.Float64Var(&f.lr, "lr", 0.02, "learning rate")
	f.fs.BoolVar(&f.feedback, "error-feedback", true, "error feedback")
	f.fs.BoolVar(&f.json, "json", false, "json")
	f.fs.DurationVar(&f.deadAfter, "dead-after", 5*time.Second, "dead after")
	f.fs.Uint64Var(&f.iterations, "iterations", 0, "iterations")
	f.fs.Var(&f.listen, "listen", "listen, repeatable")
	f.fs.Var(&f.join, "join", "join, repeatable")
	return f
}

// writeConfig writes text as a config file and returns its path.
func writeConfig(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "node.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestConfigFileFlagsWin(t *testing.T) {
	path := writeConfig(t, `
data: site-a.libsvm
mesh: from-file
staleness: 5
lr: 1e-3
error-feedback: false
json: true
dead-after: 30s
iterations: 0x10
listen:
  - /ip4/0.0.0.0/tcp/4001
  - /ip4/0.0.0.0/udp/4001/quic-v1
join:
  - /ip4/192.0.2.1/tcp/4001
`)
	f := newTestFlags()
	if err := f.fs.Parse([]string{"--mesh", "from-flags", "--staleness=0", "--join", "/ip4/192.0.2.9/tcp/1", "--config", path}); err != nil {
		t.Fatal(err)
	}
	if err := applyConfigFile(f.fs, path); err != nil {
		t.Fatal(err)
	}
	switch {
	case f.data != "site-a.libsvm", f.lr != 1e-3, f.feedback, !f.json, f.deadAfter != 30*time.Second, f.iterations != 16:
		t.Fatalf("values from the file not applied: %+v", f)
	case f.mesh != "from-flags", f.staleness != 0:
		t.Fatalf("the file overrode flags: mesh %q, staleness %d", f.mesh, f.staleness)
	case !slices.Equal(f.listen, configTestList{"/ip4/0.0.0.0/tcp/4001", "/ip4/0.0.0.0/udp/4001/quic-v1"}):
		t.Fatalf("listen %v", f.listen)
	case !slices.Equal(f.join, configTestList{"/ip4/192.0.2.9/tcp/1"}):
		t.Fatalf("join %v, want only the command line's", f.join)
	}
	// What the file set counts as set, like a flag.
	var set []string
	f.fs.Visit(func(fl *flag.Flag) { set = append(set, fl.Name) })
	if !slices.Contains(set, "lr") || slices.Contains(set, "l2") {
		t.Fatalf("set flags %v", set)
	}
}

func TestConfigFileEmpty(t *testing.T) {
	for _, text := range []string{"", "# only a comment\n", "---\n", "~\n", "{}\n"} {
		f := newTestFlags()
		if err := applyConfigFile(f.fs, writeConfig(t, text)); err != nil {
			t.Fatalf("%q: %v", text, err)
		}
		n := 0
		f.fs.Visit(func(*flag.Flag) { n++ })
		if n != 0 {
			t.Fatalf("%q set %d flags", text, n)
		}
	}
}

func TestConfigFileErrors(t *testing.T) {
	cases := []struct {
		name, text, want string
	}{
		{"unknown key", "data: x\nlisten-addr: /ip4/0.0.0.0/tcp/1\n", `line 2: unknown setting "listen-addr" (not a flag of this command)`},
		{"dashes", "--data: x\n", `line 1: unknown setting "--data" (write flag names without dashes)`},
		{"bad int", "staleness: two\n", `line 1: staleness: invalid value "two"`},
		{"bad duration", "dead-after: 30\n", `line 1: dead-after: invalid value "30"`},
		{"bool as word", "json: yes\n", `line 1: json: want true or false, not "yes"`},
		{"bool quoted", "json: \"true\"\n", `json: want true or false, not "true"`},
		{"bool as number", "json: 1\n", `json: want true or false, not "1"`},
		{"list for a single flag", "mesh:\n  - a\n  - b\n", "line 2: mesh: takes one value, not a list"},
		{"mapping", "data:\n  file: x\n", "line 2: data: want a value or a list of values, not a mapping"},
		{"nested list item", "listen:\n  - [a, b]\n", "line 2: listen: a list item must be a single value"},
		{"bad list item", "listen:\n  - ok\n  - ~\n", "line 3: listen: has no value"},
		{"bad value in list", "iterations: 3\nstaleness:\n  - 1\n", "line 3: staleness: takes one value"},
		{"null", "data:\n", "line 1: data: has no value"},
		{"twice", "data: a\nmesh: m\ndata: b\n", "line 3: data is already set on line 1"},
		{"config", "config: other.yaml\n", "line 1: a config file cannot name another config file"},
		{"not a mapping", "- data\n- mesh\n", "line 1: want a mapping of flag names to values"},
		{"scalar", "data\n", "want a mapping of flag names to values"},
		{"syntax", "data: [x\n", "yaml:"},
		{"tab indent", "listen:\n\t- a\n", "yaml:"},
		{"two documents", "data: a\n---\ndata: b\n", "holds more than one YAML document"},
		{"list key", "[a]: 1\n", "line 1: a key must be a flag name"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := writeConfig(t, c.text)
			err := applyConfigFile(newTestFlags().fs, path)
			if err == nil {
				t.Fatal("accepted")
			}
			if !errors.As(err, new(usageError)) {
				t.Fatalf("error %v is not bad input", err)
			}
			if !strings.Contains(err.Error(), "config file "+path) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q, want it to name %s and contain %q", err, path, c.want)
			}
		})
	}
}

func TestConfigFileErrorOnSetFlagStillChecked(t *testing.T) {
	// A key of a flag given on the command line is not applied, but it
	// must still be a flag and have a well-formed value.
	f := newTestFlags()
	if err := f.fs.Parse([]string{"--json"}); err != nil {
		t.Fatal(err)
	}
	if err := applyConfigFile(f.fs, writeConfig(t, "json: maybe\n")); err == nil {
		t.Fatal("a malformed value of a flag set on the command line was accepted")
	}
}

func TestConfigFileMissing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "absent.yaml")
	err := applyConfigFile(newTestFlags().fs, path)
	if !errors.Is(err, fs.ErrNotExist) || !errors.As(err, new(usageError)) || !strings.Contains(err.Error(), path) {
		t.Fatalf("error %v, want bad input naming %s, fs.ErrNotExist", err, path)
	}
}

func TestConfigFileAliases(t *testing.T) {
	f := newTestFlags()
	path := writeConfig(t, "data: &d shared.libsvm\nmesh: *d\nlisten: &l [a, b]\njoin: *l\n")
	if err := applyConfigFile(f.fs, path); err != nil {
		t.Fatal(err)
	}
	if f.mesh != "shared.libsvm" || !slices.Equal(f.join, configTestList{"a", "b"}) {
		t.Fatalf("mesh %q, join %v", f.mesh, f.join)
	}
}

// exampleFlagSet is the run command's own flag set.
func exampleFlagSet() *flag.FlagSet {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	new(runFlags).register(fs)
	return fs
}

// commentedKey matches a commented-out setting in the example: "# key: value".
var commentedKey = regexp.MustCompile(`^# ([a-z][a-z0-9-]*):( |$)`)

func TestExampleConfig(t *testing.T) {
	const path = "../docs/node.example.yaml"
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// As it is.
	fs := exampleFlagSet()
	if err := applyConfigFile(fs, path); err != nil {
		t.Fatal(err)
	}
	if got := fs.Lookup("listen").Value.String(); got != "/ip4/0.0.0.0/tcp/4001,/ip4/0.0.0.0/udp/4001/quic-v1" {
		t.Fatalf("listen %q", got)
	}
	// With every commented-out setting in too: each must be valid, and
	// together with the active ones they must document every flag, each
	// under a comment of its own.
	lines := strings.Split(string(data), "\n")
	documented := map[string]bool{}
	for i, line := range lines {
		m := commentedKey.FindStringSubmatch(line)
		if m != nil {
			lines[i] = strings.TrimPrefix(line, "# ")
		} else if m = regexp.MustCompile(`^([a-z][a-z0-9-]*):`).FindStringSubmatch(line); m == nil {
			continue
		}
		if documented[m[1]] {
			t.Fatalf("line %d: %s documented twice", i+1, m[1])
		}
		documented[m[1]] = true
		if i == 0 || !strings.HasPrefix(lines[i-1], "# ") || commentedKey.MatchString(lines[i-1]) {
			t.Fatalf("line %d: %s has no comment of its own above it", i+1, m[1])
		}
	}
	all := filepath.Join(t.TempDir(), "all.yaml")
	if err := os.WriteFile(all, []byte(strings.Join(lines, "\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := applyConfigFile(exampleFlagSet(), all); err != nil {
		t.Fatalf("with the commented-out settings in: %v", err)
	}
	exampleFlagSet().VisitAll(func(f *flag.Flag) {
		if !documented[f.Name] && f.Name != "config" {
			t.Errorf("the example does not document --%s", f.Name)
		}
	})
}
