package mesh

import (
	"strings"
	"testing"
	"time"

	"github.com/sketchmesh/sketchmesh/dataset"
	"github.com/sketchmesh/sketchmesh/node"
)

// The auto relay window is half the node's iteration interval, within its
// bounds, and the first window before the interval is known.
func TestAutoRelayWindow(t *testing.T) {
	for _, tc := range []struct{ round, want time.Duration }{
		{0, FirstAutoRelayWindow},
		{-time.Second, FirstAutoRelayWindow},
		{time.Millisecond, MinAutoRelayWindow},
		{3 * time.Millisecond, 1500 * time.Microsecond},
		{56 * time.Millisecond, 28 * time.Millisecond},
		{100 * time.Millisecond, MaxAutoRelayWindow},
		{time.Minute, MaxAutoRelayWindow},
	} {
		if got := autoRelayWindow(tc.round); got != tc.want {
			t.Errorf("autoRelayWindow(%v) = %v, want %v", tc.round, got, tc.want)
		}
	}
	a := &Daemon{cfg: DaemonConfig{RelayWindow: AutoRelayWindow}, round: 40 * time.Millisecond}
	if got := a.relayWindow(); got != 20*time.Millisecond {
		t.Errorf("auto window at a 40 ms interval: %v, want 20ms", got)
	}
	a.cfg.RelayWindow = 7 * time.Millisecond
	if got := a.relayWindow(); got != 7*time.Millisecond {
		t.Errorf("a fixed window of 7 ms: %v", got)
	}
}

// A negative relay window other than AutoRelayWindow is refused.
func TestRelayWindowConfig(t *testing.T) {
	train, _, err := dataset.Builtin("rcv1")
	if err != nil {
		t.Fatal(err)
	}
	core, err := NewCore(daemonSettings(train), node.Config{ID: "a", BatchSize: 10, Shard: train.Rows[:10]}, Start{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		window time.Duration
		ok     bool
	}{{AutoRelayWindow, true}, {0, true}, {5 * time.Millisecond, true}, {-2 * time.Millisecond, false}} {
		cfg := DaemonConfig{Mesh: "test", Host: newTestHost(t), Node: core, RelayWindow: tc.window}
		err := cfg.fill()
		if (err == nil) != tc.ok || (err != nil && !strings.Contains(err.Error(), "relay window")) {
			t.Errorf("relay window %v: err = %v", tc.window, err)
		}
	}
}
