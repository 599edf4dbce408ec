package testnet

import (
	"context"
	"fmt"
	"slices"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/sketchmesh/sketchmesh/attack"
	"github.com/sketchmesh/sketchmesh/mesh"
	"github.com/sketchmesh/sketchmesh/model"
	"github.com/sketchmesh/sketchmesh/netmodel"
	"github.com/sketchmesh/sketchmesh/node"
)

// adversary is the hook through which Run hosts a hostile peer (package
// attack): Run calls it at fixed points of a run and knows nothing of what
// it does. A run without Config.Attack has noAdversary, which changes
// nothing.
type adversary interface {
	// members returns the mesh's member ids given the nodes'.
	members(ids []string) []string
	// router returns the run's overlay given the nodes'.
	router(r netmodel.Router) netmodel.Router
	// donor is the host a joiner asks first, nil for none.
	donor() *mesh.Host
	// start launches the attack once the nodes run; stop ends it.
	start(ctx context.Context)
	stop()
	// report is what the attack did to members (nil when nothing to
	// report); joined is how many updates a joiner owed every node.
	report(members []*member, rejected map[node.RejectReason]uint64, iterations int, joined func(*node.Node) uint64) *AttackReport
}

// AttackKinds lists the hostile peer's kinds (attack.Kinds).
var AttackKinds = attack.Kinds

// AttackReport is what an attack did (attack.Report).
type AttackReport = attack.Report

// quietMember is the baseline of the member kinds (attack.Quiet).
const quietMember = attack.Quiet

// newAdversary starts the hostile peer of cfg.Attack, or none.
func newAdversary(ctx context.Context, cfg Config, victims []*member) (adversary, error) {
	if cfg.Attack == "" {
		return noAdversary{}, nil
	}
	key, err := attackerKey(cfg.Seed)
	if err != nil {
		return nil, err
	}
	ac := attack.Config{
		Kind: cfg.Attack, Seed: cfg.Seed, Key: key, PSK: cfg.PSK, MeshName: cfg.meshName(),
		Staleness: uint64(cfg.Staleness), JoinTimeout: joinerJoinTimeout, Logger: cfg.Logger,
	}
	if cfg.joinAt() > 0 {
		key, err := cfg.joinerKey()
		if err != nil {
			return nil, err
		}
		id, err := peer.IDFromPrivateKey(key)
		if err != nil {
			return nil, fmt.Errorf("joiner: %w", err)
		}
		ac.Joiner = id.String()
	}
	if cfg.Attack == attack.DonorLie {
		mdl, err := model.NewModel(cfg.Model, cfg.L2, cfg.Train)
		if err != nil {
			return nil, err
		}
		ac.Params, ac.Settings = mdl.NumParams(), cfg.settings(mdl)
	}
	a, err := attack.New(ctx, ac, victimsOf(victims))
	if err != nil {
		return nil, err
	}
	return hostile{a}, nil
}

// victimsOf is what the attacker sees of the members.
func victimsOf(members []*member) []attack.Victim {
	out := make([]attack.Victim, len(members))
	for i, m := range members {
		out[i] = attack.Victim{Host: m.host, Core: m.core, Allow: m.allow}
	}
	return out
}

// noAdversary is a run without a hostile peer.
type noAdversary struct{}

func (noAdversary) members(ids []string) []string            { return ids }
func (noAdversary) router(r netmodel.Router) netmodel.Router { return r }
func (noAdversary) donor() *mesh.Host                        { return nil }
func (noAdversary) start(context.Context)                    {}
func (noAdversary) stop()                                    {}
func (noAdversary) report([]*member, map[node.RejectReason]uint64, int, func(*node.Node) uint64) *AttackReport {
	return nil
}

// hostile hosts an attack.Attacker; a member attacker sits on the overlay
// as a leaf and counts among the members.
type hostile struct{ a *attack.Attacker }

func (h hostile) members(ids []string) []string {
	if !h.a.Member() {
		return ids
	}
	return append(slices.Clone(ids), h.a.ID())
}

func (h hostile) router(r netmodel.Router) netmodel.Router {
	if !h.a.Member() {
		return r
	}
	return leafRouter{Router: r, leaf: h.a.ID()}
}

func (h hostile) donor() *mesh.Host {
	if !h.a.Member() {
		return nil
	}
	return h.a.Host()
}

func (h hostile) start(ctx context.Context) { h.a.Start(ctx) }
func (h hostile) stop()                     { h.a.Stop() }

func (h hostile) report(members []*member, rejected map[node.RejectReason]uint64, iterations int, joined func(*node.Node) uint64) *AttackReport {
	return h.a.Report(victimsOf(members), rejected, iterations, joined)
}
