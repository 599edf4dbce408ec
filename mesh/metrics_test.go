package mesh

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/sketchmesh/sketchmesh/dataset"
	"github.com/sketchmesh/sketchmesh/node"
)

// Every series is there from the first scrape, each rejection reason at 0,
// so that dashboards and alerts see them before anything happens.
func TestMetricsExportedFromTheStart(t *testing.T) {
	m := NewMetrics()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	want := []string{
		`sketchmesh_streams_rejected_total{reason="oversized"} 0`,
		`sketchmesh_streams_rejected_total{reason="truncated"} 0`,
		`sketchmesh_messages_throttled_total 0`,
		`sketchmesh_view_divergence_total 0`,
		`sketchmesh_build_info{commit="` + BuildInfo().Commit + `",go_version="` + BuildInfo().GoVersion + `",version="` + BuildInfo().Version + `"} 1`,
	}
	for _, r := range node.RejectReasons() {
		want = append(want, `sketchmesh_frames_rejected_total{reason="`+string(r)+`"} 0`)
	}
	for _, w := range want {
		if !strings.Contains(body, w+"\n") {
			t.Errorf("first scrape lacks %s", w)
		}
	}
	if len(node.RejectReasons()) != 26 {
		t.Errorf("%d rejection reasons: a new one must be added to node.RejectReasons", len(node.RejectReasons()))
	}
}

func TestAgentVersion(t *testing.T) {
	v := AgentVersion()
	if !strings.HasPrefix(v, "sketchmesh/") || v == "sketchmesh/" || strings.Contains(v, "github.com") {
		t.Errorf("agent version %q, want sketchmesh/<version>", v)
	}
	hosts := make([]*Host, 2)
	for i := range hosts {
		h, err := NewHost(HostConfig{ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"}})
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		hosts[i] = h
	}
	a, b := hosts[0].Libp2p(), hosts[1].Libp2p()
	if err := hosts[1].Connect(context.Background(), peer.AddrInfo{ID: a.ID(), Addrs: a.Addrs()}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, err := b.Peerstore().Get(a.ID(), "AgentVersion")
		if err == nil && got == v {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("identify gives agent version %v (%v), want %q", got, err, v)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A peer that opens an update stream without being a member is no peer of
// the mesh in the node's report.
func TestLinkCountsMembersOnly(t *testing.T) {
	train, _, err := dataset.Builtin("rcv1")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	h := newTestHost(t)
	a := startDaemon(t, ctx, daemonSettings(train), train.Rows[:100], nil, h)
	stranger := newTestHost(t)
	if err := stranger.Connect(ctx, peer.AddrInfo{ID: h.h.ID(), Addrs: h.h.Addrs()}); err != nil {
		t.Fatal(err)
	}
	stranger.Send(h.ID(), []byte("not an envelope"))
	select {
	case <-h.Inbox():
	case <-ctx.Done():
		t.Fatal("the stranger's message never arrived")
	}
	if _, linked := h.Links()[stranger.h.ID()]; !linked {
		t.Fatal("the stranger's stream is not on record")
	}
	if direct, relayed, _ := a.linkCounts(time.Now()); direct != 0 || relayed != 0 {
		t.Errorf("a stranger counts as a peer: %d direct, %d relayed", direct, relayed)
	}
	a.n.AddMember(MemberID(stranger.h.ID(), 1), 0)
	if direct, _, _ := a.linkCounts(time.Now()); direct != 1 {
		t.Errorf("a member counts as %d direct peers, want 1", direct)
	}
}

// The metrics count a core's refusals as its tracer, under their reasons;
// a daemon whose core does not report to its metrics is refused with the
// cause, rather than exporting refusals that stay at 0.
func TestMetricsCountRefusalsAsTheCoresTracer(t *testing.T) {
	train, _, err := dataset.Builtin("rcv1")
	if err != nil {
		t.Fatal(err)
	}
	set := daemonSettings(train)
	m := NewMetrics()
	traced, err := NewCore(set, node.Config{ID: "a", BatchSize: 10, Shard: train.Rows[:10], Tracer: m}, Start{})
	if err != nil {
		t.Fatal(err)
	}
	traced.Receive("b", []byte("not an envelope"))
	traced.Receive("b", []byte("nor this"))
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if want := `sketchmesh_frames_rejected_total{reason="bad_envelope"} 2`; !strings.Contains(rec.Body.String(), want+"\n") {
		t.Errorf("scrape lacks %s", want)
	}

	// A second core on the same metrics (as a rejoin builds) adds to the
	// counts that `run --json` reports.
	next, err := NewCore(set, node.Config{ID: "a/1", BatchSize: 10, Shard: train.Rows[:10], Tracer: m}, Start{})
	if err != nil {
		t.Fatal(err)
	}
	next.Receive("b", []byte("not an envelope either"))
	counts := m.Rejected()
	if got := counts[node.RejectBadEnvelope]; got != 3 {
		t.Errorf("Rejected()[bad_envelope] = %d over two cores, want 3", got)
	}
	counts[node.RejectBadEnvelope] = 0
	if got := m.Rejected()[node.RejectBadEnvelope]; got != 3 {
		t.Errorf("Rejected() handed out its own map: %d after the copy was cleared, want 3", got)
	}

	untraced, err := NewCore(set, node.Config{ID: "a", BatchSize: 10, Shard: train.Rows[:10]}, Start{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := DaemonConfig{Mesh: "test", Host: newTestHost(t), Node: untraced, Metrics: m}
	if err := cfg.fill(); err == nil || !strings.Contains(err.Error(), "Tracer") {
		t.Fatalf("a daemon whose core does not report to its metrics: err = %v", err)
	}
	cfg.Node = traced
	if err := cfg.fill(); err != nil {
		t.Fatalf("traced core: %v", err)
	}
}
