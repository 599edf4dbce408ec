package mesh

import (
	"context"
	"errors"
	"fmt"

	ma "github.com/multiformats/go-multiaddr"
)

// rejoin replaces the core with a new incarnation's, started from a
// snapshot of the member the core named (or of any other live member that
// admits it): the node fell behind the frame history.
func (a *Daemon) rejoin(ctx context.Context) error {
	through := a.n.Rejoining()
	if a.cfg.Rejoin == nil {
		return fmt.Errorf("this node fell behind the frame history (member %s's updates it lacks are gone) and cannot rejoin: restart it with --join", shortMember(through))
	}
	selfPeer, inc, err := MemberPeer(a.self)
	if err != nil {
		return err
	}
	member := MemberID(selfPeer, inc+1)
	var sign func([]byte) ([]byte, error)
	if auth := a.n.Config().Auth; auth != nil {
		sign = auth.SignMessage
	}
	// Only members of the side that keeps its state: any other may be
	// about to rejoin too, and its snapshot would lack the same updates.
	var errs []error
	for _, m := range a.n.RejoinDonors() {
		p, err := a.peerOf(m)
		if err != nil || p == selfPeer {
			continue
		}
		addrs := a.net.KnownAddrs(p)
		if len(addrs) == 0 {
			continue
		}
		full, err := ma.NewMultiaddr(addrs[0].String() + "/p2p/" + p.String())
		if err != nil {
			continue
		}
		a.log.Warn("fell behind the frame history: rejoining by snapshot as a new incarnation", "through", shortMember(m), "new", shortMember(member))
		jctx, cancel := context.WithTimeout(ctx, a.cfg.JoinTimeout)
		reply, err := Join(jctx, a.cfg.Host, full, JoinRequest{Mesh: a.cfg.Mesh, Member: member, Settings: a.cfg.Settings, Addrs: a.addrStrings()}, sign)
		cancel()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		core, err := a.cfg.Rejoin(member, reply)
		if err == nil {
			err = a.cfg.tracedBy(core)
		}
		if err != nil {
			return fmt.Errorf("rejoin as %s: %w", member, err)
		}
		a.n, a.self, a.cfg.Node = core, member, core
		a.log = a.cfg.Logger.With("self", shortMember(member))
		a.configureCore()
		for _, pr := range reply.Members {
			a.learnAddrs(pr.Member, pr.Addrs)
		}
		a.log.Info("rejoined the mesh", "clock", a.n.Clock(), "members", len(a.n.Members()))
		return nil
	}
	return fmt.Errorf("fell behind the frame history and no member admitted this node again: %w", errors.Join(errs...))
}
