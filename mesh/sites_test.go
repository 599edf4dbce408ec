package mesh

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/sketchmesh/sketchmesh/dataset"
)

// Two daemons on one host's loopback probe each other, find themselves one
// site and announce the same label, the lesser member id: each ends up
// knowing both labels, as every member must to build the same overlay.
func TestDaemonsMeasureAndAnnounceTheirSite(t *testing.T) {
	train, _, err := dataset.Builtin("rcv1")
	if err != nil {
		t.Fatal(err)
	}
	set := daemonSettings(train)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	hosts := []*Host{newTestHost(t), newTestHost(t)}
	errs := make(chan error, 2)
	run := func(a *Daemon) {
		_, err := a.Run(ctx)
		errs <- err
	}
	founder := startDaemonWith(t, ctx, set, train.Shard(0, 2).Rows, nil, hosts[0], 2, 50*time.Millisecond)
	go run(founder)
	reply, err := Join(ctx, hosts[1], hosts[0].Addrs()[0], JoinRequest{Mesh: "test", Member: MemberID(hosts[1].h.ID(), 1), Settings: set}, nil)
	if err != nil {
		t.Fatal(err)
	}
	joiner := startDaemonWith(t, ctx, reply.Settings, train.Shard(1, 2).Rows, reply, hosts[1], 2, 50*time.Millisecond)
	go run(joiner)
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	label := min(founder.self, joiner.self)
	want := map[string]string{founder.self: label, joiner.self: label}
	for _, a := range []*Daemon{founder, joiner} {
		if got := a.n.Sites(); !maps.Equal(got, want) {
			t.Errorf("%s knows sites %v, want %v", a.self, got, want)
		}
	}
}
