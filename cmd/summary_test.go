package cmd

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sketchmesh/sketchmesh/checkpoint"
)

func TestRunOutcome(t *testing.T) {
	for _, c := range []struct {
		r       runReport
		trained bool
		want    string
	}{
		{runReport{Clock: 3000, Iterations: 3000}, true, "finished 3000/3000"},
		{runReport{Clock: 1785, Iterations: 3000, Stopped: true}, true, "stopped at 1785/3000"},
		{runReport{Clock: 412, Stopped: true}, true, "stopped at 412/∞"},
		{runReport{Clock: 0, Iterations: 3000, Stopped: true}, false, "stopped before training"},
		{runReport{Clock: 20, Iterations: 3000, Stopped: true}, false, "stopped before training"},
	} {
		if got := outcome(c.r, c.trained); got != c.want {
			t.Errorf("outcome(%+v, %v) = %q, want %q", c.r, c.trained, got, c.want)
		}
	}
	if got, want := membersText(runReport{Live: 2, Members: 3, Incarnations: 9}), "2 of 3 members live (9 incarnations)"; got != want {
		t.Errorf("membersText = %q, want %q", got, want)
	}
	if got, want := membersText(runReport{Live: 3, Members: 3, Incarnations: 3}), "3 of 3 members live"; got != want {
		t.Errorf("membersText = %q, want %q", got, want)
	}
}

// Two nodes padded to 25 ms an iteration report the time they waited at
// the staleness gate, not the padding; a node stopped while it waits for
// members reports that it never trained.
func TestRunSummaryBlockedAndStopped(t *testing.T) {
	bin, dir := e2eSetup(t)
	a := startNode(t, bin, "a", append(keyArgs(dir, "a"), "--wait-members", "2", "--iterations", "60")...)
	b := startNode(t, bin, "b", append(keyArgs(dir, "b"), "--join", a.addr, "--iterations", "60")...)
	for _, p := range []*proc{a, b} {
		r := p.wait(t)
		if r.Members != 2 || r.Incarnations != 2 || r.Clock != 60 || r.Stopped {
			t.Errorf("%s: members %d, incarnations %d, clock %d, stopped %v", p.name, r.Members, r.Incarnations, r.Clock, r.Stopped)
		}
		// 60 iterations padded to 25 ms take 1.5 s.
		if r.WallSeconds < 1.5 || r.BlockedSeconds > 0.5 {
			t.Errorf("%s: blocked %.2f s of %.2f s: the padding counts as blocked", p.name, r.BlockedSeconds, r.WallSeconds)
		}
	}
	c := startNode(t, bin, "c", append(keyArgs(dir, "c"), "--wait-members", "2")...)
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if r := c.wait(t); !r.Stopped || r.Clock != 0 || r.BlockedSeconds != 0 {
		t.Errorf("stopped while waiting for members: stopped %v, clock %d, blocked %.2f s", r.Stopped, r.Clock, r.BlockedSeconds)
	}
}

// Ctrl-C on testnet prints the summary of the run so far and exits 130.
func TestTestnetInterruptPrintsSummary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	c := exec.Command(bin, "testnet", "--nodes", "2", "--iterations", "100000", "--eval-every", "5", "--compute-time", "2ms")
	var out bytes.Buffer
	c.Stdout = &out
	stderr, err := c.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stderr)
	var errOut strings.Builder
	for sc.Scan() {
		errOut.WriteString(sc.Text() + "\n")
		if strings.HasPrefix(sc.Text(), "iter ") {
			break
		}
	}
	if err := c.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	for sc.Scan() {
		errOut.WriteString(sc.Text() + "\n")
	}
	_ = c.Wait()
	if code := c.ProcessState.ExitCode(); code != 130 || !strings.Contains(out.String(), "interrupted at iteration") ||
		!strings.Contains(out.String(), "final test accuracy") || !strings.HasSuffix(errOut.String(), "sketchmesh testnet: interrupted\n") {
		t.Errorf("exit %d, stdout:\n%s\nstderr:\n%s", code, out.String(), errOut.String())
	}
}

// --keep-best keeps the model of the lowest test loss as a checkpoint a
// node resumes from. With one step an exchange the clock counts
// iterations, so the best one is a multiple of --eval-every.
func TestRunKeepsBestModel(t *testing.T) {
	dir := t.TempDir()
	args := []string{"run", "--data", "rcv1", "--listen", "/ip4/127.0.0.1/tcp/0", "--iterations", "60", "--eval-every", "5", "--local-steps", "1",
		"--optimizer", "sgd", "--lr", "30", "--key", filepath.Join(dir, "node.key"), "--checkpoint-dir", filepath.Join(dir, "ck"), "--keep-best", "--json"}
	code, out, errOut := runMain(args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	last := out[strings.LastIndex(strings.TrimSpace(out), "\n")+1:]
	var rep runReport
	if err := json.Unmarshal([]byte(last), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	// A lone member compares no digests, and says so.
	if !strings.Contains(last, `"view_divergence":0`) {
		t.Errorf("the report lacks view_divergence 0: %s", last)
	}
	if rep.BestTestLoss == nil || rep.BestClock == nil || rep.BestIteration == nil || *rep.BestClock%5 != 0 || *rep.BestIteration != *rep.BestClock || *rep.BestTestLoss > rep.TestLoss {
		t.Fatalf("best %v at iteration %v, clock %v, final %v", rep.BestTestLoss, rep.BestIteration, rep.BestClock, rep.TestLoss)
	}
	st, err := checkpoint.Load(filepath.Join(dir, "ck", "best"))
	if err != nil || st.Clock != *rep.BestClock {
		t.Fatalf("best checkpoint: %v, clock %v, want %d", err, st, *rep.BestClock)
	}
	// With the default local steps (8 of 64 iterations) the model is
	// evaluated, and kept, at the end of an exchange: its iteration is the
	// clock's 8 steps.
	dir8 := t.TempDir()
	code, out, errOut = runMain("run", "--data", "rcv1", "--listen", "/ip4/127.0.0.1/tcp/0", "--iterations", "64", "--eval-every", "5",
		"--optimizer", "sgd", "--lr", "30", "--key", filepath.Join(dir8, "node.key"), "--checkpoint-dir", filepath.Join(dir8, "ck"), "--keep-best", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	last = out[strings.LastIndex(strings.TrimSpace(out), "\n")+1:]
	rep = runReport{}
	if err := json.Unmarshal([]byte(last), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if rep.BestIteration == nil || rep.BestClock == nil || *rep.BestIteration != 8**rep.BestClock || rep.Exchanges != 8 {
		t.Fatalf("8 local steps: best at iteration %v, clock %v, %d exchanges; want iteration = 8 × clock, 8 exchanges", rep.BestIteration, rep.BestClock, rep.Exchanges)
	}
	code, _, errOut = runMain("run", "--data", "rcv1", "--keep-best")
	if code != 2 || !strings.Contains(errOut, "--keep-best needs --checkpoint-dir") {
		t.Errorf("--keep-best without --checkpoint-dir: exit %d, %s", code, errOut)
	}
}

// A joiner admitted while the founder waits for --wait-members waits with
// it: nobody trains before the third member is in.
func TestWaitMembersHoldsTheMesh(t *testing.T) {
	bin, dir := e2eSetup(t)
	a := startNode(t, bin, "a", append(keyArgs(dir, "a"), "--wait-members", "3", "--iterations", "30")...)
	b := startNode(t, bin, "b", append(keyArgs(dir, "b"), "--join", a.addr, "--iterations", "30")...)
	// Several heartbeats and what would be dozens of padded iterations.
	time.Sleep(1500 * time.Millisecond)
	if ca, cb := a.clock(), b.clock(); ca != 0 || cb != 0 {
		t.Errorf("before the third member: clocks %d and %d, want 0 and 0", ca, cb)
	}
	c := startNode(t, bin, "c", append(keyArgs(dir, "c"), "--join", b.addr, "--iterations", "30")...)
	for _, p := range []*proc{a, b, c} {
		if r := p.wait(t); r.Clock != 30 || r.AppliedTwice != 0 {
			t.Errorf("%s: clock %d, applied twice %d", p.name, r.Clock, r.AppliedTwice)
		}
	}
}
