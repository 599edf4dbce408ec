package liveview

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeSource hands out a state a test sets, and counts the polls.
type fakeSource struct {
	mu    sync.Mutex
	st    State
	polls int
}

func (f *fakeSource) LiveState() State {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.polls++
	return f.st
}

func (f *fakeSource) set(st State) {
	f.mu.Lock()
	f.st = st
	f.mu.Unlock()
}

func sample(clock uint64) State {
	acc := 0.9
	return State{
		Mode: "testnet", Iterations: 10, Staleness: 2, Seq: clock,
		Members: []Member{
			{ID: "a", Name: "node 0", State: StateLive, Clock: clock, Observed: true},
			{ID: "b", Name: "node 1", State: StateSuspected, Clock: 1},
		},
		Links:       []Link{{From: "a", To: "b", Path: PathDirect, BytesSent: 100}},
		VectorClock: VectorClock{Origins: []string{"a", "b"}, Rows: []ClockRow{{Holder: "a", Clock: clock, Clocks: []uint64{clock, 1}}}},
		Curve:       []Point{{Iteration: 0, TestLoss: 0.69}, {Iteration: clock, TestLoss: math.NaN(), TestAccuracy: &acc}},
		Rejected:    map[string]uint64{"duplicate": 3},
	}
}

func TestStateServedAsJSON(t *testing.T) {
	src := &fakeSource{st: sample(4)}
	srv := httptest.NewServer(NewServer(src, Options{}).Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/api/state")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("content type %q", ct)
	}
	var got map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"members", "links", "vector_clock", "curve", "rejected"} {
		if _, ok := got[k]; !ok {
			t.Errorf("no %q in /api/state", k)
		}
	}
	members := got["members"].([]any)
	first := members[0].(map[string]any)
	if first["id"] != "a" || first["state"] != "live" || first["clock"] != 4.0 {
		t.Errorf("member 0 = %v", first)
	}
	curve := got["curve"].([]any)
	if p := curve[1].(map[string]any); p["test_loss"] != 0.0 || p["test_accuracy"] != 0.9 {
		t.Errorf("a NaN loss must be written as 0 and the accuracy kept: %v", p)
	}
	if src.st.Curve[1].TestLoss == src.st.Curve[1].TestLoss {
		t.Error("Encode changed the source's curve in place")
	}
}

func TestPageIsEmbeddedAndSelfContained(t *testing.T) {
	srv := httptest.NewServer(NewServer(&fakeSource{st: sample(1)}, Options{}).Handler())
	defer srv.Close()
	for _, path := range []string{"/", "/app.js", "/style.css"} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body := new(strings.Builder)
		_, _ = bufio.NewReader(resp.Body).WriteTo(body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || body.Len() == 0 {
			t.Fatalf("%s: status %d, %d bytes", path, resp.StatusCode, body.Len())
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
			t.Errorf("%s: Content-Security-Policy %q", path, csp)
		}
		// Nothing may come from another origin: the page must work offline.
		for _, remote := range []string{"http://", "https://", "//cdn", "@import"} {
			if strings.Contains(strings.ReplaceAll(body.String(), "http://www.w3.org/2000/svg", ""), remote) {
				t.Errorf("%s refers to %q", path, remote)
			}
		}
	}
}

func TestReadOnly(t *testing.T) {
	srv := httptest.NewServer(NewServer(&fakeSource{st: sample(1)}, Options{}).Handler())
	defer srv.Close()
	for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodDelete} {
		req, _ := http.NewRequest(method, srv.URL+"/api/state", strings.NewReader("{}"))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("%s: status %d, want 405", method, resp.StatusCode)
		}
	}
}

// readEvent reads one server-sent event's data.
func readEvent(t *testing.T, r *bufio.Reader) State {
	t.Helper()
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("event stream: %v", err)
		}
		if data, ok := strings.CutPrefix(line, "data: "); ok {
			var st State
			if err := json.Unmarshal([]byte(data), &st); err != nil {
				t.Fatalf("event: %v", err)
			}
			return st
		}
	}
}

func TestEventsSendChangesOnly(t *testing.T) {
	src := &fakeSource{st: sample(1)}
	s := NewServer(src, Options{Rate: 50})
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.Run(ctx)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/api/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	r := bufio.NewReader(resp.Body)
	if st := readEvent(t, r); st.Seq != 1 {
		t.Fatalf("first event seq %d, want 1", st.Seq)
	}
	// Polls of an unchanged state send nothing; the next event is the
	// next change.
	time.Sleep(100 * time.Millisecond)
	src.set(sample(2))
	if st := readEvent(t, r); st.Seq != 2 || st.Members[0].Clock != 2 {
		t.Fatalf("second event seq %d clock %d, want 2 and 2", st.Seq, st.Members[0].Clock)
	}
}

// A client that does not read gets the newest state, never a backlog: its
// queue holds one state.
func TestSlowClientGetsNewestState(t *testing.T) {
	src := &fakeSource{st: sample(1)}
	s := NewServer(src, Options{})
	c := make(chan []byte, 1)
	s.clients[c] = struct{}{}
	for clock := uint64(1); clock <= 5; clock++ {
		src.set(sample(clock))
		s.poll()
	}
	if len(c) != 1 {
		t.Fatalf("queue holds %d states, want 1", len(c))
	}
	var st State
	if err := json.Unmarshal(<-c, &st); err != nil {
		t.Fatal(err)
	}
	if st.Seq != 5 {
		t.Fatalf("queued state seq %d, want the newest, 5", st.Seq)
	}
}

func TestRateBoundsPolls(t *testing.T) {
	src := &fakeSource{st: sample(1)}
	s := NewServer(src, Options{Rate: 20})
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	s.Run(ctx)
	// 20 a second for half a second: at most 10 ticks and the first poll.
	if src.polls > 11 || src.polls < 2 {
		t.Fatalf("%d polls in 0.5 s at 20/s", src.polls)
	}
	if d := NewServer(src, Options{}).interval; d != 500*time.Millisecond {
		t.Fatalf("default interval %v, want 500ms (2 a second)", d)
	}
}

func TestCheckAddr(t *testing.T) {
	for _, tc := range []struct {
		addr           string
		public, isPub  bool
		wantErr, isErr bool
	}{
		{addr: "127.0.0.1:8080"},
		{addr: "localhost:0"},
		{addr: "[::1]:8080"},
		{addr: "0.0.0.0:8080", isPub: true, wantErr: true, isErr: true},
		{addr: ":8080", isPub: true, wantErr: true, isErr: true},
		{addr: "192.0.2.7:8080", isPub: true, wantErr: true, isErr: true},
		{addr: "0.0.0.0:8080", public: true, isPub: true},
		{addr: "127.0.0.1", wantErr: true},
		{addr: "127.0.0.1:", wantErr: true},
	} {
		isPub, err := CheckAddr(tc.addr, tc.public)
		if (err != nil) != tc.wantErr || isPub != tc.isPub {
			t.Errorf("CheckAddr(%q, %v) = %v, %v", tc.addr, tc.public, isPub, err)
		}
		if tc.isErr && !errors.Is(err, ErrPublic) {
			t.Errorf("CheckAddr(%q): %v does not wrap ErrPublic", tc.addr, err)
		}
	}
}

// meshState is the state of a testnet of p nodes on a Halton-like overlay
// of about log2 p links each, with a 40-point curve.
func meshState(p int) State {
	st := State{Mode: "testnet", Iterations: 200, Staleness: 2, Rejected: map[string]uint64{}}
	ids := make([]string, p)
	for i := range ids {
		ids[i] = fmt.Sprintf("12D3KooWQvWuMEJfzfBb5mj55G37ZwTUoFnYKdEYYGmmJB%06d", i)
	}
	links := bits.Len(uint(p))
	for i, id := range ids {
		st.Members = append(st.Members, Member{ID: id, Name: fmt.Sprintf("node %d", i), Peer: id, State: StateLive, Clock: 100,
			Observed: true, StalenessMax: 2, StalenessMean: 1.37, BlockedSeconds: 0.25, BytesSent: 1 << 20, BytesReceived: 1 << 20,
			CompressionRatio: 6.04, TrainLoss: 0.31})
		for k := 1; k <= links; k++ {
			st.Links = append(st.Links, Link{From: id, To: ids[(i+k*k)%p], Path: PathDirect, BytesSent: 1 << 18, BytesReceived: 1 << 18,
				MessagesSent: 100, MessagesReceived: 100, CompressionRatio: 6.04})
		}
		row := ClockRow{Holder: id, Clock: 100, Clocks: make([]uint64, p)}
		for j := range row.Clocks {
			row.Clocks[j] = 98 + uint64(j%3)
		}
		st.VectorClock.Rows = append(st.VectorClock.Rows, row)
	}
	st.VectorClock.Origins = ids
	for i := range 40 {
		acc := 0.9
		st.Curve = append(st.Curve, Point{Iteration: uint64(5 * i), WallSeconds: float64(i), BytesSent: uint64(i) << 20, TrainLoss: 0.4, TestLoss: 0.35, TestAccuracy: &acc, TestAUC: &acc})
	}
	return st
}

// What one update costs the server: encoding the state of a 64-node
// testnet (the server does it at most twice a second), and its size.
func BenchmarkEncode64(b *testing.B) {
	st := meshState(64)
	var size int
	for b.Loop() {
		data, err := Encode(st)
		if err != nil {
			b.Fatal(err)
		}
		size = len(data)
	}
	b.ReportMetric(float64(size), "bytes/state")
}

// A client that accepts gzip gets the state compressed; one that does not,
// plain. (Go's client asks for gzip by itself and decompresses, so the
// event stream test above reads a compressed stream too.)
func TestStateCompressedWhenAccepted(t *testing.T) {
	srv := httptest.NewServer(NewServer(&fakeSource{st: meshState(64)}, Options{}).Handler())
	defer srv.Close()
	get := func(encoding string) (*http.Response, []byte) {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/api/state", nil)
		req.Header.Set("Accept-Encoding", encoding)
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, body
	}
	resp, plain := get("identity")
	if resp.Header.Get("Content-Encoding") != "" || !json.Valid(plain) {
		t.Fatalf("identity: encoding %q, valid JSON %v", resp.Header.Get("Content-Encoding"), json.Valid(plain))
	}
	resp, packed := get("br, gzip;q=0.8")
	if resp.Header.Get("Content-Encoding") != "gzip" {
		t.Fatalf("gzip accepted: encoding %q", resp.Header.Get("Content-Encoding"))
	}
	zr, err := gzip.NewReader(bytes.NewReader(packed))
	if err != nil {
		t.Fatal(err)
	}
	unpacked, err := io.ReadAll(zr)
	if err != nil || !bytes.Equal(unpacked, plain) {
		t.Fatalf("gzip body does not decompress to the plain one: %v", err)
	}
	if len(packed)*4 > len(plain) {
		t.Errorf("a 64-node state compresses from %d to %d bytes only", len(plain), len(packed))
	}
	if resp, _ := get("gzip;q=0"); resp.Header.Get("Content-Encoding") != "" {
		t.Error("gzip;q=0 refuses gzip, but the state came compressed")
	}
}
