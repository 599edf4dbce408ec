package cmd

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// e2eIterations is how far every node of the end-to-end runs trains.
const e2eIterations = 150

// buildBinary builds the sketchmesh command once for the end-to-end tests.
var buildBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "sketchmesh-e2e")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "sketchmesh")
	out, err := exec.Command("go", "build", "-o", bin, "./sketchmesh").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
})

// proc is one node process.
type proc struct {
	name    string
	cmd     *exec.Cmd
	stdout  bytes.Buffer
	addr    string // its first listening multiaddr
	metrics string // its metrics URL
	ui      string // its live view URL (--ui)
	done    chan error
	mu      sync.Mutex // guards stdout, addr and metrics while it runs
}

// startNode starts `sketchmesh run` with args and waits until it prints
// its address and serves metrics.
func startNode(t *testing.T, bin, name string, args ...string) *proc {
	t.Helper()
	return startNodeIn(t, nil, bin, name, args...)
}

// startNodeIn is startNode run through a command prefix, such as
// ip netns exec NS. Without --listen in args the node listens on
// 127.0.0.1.
func startNodeIn(t *testing.T, prefix []string, bin, name string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, done: make(chan error, 1)}
	// One step an exchange, so that the churn scenarios' kills and
	// restarts land where they are timed (TestRunTakesLocalStepsByDefault
	// runs the default).
	base := []string{"run", "--data", "a9a", "--metrics", "127.0.0.1:0",
		"--iterations", strconv.Itoa(e2eIterations), "--staleness", "2", "--local-steps", "1",
		"--codec", "sketchml", "--min-iteration-time", "25ms", "--dead-after", "1s", "--heartbeat", "200ms",
		"--checkpoint-every", "5", "--log-format", "json", "--json"}
	if !slices.Contains(args, "--listen") {
		base = append(base, "--listen", "/ip4/127.0.0.1/tcp/0")
	}
	argv := append(append(slices.Clone(prefix), bin), append(base, args...)...)
	p.cmd = exec.Command(argv[0], argv[1:]...)
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{}, 2)
	mu := &p.mu
	// Wait closes the pipes: it must come after the readers are done, or
	// the last lines (the report) may be lost.
	var readers sync.WaitGroup
	readers.Add(2)
	go func() {
		defer readers.Done()
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			mu.Lock()
			if a, ok := strings.CutPrefix(line, "listening: "); ok && p.addr == "" {
				p.addr = a
				ready <- struct{}{}
			}
			p.stdout.WriteString(line + "\n")
			mu.Unlock()
		}
	}()
	go func() {
		defer readers.Done()
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var rec map[string]any
			if json.Unmarshal(sc.Bytes(), &rec) == nil {
				if rec["msg"] == "serving the live view" {
					mu.Lock()
					p.ui, _ = rec["url"].(string)
					mu.Unlock()
				}
				if rec["msg"] == "serving metrics" {
					mu.Lock()
					p.metrics, _ = rec["url"].(string)
					mu.Unlock()
					ready <- struct{}{}
				}
				if lvl, _ := rec["level"].(string); lvl == "WARN" || lvl == "ERROR" {
					t.Logf("%s: %s", name, sc.Text())
				}
			}
		}
	}()
	go func() {
		readers.Wait()
		p.done <- p.cmd.Wait()
	}()
	for range 2 {
		select {
		case <-ready:
		case err := <-p.done:
			t.Fatalf("%s exited before it was ready: %v\n%s", name, err, p.stdout.String())
		case <-time.After(60 * time.Second):
			t.Fatalf("%s not ready after 60 s", name)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	return p
}

// clock scrapes sketchmesh_clock from the node's metrics.
func (p *proc) clock() uint64 {
	resp, err := http.Get(p.metrics)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, "sketchmesh_clock "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return uint64(f)
		}
	}
	return 0
}

func (p *proc) waitClock(t *testing.T, c uint64) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for p.clock() < c {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not reach clock %d", p.name, c)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// wait waits for the process to exit 0 and returns its final report.
func (p *proc) wait(t *testing.T) runReport {
	t.Helper()
	select {
	case err := <-p.done:
		if err != nil {
			t.Fatalf("%s: %v\n%s", p.name, err, p.stdout.String())
		}
	case <-time.After(120 * time.Second):
		_ = p.cmd.Process.Kill()
		t.Fatalf("%s did not finish", p.name)
	}
	p.mu.Lock()
	lines := strings.Split(strings.TrimSpace(p.stdout.String()), "\n")
	p.mu.Unlock()
	var r runReport
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &r); err != nil {
		t.Fatalf("%s: last line is not a report: %v\n%s", p.name, err, p.stdout.String())
	}
	return r
}

// run takes local steps by default, with no measurement of its links: the
// founder takes node.AutoLocalSteps of the run's iterations, a joiner
// given --local-steps auto takes the mesh's, and both end with every
// step taken in that many exchanges, nothing applied twice, and the
// accuracy of a9a.
func TestRunTakesLocalStepsByDefault(t *testing.T) {
	bin, dir := e2eSetup(t)
	const iterations = 64 // 8 exchanges of node.MaxAutoLocalSteps
	args := []string{"--iterations", strconv.Itoa(iterations), "--local-steps", "auto"}
	a := startNode(t, bin, "a", append(append(keyArgs(dir, "a"), args...), "--shard", "1/2", "--wait-members", "2")...)
	b := startNode(t, bin, "b", append(append(keyArgs(dir, "b"), args...), "--shard", "2/2", "--join", a.addr)...)
	for _, p := range []*proc{a, b} {
		r := p.wait(t)
		if r.Clock != iterations || r.Exchanges != iterations/8 || r.AppliedTwice != 0 || r.TestAccuracy < 0.8 {
			t.Errorf("%s: %d steps in %d exchanges, %d applied twice, accuracy %.4f; want %d in %d, none, >= 0.8",
				p.name, r.Clock, r.Exchanges, r.AppliedTwice, r.TestAccuracy, iterations, iterations/8)
		}
	}
}

// e2eSetup skips an end-to-end test in -short mode, and otherwise builds
// the binary and gives the test a directory of its own.
func e2eSetup(t *testing.T) (bin, dir string) {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end run of separate processes")
	}
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	return bin, t.TempDir()
}

func keyArgs(dir, name string) []string {
	return []string{"--key", filepath.Join(dir, name+".key"), "--checkpoint-dir", filepath.Join(dir, name)}
}

// Separate processes on 127.0.0.1: three nodes start, a fourth joins by
// multiaddr at iteration 20, one is killed with SIGKILL at iteration 40
// and restarts from its checkpoint; every live node ends within one
// accuracy point of a fault-free run of four, and nothing is applied twice.
func TestRunChurnEndToEnd(t *testing.T) {
	churnEndToEnd(t, nil, 20, 40, 0.01)
}

// The same churn under the default local steps (8 an exchange, staleness
// 1), in a run long enough for the restarted node to find the others still
// training: checkpoints come at exchange ends, and the restart resumes at
// one. The bound on accuracy is two points, not one: the run has only 60
// exchanges, and while the killed node is down the others go on without
// its quarter of the data. How many exchanges that is depends on the wall
// time of its restart, longer on a loaded machine; on a busy 2-core
// machine the run has ended 0.01 to 1.2 points below the fault-free one.
func TestRunChurnWithLocalStepsEndToEnd(t *testing.T) {
	churnEndToEnd(t, []string{"--local-steps", "auto", "--iterations", "480", "--staleness", "1"}, 60, 120, 0.02)
}

// churnEndToEnd runs the churn scenario with extra flags for every node:
// the fourth node joins at iteration joinAt, the second is killed at
// killAt and restarts from its checkpoint. Every live node must end
// within tolerance of the fault-free run's test accuracy.
func churnEndToEnd(t *testing.T, extra []string, joinAt, killAt uint64, tolerance float64) {
	bin, dir := e2eSetup(t)
	// startAs starts name with key's key and checkpoints.
	startAs := func(name, key string, args ...string) *proc {
		return startNode(t, bin, name, append(append(keyArgs(dir, key), extra...), args...)...)
	}
	start := func(name string, args ...string) *proc { return startAs(name, name, args...) }

	// The fault-free reference: four nodes that start together.
	a := start("ref-a", "--shard", "1/4", "--wait-members", "4")
	ref := []*proc{a}
	for i, n := range []string{"ref-b", "ref-c", "ref-d"} {
		ref = append(ref, start(n, "--shard", fmt.Sprintf("%d/4", i+2), "--join", a.addr))
	}
	var refAcc float64
	for _, p := range ref {
		r := p.wait(t)
		refAcc = r.TestAccuracy
		if r.AppliedTwice != 0 {
			t.Errorf("%s applied %d updates twice", p.name, r.AppliedTwice)
		}
	}

	// The churn run.
	a = start("a", "--shard", "1/4", "--wait-members", "3")
	b := start("b", "--shard", "2/4", "--join", a.addr)
	c := start("c", "--shard", "3/4", "--join", a.addr)
	a.waitClock(t, joinAt)
	d := start("d", "--shard", "4/4", "--join", a.addr)
	a.waitClock(t, killAt)
	if err := b.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-b.done
	b2 := startAs("b2", "b", "--shard", "2/4", "--join", c.addr)
	for _, p := range []*proc{a, c, d, b2} {
		r := p.wait(t)
		t.Logf("%s: clock %d, %d exchanges, accuracy %.4f (fault-free %.4f), held %d, applied twice %d, resumed %v, rejected %v",
			p.name, r.Clock, r.Exchanges, r.TestAccuracy, refAcc, r.UpdatesHeld, r.AppliedTwice, r.Resumed, r.Rejected)
		if r.AppliedTwice != 0 {
			t.Errorf("%s applied %d updates twice", p.name, r.AppliedTwice)
		}
		if math.Abs(r.TestAccuracy-refAcc) > tolerance {
			t.Errorf("%s ends at accuracy %.4f, the fault-free run at %.4f", p.name, r.TestAccuracy, refAcc)
		}
		if p == b2 && !r.Resumed {
			t.Errorf("the restarted node did not resume from its checkpoint")
		}
	}
}
