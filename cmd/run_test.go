package cmd

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sketchmesh/sketchmesh/checkpoint"
)

// Bad input to run gives one clear error naming the cause, before any
// training, and a corrupt checkpoint is left as it was.
func TestRunBadInput(t *testing.T) {
	dir := t.TempDir()
	looseKey := filepath.Join(dir, "loose.key")
	if code, _, errOut := runMain("run", "--data", "rcv1", "--key", looseKey, "--listen", "/ip4/127.0.0.1/tcp/0", "--iterations", "1"); code != 0 {
		t.Fatalf("a first run that creates its key failed: %s", errOut)
	}
	if err := os.Chmod(looseKey, 0o644); err != nil {
		t.Fatal(err)
	}
	corrupt := filepath.Join(dir, "corrupt")
	if err := os.MkdirAll(corrupt, 0o700); err != nil {
		t.Fatal(err)
	}
	garbage := []byte("SKMCKPT\nnot a checkpoint at all")
	if err := os.WriteFile(filepath.Join(corrupt, checkpoint.FileName), garbage, 0o600); err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(dir, "good.key")
	local := "/ip4/127.0.0.1/tcp/0"
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no data", []string{"--listen", local}, 2, "--data is required"},
		{"join not a multiaddr", []string{"--data", "rcv1", "--join", "10.0.0.1:4001"}, 2, `--join "10.0.0.1:4001" is not a multiaddr`},
		{"join without peer id", []string{"--data", "rcv1", "--join", "/ip4/127.0.0.1/tcp/4001"}, 2, "has no /p2p/<peer id> part"},
		{"member unreachable", []string{"--data", "rcv1", "--listen", local, "--join", "/ip4/127.0.0.1/tcp/1/p2p/12D3KooWAk8VbAEPjZhviPdyHXuiVshTFVFtDL6XtpxSgjjkm3yJ"}, 1, "no --join member could be reached"},
		{"key readable by others", []string{"--data", "rcv1", "--listen", local, "--key", looseKey}, 2, "mode 0644"},
		{"corrupt checkpoint", []string{"--data", "rcv1", "--listen", local, "--key", good, "--checkpoint-dir", corrupt}, 1, "corrupt checkpoint"},
		{"checkpoint without key", []string{"--data", "rcv1", "--checkpoint-dir", corrupt}, 2, "--checkpoint-dir needs --key"},
		{"bad listen", []string{"--data", "rcv1", "--listen", "tcp://0.0.0.0:4001"}, 2, "--listen"},
		{"bad shard", []string{"--data", "rcv1", "--shard", "4/3"}, 2, "--shard"},
		{"bad mesh name", []string{"--data", "rcv1", "--mesh", "a/b"}, 2, "--mesh"},
		{"bad sites mode", []string{"--data", "rcv1", "--sites", "yes"}, 2, `--sites "yes"`},
	}
	for _, c := range cases {
		code, _, errOut := runMain(append([]string{"run"}, c.args...)...)
		if code != c.code || !strings.Contains(errOut, c.want) {
			t.Errorf("%s: exit %d, stderr:\n%s\nwant exit %d and %q", c.name, code, errOut, c.code, c.want)
		}
	}
	after, err := os.ReadFile(filepath.Join(corrupt, checkpoint.FileName))
	if err != nil || !bytes.Equal(after, garbage) {
		t.Errorf("the corrupt checkpoint was touched: %q, %v", after, err)
	}
}

// A checkpoint written by one key is refused under another.
func TestRunRefusesForeignCheckpoint(t *testing.T) {
	dir := t.TempDir()
	ck := filepath.Join(dir, "ck")
	args := func(key string) []string {
		return []string{"run", "--data", "rcv1", "--listen", "/ip4/127.0.0.1/tcp/0", "--iterations", "3",
			"--key", filepath.Join(dir, key), "--checkpoint-dir", ck}
	}
	if code, _, errOut := runMain(args("a.key")...); code != 0 {
		t.Fatalf("first run: %s", errOut)
	}
	if _, err := checkpoint.Load(ck); err != nil {
		t.Fatalf("no checkpoint after the run: %v", err)
	}
	code, _, errOut := runMain(args("b.key")...)
	if code != 2 || !strings.Contains(errOut, "holds the checkpoint of peer") {
		t.Errorf("foreign checkpoint: exit %d, stderr:\n%s", code, errOut)
	}
	// The owner resumes from it.
	code, out, errOut := runMain(append(args("a.key"), "--json")...)
	if code != 0 || !strings.Contains(out, `"resumed_from_checkpoint":true`) {
		t.Errorf("resume: exit %d\n%s\n%s", code, out, errOut)
	}
}

// Two nodes never share a checkpoint directory: the second is refused
// before it starts, with the holder's name.
func TestRunRefusesLockedCheckpointDir(t *testing.T) {
	ck := filepath.Join(t.TempDir(), "ck")
	release, err := checkpoint.Lock(ck)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	code, _, errOut := runMain("run", "--data", "rcv1", "--listen", "/ip4/127.0.0.1/tcp/0", "--iterations", "3",
		"--key", filepath.Join(t.TempDir(), "node.key"), "--checkpoint-dir", ck)
	if code == 0 || !strings.Contains(errOut, "checkpoint directory in use") || !strings.Contains(errOut, "locked by process") {
		t.Errorf("locked directory: exit %d, stderr:\n%s", code, errOut)
	}
}

// A run stopped by its context leaves with notice and exits cleanly.
func TestRunStopsOnSignal(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	var out, errb bytes.Buffer
	err := runRun(ctx, []string{"--data", "a9a", "--listen", "/ip4/127.0.0.1/tcp/0", "--min-iteration-time", "10ms", "--json"}, &out, &errb)
	if err != nil {
		t.Fatalf("stopped run returned %v\n%s", err, errb.String())
	}
	if !strings.Contains(out.String(), `"stopped":true`) || !strings.Contains(errb.String(), "left the mesh") {
		t.Errorf("no clean leave:\n%s\n%s", out.String(), errb.String())
	}
}
