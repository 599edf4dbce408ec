package testnet

import (
	"strings"
	"testing"
	"time"

	"github.com/sketchmesh/sketchmesh/mesh"
	"github.com/sketchmesh/sketchmesh/model"
	"github.com/sketchmesh/sketchmesh/netmodel"
)

func TestParseWAN(t *testing.T) {
	geo, err := ParseWAN("geo3")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		i, j int
		want mesh.LinkShape
	}{
		{0, 3, mesh.LinkShape{Latency: time.Millisecond, Bandwidth: 125e6}}, // same site
		{0, 1, mesh.LinkShape{Latency: 40 * time.Millisecond, Bandwidth: 12.5e6}},
		{4, 2, mesh.LinkShape{Latency: 80 * time.Millisecond, Bandwidth: 12.5e6}},
		{2, 3, mesh.LinkShape{Latency: 120 * time.Millisecond, Bandwidth: 12.5e6}},
	}
	for _, c := range cases {
		if got := linkBetween(geo, c.i, c.j); got != c.want {
			t.Errorf("geo3 link %d-%d = %+v, want %+v", c.i, c.j, got, c.want)
		}
	}
	custom, err := ParseWAN("latency=50ms,bandwidth=100Mbit")
	if err != nil {
		t.Fatal(err)
	}
	if got := linkBetween(custom, 0, 1); got != (mesh.LinkShape{Latency: 50 * time.Millisecond, Bandwidth: 12.5e6}) {
		t.Fatalf("custom link %+v", got)
	}
	if lan, _ := ParseWAN("lan"); lan.Emulated() {
		t.Fatal("lan is emulated")
	}
	for _, bad := range []string{"mars", "latency=fast", "latency=-1s", "latency=5ms,bandwidth=0Mbit", "bandwidth=lots", "geo3,jitter=5ms", "lan,loss=0.01"} {
		if _, err := ParseWAN(bad); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("ParseWAN(%q): err %v, want an error naming the profile", bad, err)
		}
	}
}

// Over emulated geo-distributed links, bulk-synchronous steps still give
// bit-identical views, and a staleness bound lets nodes run ahead of a
// straggler without ever reading a view staler than the bound.
func TestGeo3Staleness(t *testing.T) {
	train, test := builtin(t, "rcv1")
	wan, err := ParseWAN("geo3")
	if err != nil {
		t.Fatal(err)
	}
	base := Config{
		Nodes: 6, Train: train, Test: test, Training: netmodel.Training{
			Model: model.LogisticRegression, Optimizer: model.Adam, LR: 0.02, Batch: 0.1,
			Iterations: 12, Seed: 1, Codec: "raw",
		}, WAN: wan,
		Stragglers: 1, Slowdown: 3, ComputeTime: 5 * time.Millisecond,
	}
	bsp := run(t, base)
	if !bsp.ViewsIdentical || bsp.StalenessObservedMax != 0 {
		t.Fatalf("staleness 0 over geo3: views identical %v, observed staleness %d", bsp.ViewsIdentical, bsp.StalenessObservedMax)
	}
	ssp := base
	ssp.Staleness = 3
	rep := run(t, ssp)
	if rep.StalenessObservedMax > 3 {
		t.Fatalf("observed staleness %d above the bound 3", rep.StalenessObservedMax)
	}
	if rep.StalenessObservedMax == 0 {
		t.Fatal("no node ever ran ahead: the WAN emulation has no effect")
	}
	if rep.BlockedSecondsPerNode >= bsp.BlockedSecondsPerNode {
		t.Fatalf("blocked %.2fs per node with s=3, %.2fs with s=0", rep.BlockedSecondsPerNode, bsp.BlockedSecondsPerNode)
	}
	for i, n := range rep.PerNode {
		if n.UpdatesApplied != 6*12 {
			t.Fatalf("node %d applied %d updates, want 72", i, n.UpdatesApplied)
		}
	}
}
