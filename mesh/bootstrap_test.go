package mesh

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/sketchmesh/sketchmesh/checkpoint"
	"github.com/sketchmesh/sketchmesh/dataset"
	"github.com/sketchmesh/sketchmesh/node"
)

// A founder trains, saves its checkpoint and resumes from it: the resumed
// core holds the same clock, view and optimizer state, drops the pending
// frames and waits for no other member until it announces itself. The
// checkpoint is refused to another peer and another mesh, and a corrupt
// one is an error.
func TestCheckpointResume(t *testing.T) {
	train, _, err := dataset.Builtin("a9a")
	if err != nil {
		t.Fatal(err)
	}
	set := daemonSettings(train)
	set.Optimizer = "adam"
	self, other := fixedPeer(1), fixedPeer(2)
	id := MemberID(self, 1)
	own := node.Config{ID: id, BatchSize: 10, Seed: 1, Shard: train.Rows[:200]}
	founder, err := NewCore(set, own, Start{})
	if err != nil {
		t.Fatal(err)
	}
	if got := founder.Members(); !slices.Equal(got, []string{id}) {
		t.Fatalf("a founder's members: %v", got)
	}
	for range 3 {
		if err := founder.Train(); err != nil {
			t.Fatal(err)
		}
	}
	founder.AddMember(MemberID(other, 1), founder.Clock())
	dir := filepath.Join(t.TempDir(), "ck")
	if err := SaveCheckpoint(dir, "m", set, founder); err != nil {
		t.Fatal(err)
	}

	if st, err := LoadCheckpoint(t.TempDir(), self, "m"); st != nil || err != nil {
		t.Fatalf("an empty directory: %v, %v", st, err)
	}
	for _, c := range []struct {
		peer      peer.ID
		mesh      string
		wantError string
	}{
		{other, "m", "holds the checkpoint of peer"},
		{self, "n", `holds a checkpoint of mesh "m", not "n"`},
	} {
		_, err := LoadCheckpoint(dir, c.peer, c.mesh)
		if !errors.Is(err, ErrForeignCheckpoint) || !strings.Contains(err.Error(), c.wantError) {
			t.Errorf("peer %s, mesh %s: %v", c.peer, c.mesh, err)
		}
	}
	saved, err := LoadCheckpoint(dir, self, "m")
	if err != nil || saved == nil {
		t.Fatalf("load: %v, %v", saved, err)
	}
	resumed, err := NewCore(saved.Settings, own, Start{Saved: saved})
	if err != nil {
		t.Fatal(err)
	}
	if resumed.Clock() != 3 || !slices.Equal(resumed.View(), founder.View()) {
		t.Errorf("resumed at clock %d, want 3, with the founder's view: %v", resumed.Clock(), slices.Equal(resumed.View(), founder.View()))
	}
	if got, want := resumed.Config().Optimizer.State().Steps, founder.Config().Optimizer.State().Steps; got != want || got == 0 {
		t.Errorf("optimizer steps %d after resuming, %d before", got, want)
	}
	if live := resumed.Live(); !slices.Equal(live, []string{id}) {
		t.Errorf("live after resuming: %v, want only itself", live)
	}

	if err := os.WriteFile(filepath.Join(dir, checkpoint.FileName), []byte("SKMCKPT\nnot a checkpoint"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadCheckpoint(dir, self, "m"); err == nil || errors.Is(err, ErrForeignCheckpoint) || !strings.Contains(err.Error(), "move it away") {
		t.Errorf("corrupt checkpoint: %v", err)
	}
}
