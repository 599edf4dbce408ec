package testnet

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/sketchmesh/sketchmesh/attack"
	"github.com/sketchmesh/sketchmesh/dataset"
	"github.com/sketchmesh/sketchmesh/mesh"
	"github.com/sketchmesh/sketchmesh/model"
	"github.com/sketchmesh/sketchmesh/node"
)

// A joiner.
//
// With Config.JoinAt set (and always under the donor-lie attack and its
// baseline), one more node joins the running mesh when node 0 reaches that
// iteration, as `run --join` does: through the join protocol, asking the
// hostile peer first when it is a member and node 0 next
// (mesh.JoinAny), with its snapshot checked against a second member's
// rows. Every node then trains a full mesh over the members it knows, so
// the joiner is routed updates like everyone else. It trains on node 0's
// shard. The joiner is not one of the report's nodes: what it shows is in
// the attack report (applied_invalid when it started from rows that were
// not the mesh's or ended with a view that is not node 0's; the snapshots
// it refused among rejected; stalled when it did not finish).

// joinerJoinTimeout bounds each of the joiner's join attempts.
const joinerJoinTimeout = 20 * time.Second

// joinAt is the iteration of node 0 at which the joiner joins; 0: none.
func (c *Config) joinAt() int {
	switch {
	case c.JoinAt > 0:
		return c.JoinAt
	case c.Attack == attack.DonorLie:
		return max(1, c.Iterations/4)
	}
	return 0
}

// joinerKey is the joiner's identity, derived from the seed after the
// nodes'.
func (c *Config) joinerKey() (crypto.PrivKey, error) { return nodeKey(c.Seed, c.Nodes) }

// settings are the mesh's settings as a member sends them to a joiner.
func (c *Config) settings(mdl *model.Model) node.Settings {
	mc := mdl.Config()
	return node.Settings{Model: mc.Kind, MaxFeature: mc.MaxFeature, Classes: mc.Classes, L2: mc.L2,
		Optimizer: c.Optimizer, LearningRate: c.LR, Staleness: c.Staleness, Codec: c.Codec,
		ErrorFeedback: c.ErrorFeedback, Factors: c.Factors, Iterations: uint64(c.Iterations)}
}

// joiner is the node that joins during the run.
type joiner struct {
	*member
	key crypto.PrivKey
	// through is the member whose snapshot it started from; refused the
	// snapshots it refused before, by reason; err why it did not join.
	through string
	entry   uint64
	refused map[node.RejectReason]uint64
}

// startJoiner starts the joiner's host (nil when the run has none) and
// connects it to every node, as the nodes are connected to each other.
func startJoiner(ctx context.Context, cfg Config, members []*member) (*joiner, error) {
	if cfg.joinAt() == 0 {
		return nil, nil
	}
	key, err := cfg.joinerKey()
	if err != nil {
		return nil, err
	}
	hc := mesh.HostConfig{ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"}, Key: key, Logger: cfg.Logger}
	if err := cfg.secureHost(&hc); err != nil {
		return nil, err
	}
	h, err := mesh.NewHost(hc)
	if err != nil {
		return nil, fmt.Errorf("joiner: %w", err)
	}
	for _, m := range members {
		if err := h.Connect(ctx, addrInfo(m)); err != nil {
			_ = h.Close()
			return nil, fmt.Errorf("joiner: %w", err)
		}
	}
	return &joiner{member: &member{host: h, net: h, allow: hc.Allow}, key: key, refused: map[node.RejectReason]uint64{}}, nil
}

// fullAddr is m's first address with its peer id, as --join takes it.
func fullAddr(h *mesh.Host) (ma.Multiaddr, error) {
	a := h.Libp2p().Addrs()[0]
	return ma.NewMultiaddr(a.String() + "/p2p/" + h.Libp2p().ID().String())
}

// run waits for node 0 to reach the join iteration, joins and trains to
// the end. It returns when the joiner is done or the run ends.
func (j *joiner) join(ctx context.Context, cfg Config, members []*member, att adversary, mdl *model.Model, shard *dataset.Dataset, build func(node.Config) (*node.Node, error)) error {
	at := uint64(cfg.joinAt())
	for members[0].clock.Load() < at {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	var donors []ma.Multiaddr
	if h := att.donor(); h != nil {
		a, err := fullAddr(h)
		if err != nil {
			return err
		}
		donors = append(donors, a)
	}
	a, err := fullAddr(members[0].host)
	if err != nil {
		return err
	}
	donors = append(donors, a)
	first := j.host.ID()
	signer, err := mesh.NewKeyAuthenticator(cfg.meshName(), first, j.key)
	if err != nil {
		return err
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	reply, refused, err := mesh.JoinAny(ctx, j.host, donors, mesh.JoinRequest{
		Mesh: cfg.meshName(), Member: first, Settings: cfg.settings(mdl), Addrs: addrStrings(j.host),
	}, signer.SignMessage, joinerJoinTimeout, logger.With("joiner", first))
	j.refused = refused
	if err != nil {
		return fmt.Errorf("joiner: %w", err)
	}
	j.through, j.entry = reply.Admission.Signer, reply.Admission.Entry
	id := reply.Admission.Member
	opt, err := model.NewOptimizer(cfg.Optimizer, cfg.LR, mdl.NumParams())
	if err != nil {
		return err
	}
	var auth node.Authenticator
	if cfg.Sign {
		if auth, err = mesh.NewKeyAuthenticator(cfg.meshName(), id, j.key); err != nil {
			return err
		}
	}
	core, err := build(node.Config{ID: id, Start: reply.Snapshot, Admission: &reply.Admission, Auth: auth, Optimizer: opt,
		BatchSize: cfg.batchRows(len(shard.Rows)), Shard: shard.Rows})
	if err != nil {
		return fmt.Errorf("joiner: %w", err)
	}
	reply.ReplayPending(core)
	j.core = core
	j.clock.Store(core.Clock())
	// Updates sent to the joiner before its address was known may be
	// lost: it asks for what it misses, as a long-running node does.
	driver, err := mesh.NewDaemon(ctx, mesh.DaemonConfig{
		Mesh: cfg.meshName(), Host: j.host, Node: core, Settings: cfg.settings(mdl), Peers: reply.Members,
		RelayWindow: cfg.RelayWindow, DeadAfter: cfg.DeadAfter, JoinTimeout: joinerJoinTimeout,
		Overlay:          func(live []string, _ map[string]string) node.Router { return node.NewFullMesh(live) },
		OverlayBroadcast: true, Progress: -1, Logger: nodeLogger(cfg.Logger), Sites: "off",
		AfterTrain: func(n *node.Node, _ time.Duration) { j.clock.Store(n.Clock()) },
	})
	if err != nil {
		return fmt.Errorf("joiner: %w", err)
	}
	j.member.run, err = driver.Run(ctx)
	return err
}

func addrInfo(m *member) peer.AddrInfo {
	return peer.AddrInfo{ID: m.host.Libp2p().ID(), Addrs: m.host.Libp2p().Addrs()}
}

func addrStrings(h *mesh.Host) []string {
	var out []string
	for _, a := range h.Libp2p().Addrs() {
		out = append(out, a.String())
	}
	return out
}

// check adds what the joiner shows to an attack report: the snapshots it
// refused, whether it started from rows other than an honest node's, and
// whether it ended with node 0's view. What its core refused is left out:
// a joiner's duplicates (updates sent it twice as it catches up) are no
// attack's doing.
func (j *joiner) check(r *AttackReport, members []*member, iterations int) {
	if j == nil || r == nil {
		return
	}
	for k, v := range j.refused {
		r.Rejected[string(k)] += v
	}
	if j.core == nil {
		r.Stalled = true
		return
	}
	honest := slices.ContainsFunc(members, func(m *member) bool { return m.host.ID() == j.through })
	if !honest {
		r.AppliedInvalid++
	}
	if !slices.Equal(j.core.View(), members[0].core.View()) {
		r.AppliedInvalid++
	}
	if j.core.Clock() < uint64(iterations) {
		r.Stalled = true
	}
}

// heldBy returns how many of the joiner's updates, one per clock above
// its entry, a member's core holds (nil when the run has no joiner): they
// count among the honest updates the member applied.
func (j *joiner) heldBy(iterations int) func(*node.Node) uint64 {
	if j == nil || j.core == nil {
		return nil
	}
	id := j.core.ID()
	return func(core *node.Node) uint64 {
		var held uint64
		for c := j.entry + 1; c <= uint64(iterations); c++ {
			if core.VectorClock().Has(id, c) {
				held++
			}
		}
		return held
	}
}
