package mesh

import (
	"context"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/sketchmesh/sketchmesh/codec"
	"github.com/sketchmesh/sketchmesh/dataset"
	"github.com/sketchmesh/sketchmesh/model"
	"github.com/sketchmesh/sketchmesh/node"
)

// A hand-written peer sends frames from a non-member and frames whose clock
// runs further ahead than the staleness bound allows; two honest nodes drop
// and count them and train to the end as if nothing happened.
func TestHostileFramesAreDroppedAndCounted(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	train, _, err := dataset.Builtin("rcv1")
	if err != nil {
		t.Fatal(err)
	}
	mdl, err := model.New(model.Config{Kind: model.LogisticRegression, MaxFeature: train.MaxFeature})
	if err != nil {
		t.Fatal(err)
	}
	a, b, attacker := newTestHost(t), newTestHost(t), newTestHost(t)
	for _, pair := range [][2]*Host{{a, b}, {attacker, a}} {
		if err := pair[0].Connect(ctx, peer.AddrInfo{ID: pair[1].Libp2p().ID(), Addrs: pair[1].Libp2p().Addrs()}); err != nil {
			t.Fatal(err)
		}
	}
	ids := []string{a.ID(), b.ID()}
	cores := make([]*node.Node, 2)
	for i, id := range ids {
		opt, err := model.NewOptimizer(model.SGD, 1, mdl.NumParams())
		if err != nil {
			t.Fatal(err)
		}
		cores[i], err = node.New(node.Config{ID: id, Members: ids, Model: mdl, Optimizer: opt, Codec: codec.Raw{},
			Staleness: 2, Iterations: 10, BatchSize: 5, Seed: 1, Shard: train.Shard(i, 2).Rows})
		if err != nil {
			t.Fatal(err)
		}
	}
	frame, err := codec.Raw{}.Encode(nil, codec.Sparse{Keys: []uint64{1}, Values: []float32{1e3}})
	if err != nil {
		t.Fatal(err)
	}
	attacker.Send(a.ID(), node.EncodeEnvelope([]node.Update{{Origin: attacker.ID(), Clock: 1, Frame: frame}}))
	attacker.Send(a.ID(), node.EncodeEnvelope([]node.Update{{Origin: b.ID(), Clock: 50, Frame: frame}}))
	if err := attacker.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for a.Traffic().MessagesReceived < 2 {
		select {
		case <-ctx.Done():
			t.Fatal("hostile frames never arrived")
		case <-time.After(5 * time.Millisecond):
		}
	}
	done := make(chan error, 2)
	for i, h := range []*Host{a, b} {
		go func() {
			d, err := NewDaemon(ctx, DaemonConfig{Mesh: "m", Host: h, Node: cores[i], Settings: node.Settings{Iterations: 10},
				OverlayBroadcast: true, Reliable: true, Progress: -1, LeaveTimeout: time.Second})
			if err == nil {
				_, err = d.Run(ctx)
			}
			done <- err
		}()
	}
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	st := cores[0].Stats()
	if st.Rejected[node.RejectNotMember] != 1 || st.Rejected[node.RejectClockAhead] != 1 {
		t.Fatalf("rejected %v, want one not_member and one clock_ahead", st.Rejected)
	}
	if st.UpdatesApplied != 20 {
		t.Fatalf("applied %d updates, want the 20 honest ones", st.UpdatesApplied)
	}
	va, vb := cores[0].View(), cores[1].View()
	for i := range va {
		if va[i] != vb[i] {
			t.Fatalf("views differ at %d: the hostile frames changed a view", i)
		}
	}
}
