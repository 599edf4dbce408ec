package cmd

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sketchmesh/sketchmesh/liveview"
)

var screenshotPath = flag.String("screenshot", "", "TestTestnetLiveViewInChromium: also save the page's screenshot here (the README shows ../docs/liveview.png)")

func TestUIFlagsBadInput(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--ui", "0.0.0.0:8080"}, "--ui not a loopback address: 0.0.0.0 would expose the live view beyond this machine"},
		{[]string{"--ui", ":8080"}, "add --ui-public"},
		{[]string{"--ui-public"}, "--ui-public needs --ui HOST:PORT"},
		{[]string{"--ui", "8080"}, "want HOST:PORT"},
		{[]string{"--ui", held.Addr().String()}, "address in use"},
	} {
		code, _, errOut := runMain(append([]string{"testnet", "--iterations", "1"}, tc.args...)...)
		if code != 2 || !strings.Contains(errOut, tc.want) || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
			t.Errorf("%v: exit %d, stderr %q; want 2 and one line with %q", tc.args, code, errOut, tc.want)
		}
	}
}

// findChromium returns a headless-capable Chromium or Chrome, or "".
func findChromium() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless_shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// chromium runs a headless browser on url with args. The browser's
// virtual time stands still while the page waits on the network; url asks
// the page to leave the event stream after some events, and the page then
// has a second of virtual time to draw them.
func chromium(t *testing.T, browser, url string, args ...string) string {
	t.Helper()
	// A browser that crashes (killed by a signal) says nothing about the
	// page: it is tried once more, then the test is skipped with the cause.
	for attempt := 1; ; attempt++ {
		out, err := runChromium(browser, url, t.TempDir(), args)
		var exit *exec.ExitError
		switch {
		case err == nil:
			return out
		case errors.As(err, &exit) && !exit.Exited() && attempt < 2:
			t.Logf("%s crashed (%v); trying once more", browser, err)
		case errors.As(err, &exit) && !exit.Exited():
			t.Skipf("%s crashed twice (%v): cannot check the page here", browser, err)
		default:
			t.Fatalf("%s: %v", browser, err)
		}
	}
}

// runChromium renders url headless with args and returns what it printed.
func runChromium(browser, url, profile string, args []string) (string, error) {
	argv := append([]string{"--headless", "--disable-gpu", "--no-sandbox", "--hide-scrollbars",
		"--user-data-dir=" + profile, "--virtual-time-budget=1000"}, args...)
	cmd := exec.Command(browser, append(argv, url)...)
	var stdout strings.Builder
	cmd.Stdout = &stdout
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		return "", err
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return stdout.String(), err
	case <-time.After(90 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		return "", fmt.Errorf("did not finish in 90 s")
	}
}

// getState reads /api/state.
func getState(url string) (liveview.State, error) {
	var st liveview.State
	resp, err := http.Get(url + "api/state")
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("status %d", resp.StatusCode)
	}
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

// A testnet started with --ui serves the page while it trains: headless
// Chromium, loading it, shows every node and a curve, fed by the event
// stream; after the run the page is still served until SIGINT, and the
// command then exits 0. The screenshot is the README's.
func TestTestnetLiveViewInChromium(t *testing.T) {
	browser := findChromium()
	if browser == "" {
		t.Skip("no chromium, chromium-browser or google-chrome on PATH: the live view is not loaded in a browser (apt-get install chromium)")
	}
	bin, _ := e2eSetup(t)
	const nodes = 4
	cmd := exec.Command(bin, "testnet", "--nodes", strconv.Itoa(nodes), "--iterations", "200", "--compute-time", "20ms",
		"--eval-every", "10", "--ui", "127.0.0.1:0")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stdout strings.Builder
	cmd.Stdout = &stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill() }()
	urls := make(chan string, 1)
	var errLog strings.Builder
	var errMu sync.Mutex
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			errMu.Lock()
			errLog.WriteString(sc.Text() + "\n")
			errMu.Unlock()
			if u, ok := strings.CutPrefix(sc.Text(), "live view: http"); ok {
				urls <- "http" + u
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	var url string
	select {
	case url = <-urls:
	case <-time.After(60 * time.Second):
		t.Fatal("no live view URL on stderr")
	}
	// Live data: the nodes have trained and node 0 has evaluated.
	deadline := time.Now().Add(60 * time.Second)
	for {
		st, err := getState(url)
		if err == nil && len(st.Members) == nodes && st.Members[0].Clock > 0 && len(st.Curve) >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no live data after 60 s: %v %+v", err, st)
		}
		time.Sleep(50 * time.Millisecond)
	}
	st, err := getState(url)
	if err != nil {
		t.Fatal(err)
	}
	dom := chromium(t, browser, url+"?events=1", "--dump-dom")
	// The page may be read after the run, once the members have left.
	for _, m := range st.Members {
		row := `<tr data-member="` + m.ID + `" data-state="`
		if n := strings.Count(dom, row+`live"`) + strings.Count(dom, row+`left"`); n != 1 {
			t.Errorf("the page shows member %s (%s) %d times as a live or left row, want once", m.Name, m.ID, n)
		}
	}
	attr := func(name string) int {
		m := regexp.MustCompile(name + `="(\d+)"`).FindStringSubmatch(dom)
		if m == nil {
			t.Fatalf("the page has no %s:\n%.2000s", name, dom)
		}
		v, _ := strconv.Atoi(m[1])
		return v
	}
	if got := attr("data-members"); got != nodes {
		t.Errorf("page shows %d members, want %d", got, nodes)
	}
	if got := attr("data-curve-points"); got < 2 {
		t.Errorf("page's curve has %d points", got)
	}
	if !regexp.MustCompile(`<polyline class="series test_loss" points="[^"]+" data-points="[1-9]`).MatchString(dom) {
		t.Error("the page draws no test loss line")
	}
	// The page drew a state that came through the event stream (and left
	// the stream then).
	if got := attr("data-events"); got != 1 {
		t.Errorf("the page took %d states from the event stream, want 1", got)
	}

	// The run ends; the page is still served, and shows it over.
	for deadline := time.Now().Add(60 * time.Second); ; {
		if st, err = getState(url); err == nil && st.Done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run did not end in 60 s: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	shot := filepath.Join(t.TempDir(), "liveview.png")
	chromium(t, browser, url+"?events=1", "--window-size=1400,1100", "--screenshot="+shot)
	png, err := os.ReadFile(shot)
	if err != nil || len(png) < 8 || string(png[1:4]) != "PNG" {
		t.Fatalf("screenshot: %v, %d bytes", err, len(png))
	}
	if *screenshotPath != "" {
		if err := os.WriteFile(*screenshotPath, png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(200 * time.Millisecond)
	errMu.Lock()
	logged := errLog.String()
	errMu.Unlock()
	if !strings.Contains(logged, "the run is over; still serving "+url+" until Ctrl-C") {
		t.Errorf("stderr does not say the view is still served:\n%s", logged)
	}
	if cmd.ProcessState != nil {
		t.Fatal("the command exited after the run")
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("exit after SIGINT: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("still running 10 s after SIGINT")
	}
	if !strings.Contains(stdout.String(), "200 iterations in") {
		t.Errorf("no summary on stdout:\n%s", stdout.String())
	}
	if _, err := http.Get(url + "api/state"); err == nil {
		t.Error("the live view is still served after the command exited")
	}
}

// A `run` node with --ui serves its own view of the mesh: itself, observed,
// with its clock and curve, and the vector clock it holds.
func TestRunLiveView(t *testing.T) {
	bin, dir := e2eSetup(t)
	const iterations = 60
	p := startNode(t, bin, "a", append(keyArgs(dir, "a"), "--ui", "127.0.0.1:0", "--eval-every", "10", "--iterations", strconv.Itoa(iterations))...)
	var url string
	for deadline := time.Now().Add(30 * time.Second); url == ""; time.Sleep(20 * time.Millisecond) {
		p.mu.Lock()
		url = p.ui
		p.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatal("no 'serving the live view' log line")
		}
	}
	var st liveview.State
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var err error
		st, err = getState(url)
		if err == nil && len(st.Members) == 1 && st.Members[0].Clock >= 20 && len(st.Curve) >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no live data from the node after 60 s: %v %+v", err, st)
		}
	}
	m := st.Members[0]
	if st.Mode != "run" || st.Self != m.ID || !m.Observed || m.State != liveview.StateLive || m.Incarnation == 0 || st.Iterations != iterations {
		t.Errorf("run's live view: mode %q self %q iterations %d, member %+v", st.Mode, st.Self, st.Iterations, m)
	}
	if r := st.VectorClock.Rows; len(r) != 1 || r[0].Holder != m.ID || len(r[0].Clocks) != 1 || r[0].Clocks[0] != r[0].Clock {
		t.Errorf("vector clock %+v", st.VectorClock)
	}
	if got := p.wait(t); got.Clock != iterations {
		t.Errorf("the node ended at clock %d", got.Clock)
	}
}
