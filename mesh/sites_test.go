package mesh

import (
	"context"
	"testing"
	"time"

	"github.com/sketchmesh/sketchmesh/dataset"
)

// Two daemons on one host's loopback probe each other and find themselves
// one site, which the overlay cannot use: they announce no label, and
// neither knows one (a mesh on one site says no hellos for its labels; the
// labels of several sites are announced in TestTestnetFindsSitesByRoundTrip).
func TestDaemonsOnOneSiteMeasureAndAnnounceNoLabel(t *testing.T) {
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
	for _, pair := range [][2]*Daemon{{founder, joiner}, {joiner, founder}} {
		a, other := pair[0], pair[1]
		if rtt, ok := a.sites.rtt[other.self]; !ok || rtt <= 0 {
			t.Errorf("%s measured %v to %s (%v), want a round trip", a.self, rtt, other.self, ok)
		}
		if got := a.n.Sites(); len(got) != 0 {
			t.Errorf("%s knows sites %v, want none", a.self, got)
		}
	}
}
