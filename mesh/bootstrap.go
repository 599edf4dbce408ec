package mesh

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/sketchmesh/sketchmesh/checkpoint"
	"github.com/sketchmesh/sketchmesh/node"
)

// Bootstrap: what a long-running node does before its daemon runs. It
// founds a mesh, resumes from its checkpoint, or joins (JoinAny, which
// retries through the next member as a new incarnation); NewCore then
// builds the core from where it starts.

// ErrForeignCheckpoint is wrapped when a checkpoint directory holds the
// checkpoint of another peer or of another mesh.
var ErrForeignCheckpoint = errors.New("the checkpoint is not this node's")

// LoadCheckpoint reads the checkpoint in dir, nil when there is none, and
// checks that it belongs to peer self in the mesh meshName (else an error
// that wraps ErrForeignCheckpoint). A corrupt checkpoint is an error: it
// is never silently replaced.
func LoadCheckpoint(dir string, self peer.ID, meshName string) (*checkpoint.State, error) {
	st, err := checkpoint.Load(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w (move it away to start afresh)", dir, err)
	}
	owner, err := PeerOf(st.Member)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	if owner != self {
		return nil, fmt.Errorf("%w: %s holds the checkpoint of peer %s, not of this key's peer %s", ErrForeignCheckpoint, dir, owner, self)
	}
	if st.Mesh != meshName {
		return nil, fmt.Errorf("%w: %s holds a checkpoint of mesh %q, not %q", ErrForeignCheckpoint, dir, st.Mesh, meshName)
	}
	return st, nil
}

// SaveCheckpoint writes n's committed rows, clock and optimizer state, with
// the mesh's name and settings, to dir.
func SaveCheckpoint(dir, meshName string, s node.Settings, n *node.Node) error {
	rows := n.Rows()
	return checkpoint.Save(dir, &checkpoint.State{
		Mesh: meshName, Member: n.ID(), Settings: s, Clock: n.Clock(), Rows: &rows,
		Optimizer: n.Config().Optimizer.State(),
	})
}

// Start says where a new core starts: from a join reply's snapshot (a
// joiner), from a checkpoint (a founder that resumes), or, with both nil,
// at clock 0 as the only member (a founder).
type Start struct {
	Reply *JoinReply
	Saved *checkpoint.State
}

// NewCore builds the core of a node with the mesh's settings s. cfg holds
// what is the node's own (ID, batch, seed, shard or batches, signer,
// budget, robust screen, history); the model, optimizer, codec and every
// mesh-wide field come from s, and the members and starting rows from
// start:
//
//   - a joiner starts from the reply's snapshot and is handed the frames
//     the snapshot holds above its rows (JoinReply.ReplayPending);
//   - a founder that resumes starts from its checkpoint's rows without
//     their pending frames, with its optimizer's state, and with every
//     other member not live: it does not wait for them until they
//     announce themselves;
//   - a founder starts fresh, its own only member.
func NewCore(s node.Settings, cfg node.Config, start Start) (*node.Node, error) {
	mdl, opt, cdc, err := s.Build()
	if err != nil {
		return nil, fmt.Errorf("mesh settings: %w", err)
	}
	cfg.Model, cfg.Optimizer, cfg.Codec = mdl, opt, cdc
	cfg.ErrorFeedback, cfg.Staleness, cfg.Iterations, cfg.Factors = s.ErrorFeedback, s.Staleness, s.Iterations, s.Factors
	cfg.LocalSteps, cfg.Outer, cfg.OuterRate = s.LocalSteps, s.Outer, s.OuterRate
	if cfg.Iterations == 0 {
		// A mesh without an end trains until stopped.
		cfg.Iterations = ^uint64(0)
	}
	cfg.Members = []string{cfg.ID}
	switch {
	case start.Reply != nil:
		cfg.Members, cfg.Start, cfg.Admission = nil, start.Reply.Snapshot, &start.Reply.Admission
	case start.Saved != nil:
		rows := *start.Saved.Rows
		rows.Pending = nil
		rows.Members = slices.Clone(rows.Members)
		for i := range rows.Members {
			rows.Members[i].Live = false
		}
		cfg.Members, cfg.Start = nil, &rows
	}
	if start.Saved != nil {
		if err := opt.Restore(start.Saved.Optimizer); err != nil {
			return nil, fmt.Errorf("checkpoint optimizer state: %w", err)
		}
	}
	n, err := node.New(cfg)
	if err != nil {
		return nil, err
	}
	start.Reply.ReplayPending(n)
	return n, nil
}
