package attack

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/sketchmesh/sketchmesh/codec"
	"github.com/sketchmesh/sketchmesh/mesh"
	"github.com/sketchmesh/sketchmesh/node"
)

// The hostile peer's membership kinds. The attacker is a member: it signs
// with its own key, which is every right a member has. What it says in
// others' names, or of members it has no right to speak for, must change
// nothing (see node/liveness.go):
//
//	admit-forge        admits of live members' peers with made-up
//	                   incarnations (without their request), and of fresh
//	                   ids it made keys for (valid, but at most
//	                   node.MaxSilentAdmits count, and each is suspected
//	                   once silent)
//	hello-forge        hellos of a non-member, bare and with an admission
//	                   signed by another non-member, and hellos in other
//	                   members' names signed with its own key
//	stale-incarnation  after admitting a new incarnation of itself, hellos
//	                   of its old one; and the victims' own hellos replayed
//	leave-forge        leave notices in other members' names
//	leave-linger       its own leave notice after clock leaveLingerClock,
//	                   sent again with every clock after and every
//	                   heartbeat, while it stays and goes on saying hellos
//	                   and sending updates (see linger): the
//	                   members acknowledge, stop waiting for it and refuse
//	                   its updates past the notice (after_leave)
//	sync-amplify       sync requests for every origin's updates from clock
//	                   0 up to the largest clock, eight per clock
//	donor-lie          a joiner's snapshot with rows that are not the
//	                   mesh's and altered pending frames (donor.go)

// MembershipKinds lists the kinds above.
var MembershipKinds = []string{"admit-forge", "hello-forge", "stale-incarnation", "leave-forge", "leave-linger", "sync-amplify", DonorLie}

// leaveLingerClock is the last clock a leave-linger attacker's notice
// claims.
const leaveLingerClock = 3

// announce signs a as signer (with auth) and sends it to victim.
func (a *Attacker) announce(to string, an node.Announcement, signer string, auth *mesh.KeyAuthenticator) {
	an.Signer = signer
	sig, err := auth.SignMessage(node.AnnouncementSignedBytes(an))
	if err != nil {
		a.log.Error("sign announcement", "err", err)
		return
	}
	an.Sig = sig
	a.count(1)
	a.host.Send(to, node.EncodeAnnouncement(an))
}

// fresh returns the k-th made-up identity: a member id with a key of its
// own, the same for every victim.
func (a *Attacker) fresh(k int) (string, *mesh.KeyAuthenticator) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if f, ok := a.made[k]; ok {
		return f.id, f.auth
	}
	seed := bytes.Repeat([]byte{byte(k), byte(k >> 8), 0xa7}, 22)
	key, _, err := crypto.GenerateEd25519Key(bytes.NewReader(seed))
	if err != nil {
		panic(fmt.Sprintf("ed25519 key from a fixed seed: %v", err))
	}
	p, err := peer.IDFromPrivateKey(key)
	if err != nil {
		panic(fmt.Sprintf("peer id of an ed25519 key: %v", err))
	}
	id := mesh.MemberID(p, 1)
	auth, err := mesh.NewKeyAuthenticator(a.meshName, id, key)
	if err != nil {
		panic(fmt.Sprintf("authenticator of a made-up member: %v", err))
	}
	a.made[k] = madeUp{id: id, auth: auth}
	return id, auth
}

type madeUp struct {
	id   string
	auth *mesh.KeyAuthenticator
}

// membershipAttack sends victim this clock's membership attack.
func (a *Attacker) membershipAttack(to string, clock uint64) {
	others := func() []string {
		var out []string
		for _, v := range a.victims {
			if id := v.Host.ID(); id != to {
				out = append(out, id)
			}
		}
		return out
	}
	switch a.kind {
	case "admit-forge":
		for _, v := range others() {
			joiner := fmt.Sprintf("%s/%d", v, clock+1)
			ownSig, _ := a.auth.SignMessage(node.JoinSignedBytes(joiner, a.id))
			a.announce(to, node.Announcement{Kind: node.KindAdmit, Member: joiner, Entry: clock, JoinSig: ownSig}, a.id, a.auth)
		}
		if clock <= 2*node.MaxSilentAdmits {
			id, auth := a.fresh(int(clock))
			joinSig, _ := auth.SignMessage(node.JoinSignedBytes(id, a.id))
			a.announce(to, node.Announcement{Kind: node.KindAdmit, Member: id, Entry: clock, JoinSig: joinSig}, a.id, a.auth)
		}
	case "hello-forge":
		id, auth := a.fresh(1000 + int(clock))
		pal, palAuth := a.fresh(2000 + int(clock))
		a.announce(to, node.Announcement{Kind: node.KindHello, Member: id, Clock: clock, Seq: clock}, id, auth)
		cert := node.Announcement{Kind: node.KindAdmit, Member: id, Entry: 0, Signer: pal}
		certSig, _ := palAuth.SignMessage(node.AnnouncementSignedBytes(cert))
		a.announce(to, node.Announcement{Kind: node.KindHello, Member: id, Clock: clock, Seq: clock + 1, CertSigner: pal, CertSig: certSig}, id, auth)
		for _, v := range others() {
			a.announce(to, node.Announcement{Kind: node.KindHello, Member: v, Clock: clock, Seq: math.MaxUint32 + clock}, v, a.auth)
		}
	case "stale-incarnation":
		if clock == 2 {
			next := a.id + "/1"
			joinSig, _ := a.auth.SignMessage(node.JoinSignedBytes(next, a.id))
			a.announce(to, node.Announcement{Kind: node.KindAdmit, Member: next, Entry: clock, JoinSig: joinSig}, a.id, a.auth)
			a.reincarnated.Store(true)
		}
		// The rest of this attack rides on the heartbeat: superseded,
		// the old incarnation is routed no more updates to answer.
	case "leave-forge":
		for _, v := range others() {
			a.announce(to, node.Announcement{Kind: node.KindLeave, Member: v, Clock: clock}, v, a.auth)
		}
	case "sync-amplify":
		var have []node.SyncEntry
		for _, v := range a.victims {
			have = append(have, node.SyncEntry{Origin: v.Host.ID(), Clock: 0})
		}
		req := node.EncodeSync(node.SyncMessage{Upto: math.MaxUint64, Have: have})
		for range 8 {
			a.count(1)
			a.host.Send(to, req)
		}
	}
}

// linger sends victim to, once the leave-linger attacker's notice went
// there, its next update past the notice and the notice again: a member
// that left is routed no updates, which drive the other kinds' clocks.
func (a *Attacker) linger(to string) {
	a.mu.Lock()
	clock, left := a.lingering[to]
	if left {
		clock++
		a.lingering[to] = clock
	}
	a.mu.Unlock()
	if !left {
		return
	}
	a.sendHostile(to, clock, rawFrame(codec.Sparse{Keys: []uint64{}, Values: []float32{}}))
	a.announce(to, node.Announcement{Kind: node.KindLeave, Member: a.id, Clock: leaveLingerClock}, a.id, a.auth)
}

// heartbeat says hello to every victim every 500 ms, as a member does, so
// the honest nodes' failure detectors keep the attacker live (and keep
// routing it their updates, to which it answers with its attack).
func (a *Attacker) heartbeat(ctx context.Context) {
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for seq := uint64(1); ; seq++ {
		select {
		case <-a.stopped:
			return
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		hello := node.Announcement{Kind: node.KindHello, Member: a.id, Seq: seq, Signer: a.id}
		sig, err := a.auth.SignMessage(node.AnnouncementSignedBytes(hello))
		if err != nil {
			continue
		}
		hello.Sig = sig
		stale := a.kind == "stale-incarnation" && a.reincarnated.Load()
		for _, v := range a.victims {
			to := v.Host.ID()
			if stale {
				// Once superseded, its own hellos are an old
				// incarnation's; with them, the other victims' first
				// hellos, replayed.
				a.count(1)
				a.mu.Lock()
				var old [][]byte
				for from, hs := range a.hellos {
					if from != to {
						old = append(old, hs...)
					}
				}
				a.mu.Unlock()
				for _, h := range old {
					a.count(1)
					a.host.Send(to, h)
				}
			}
			a.host.Send(to, node.EncodeAnnouncement(hello))
			if a.kind == "leave-linger" {
				a.linger(to)
			}
		}
	}
}

// rememberHello keeps the first hellos each victim sent the attacker, to
// replay them later.
func (a *Attacker) rememberHello(from string, data []byte) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.hellos[from]) < 3 {
		a.hellos[from] = append(a.hellos[from], bytes.Clone(data))
	}
}

// membersOutsideRules counts, over the honest nodes, the members they hold
// that are neither honest nodes, nor the attacker's own incarnations, nor
// the made-up joiners a member may admit: what a forgery would have added.
func (a *Attacker) membersOutsideRules(members []Victim) (outside, madeUpAdmitted uint64) {
	allowed := map[string]bool{a.id: true, a.id + "/1": true}
	// The joiner's incarnations: each asked for its admission.
	for _, m := range members {
		for _, id := range m.Core.Members() {
			if p, err := mesh.PeerOf(id); err == nil && a.joiner != "" && p.String() == a.joiner {
				allowed[id] = true
			}
		}
	}
	for _, m := range members {
		allowed[m.Host.ID()] = true
	}
	made := map[string]bool{}
	for k, f := range a.made {
		if k < 1000 {
			made[f.id] = true
		}
	}
	for _, m := range members {
		for _, id := range m.Core.Members() {
			switch {
			case allowed[id]:
			case made[id]:
				madeUpAdmitted++
			default:
				outside++
			}
		}
	}
	return outside, madeUpAdmitted
}
