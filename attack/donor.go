package attack

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/sketchmesh/sketchmesh/mesh"
	"github.com/sketchmesh/sketchmesh/node"
)

// The donor-lie kind: the attacker answers the joiner's join request (the
// joiner asks it first) as a member would, with a plan a few rounds ahead
// of the mesh, naming the honest nodes as the members to ask; then, once
// every node is two clocks past the plan, with a welcome whose rows are not
// the mesh's (every parameter 0 but the first, 1), which claim every
// member's updates up to the plan's clock, whose pending frames are the
// nodes' updates above it with one byte changed each, and with its own
// signed admission of the joiner, which it also announces to every node.
// The joiner must refuse the rows (its second member's digest differs),
// join through an honest node as a new incarnation that supersedes the one
// the attacker admitted, and end with the mesh's view.

// DonorLie is the kind's name.
const DonorLie = "donor-lie"

// serveLies makes the attacker's host answer join requests with lies.
func (a *Attacker) serveLies(ctx context.Context) {
	mesh.ServeJoinsWith(a.host, a.joinTimeout, func(q mesh.JoinRequest, plan *mesh.JoinPlan) (mesh.JoinPlan, *mesh.JoinReply, error) {
		if plan == nil {
			return a.liePlan(), nil, nil
		}
		reply, err := a.lieWelcome(ctx, q, plan.Clock)
		return *plan, reply, err
	})
}

// liePlan names a clock ahead of every node, as an honest donor would, so
// that the nodes the joiner asks hold their rows there and answer.
func (a *Attacker) liePlan() mesh.JoinPlan {
	a.mu.Lock()
	var top uint64
	for _, c := range a.sentClock {
		top = max(top, c)
	}
	a.mu.Unlock()
	p := mesh.JoinPlan{Clock: top + 2*(a.staleness+1) + 8}
	for _, v := range a.victims {
		p.Members = append(p.Members, mesh.PeerRecord{Member: v.Host.ID(), Addrs: addrStrings(v.Host)})
	}
	return p
}

// lieWelcome waits until every node is two clocks past at, so that the
// attacker holds updates above it to alter, and makes its welcome.
func (a *Attacker) lieWelcome(ctx context.Context, q mesh.JoinRequest, at uint64) (*mesh.JoinReply, error) {
	deadline := time.Now().Add(a.joinTimeout / 2)
	for !a.allPast(at + 2) {
		if a.done(ctx) || time.Now().After(deadline) {
			return nil, fmt.Errorf("the mesh did not reach clock %d", at+2)
		}
		time.Sleep(5 * time.Millisecond)
	}
	snap := &node.Snapshot{Clock: at, View: make([]float64, a.params)}
	snap.View[0] = 1
	for _, v := range a.victims {
		snap.Members = append(snap.Members, node.MemberEntry{ID: v.Host.ID(), Live: true, High: at})
		for c := at + 1; c <= at+2; c++ {
			if u, ok := a.seenUpdate(v.Host.ID(), c); ok {
				altered := bytes.Clone(u.Frame)
				altered[len(altered)-1] ^= 0x40
				snap.Pending = append(snap.Pending, node.Update{Origin: u.Origin, Clock: c, Frame: altered, Sig: u.Sig})
				a.count(1)
			}
		}
	}
	snap.Members = append(snap.Members, node.MemberEntry{ID: a.id, Live: true, High: at})
	admit := node.Announcement{Kind: node.KindAdmit, Member: q.Member, Entry: at, JoinSig: q.Sig, Signer: a.id}
	sig, err := a.auth.SignMessage(node.AnnouncementSignedBytes(admit))
	if err != nil {
		return nil, err
	}
	admit.Sig = sig
	// A member may admit a joiner that asked it: the admission is valid,
	// not part of what the attack tried.
	for _, v := range a.victims {
		a.host.Send(v.Host.ID(), node.EncodeAnnouncement(admit))
	}
	a.count(1) // the rows
	return &mesh.JoinReply{
		Settings: a.settings, Snapshot: snap,
		Admission: node.Admission{Member: q.Member, Entry: at, Signer: a.id, Sig: sig, JoinSig: q.Sig},
		Members:   append([]mesh.PeerRecord{{Member: a.id, Addrs: addrStrings(a.host)}}, a.liePlan().Members...),
	}, nil
}

// allPast reports whether the attacker has every node's own update of
// clock c.
func (a *Attacker) allPast(c uint64) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, v := range a.victims {
		if a.sentClock[v.Host.ID()] < c {
			return false
		}
	}
	return true
}
