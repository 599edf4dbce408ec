package node

import (
	"errors"
	"fmt"
	"slices"
)

// Admission: who may bring a member in, and at which entry. An admit
// counts when signed by a current member and carrying the joiner's own
// request bound to that member (or, in a hello, the joiner's word with the
// admitting member's signature); one incarnation has one entry; a member
// brings in at most MaxSilentAdmits joiners nobody hears from; a newer
// incarnation supersedes the older ones. A joiner admitted on the other
// side of a split longer than the frame history is an ordinary member:
// whatever a member of this side takes of its updates, the others can
// fetch from it (keepsCutOff, catchup.go).

// onAdmit applies a verified admit (or a hello's admission).
func (n *Node) onAdmit(a Announcement, fromHello bool) RejectReason {
	if !n.canAdmit(a.Signer, a.Entry) {
		return RejectForgedAnnouncement
	}
	if n.isMember(a.Member) {
		if n.entryOf[a.Member] != a.Entry && !fromHello {
			return RejectReadmit
		}
		if q := n.vc.slot(a.Member); !fromHello && n.infoAt(q) != nil && (n.extraAt(q) == nil || n.extraAt(q).admit == nil) && n.verifyJoin(a.Member, a.Signer, a.JoinSig) {
			// Heard of first from its hello: keep the admit to send on.
			x := n.moreAt(q)
			x.admit, x.admittedAt = EncodeAnnouncement(a), n.proto.tick
		}
		return ""
	}
	if !fromHello {
		if !n.verifyJoin(a.Member, a.Signer, a.JoinSig) {
			return RejectForgedAnnouncement
		}
		if n.silentAdmits(a.Signer) >= MaxSilentAdmits {
			return RejectAdmitLimit
		}
	}
	n.admit(a.Member, a.Entry, a.Signer)
	if fromHello {
		n.info(a.Member).set(flagSpoke, true)
	} else {
		x := n.moreAt(n.vc.slot(a.Member))
		x.admit, x.admittedAt = EncodeAnnouncement(a), n.proto.tick
		n.forwardAdmit(a.Member, a.Entry, x.admit)
	}
	return ""
}

// verifyJoin checks joiner's request to be admitted by donor's peer.
func (n *Node) verifyJoin(joiner, donor string, sig []byte) bool {
	if n.cfg.Auth == nil {
		return true
	}
	return len(sig) > 0 && n.cfg.Auth.VerifyMessage(joiner, JoinSignedBytes(joiner, nameOf(donor)), sig) == nil
}

// silentAdmits counts the members signer's admit announcements brought in
// that were never heard from, whatever became of them since: an honest
// joiner speaks within a heartbeat (and one whose admit was refused admits
// itself with the admission its hellos carry), so only made-up joiners
// count, for the signer's whole incarnation.
func (n *Node) silentAdmits(signer string) int {
	k := 0
	for _, m := range n.members {
		if i := n.info(m); i != nil && n.admittedBy(m) == signer && !i.spoke() {
			k++
		}
	}
	return k
}

// canAdmit reports whether signer's admission at entry counts: signer is
// a member of this node and its peer's newest incarnation, and if it has
// left, it admitted before its last update (a donor may leave before its
// joiner's first hello reaches everyone).
func (n *Node) canAdmit(signer string, entry uint64) bool {
	if signer == n.cfg.ID {
		return true
	}
	if !n.isMember(signer) || n.MemberOf(nameOf(signer)) != signer {
		return false
	}
	last, gone := n.left[signer]
	return !gone || entry <= last
}

// admit adds member at entry and retires its peer's older incarnations.
func (n *Node) admit(member string, entry uint64, by string) {
	n.AddMember(member, entry)
	n.trackMember(member)
	if q := n.vc.slot(member); by != "" || n.extraAt(q) != nil {
		n.moreAt(q).admittedBy = by
	}
	n.supersede(member)
	n.proto.events = append(n.proto.events, Event{Kind: EventJoined, Member: member, Clock: entry, By: by})
	n.proto.membershipChanged = true
	if p := &n.proto; p.leaving && p.leaveNotice != nil && !slices.Contains(p.acked, member) {
		// Admitted from a snapshot taken before this node's notice reached
		// its donor: it counts this node live and would wait for it.
		p.unacked[member] = true
		p.direct = append(p.direct, Message{To: member, Data: p.leaveNotice})
	}
	if by != n.cfg.ID && n.proto.rejoin == "" {
		n.sendOwnSince(member, entry)
	}
}

// sendOwnSince sends a member that just joined this node's own updates
// above its entry: those made before this node knew of it went to the
// others only, and the joiner's gate needs them (its donor's snapshot
// carries only what the donor held). The donor's own are in the snapshot.
func (n *Node) sendOwnSince(member string, entry uint64) {
	i := n.memberSlot(n.cfg.ID)
	if i < 0 {
		return
	}
	for _, r := range n.logOf(i) {
		if r.clock > entry {
			n.outbox[member] = append(n.outbox[member], queued(r))
		}
	}
}

// supersede declares dead every older incarnation of member's peer.
func (n *Node) supersede(member string) {
	name, inc := SplitMember(member)
	for _, m := range n.members {
		if mn, mi := SplitMember(m); mn != name || mi >= inc || m == n.cfg.ID {
			continue
		}
		if _, gone := n.left[m]; gone || (!n.live.up(m) && !n.Suspected(m)) {
			continue
		}
		n.DeclareDead(m)
		n.proto.events = append(n.proto.events, Event{Kind: EventSuperseded, Member: m, By: member})
	}
}

// ErrAdmit is wrapped by the reasons Admit refuses a joiner.
var ErrAdmit = errors.New("cannot admit")

// Admit admits joiner, as its donor, on its signed request joinSig (see
// JoinSignedBytes; ignored in an unsigned mesh): it enters at this node's rows' clock,
// older incarnations of its peer are declared dead, and the signed admit is
// broadcast. It returns the snapshot the joiner starts from and the
// joiner's admission. A member id already admitted is refused (one
// incarnation, one entry: a retried join comes as a new incarnation), as is
// an incarnation below one already known.
func (n *Node) Admit(joiner string, joinSig []byte) (Snapshot, Admission, error) {
	if err := n.CheckAdmit(joiner, joinSig); err != nil {
		return Snapshot{}, Admission{}, err
	}
	// Older incarnations go first, so the joiner does not wait for them.
	n.supersede(joiner)
	snap := n.Snapshot()
	a := Announcement{Kind: KindAdmit, Member: joiner, Entry: snap.Clock, JoinSig: joinSig}
	if !n.sign(&a) {
		return Snapshot{}, Admission{}, fmt.Errorf("%w: cannot sign the admission", ErrAdmit)
	}
	n.admit(joiner, snap.Clock, n.cfg.ID)
	data := EncodeAnnouncement(a)
	n.info(joiner).heard = uint32(n.proto.tick)
	x := n.moreAt(n.vc.slot(joiner))
	x.admit, x.admittedAt = data, n.proto.tick
	n.proto.bcast = append(n.proto.bcast, data)
	n.proto.admits = append(n.proto.admits, recentAdmit{data: data, until: n.proto.tick + admitResends*uint64(n.sc.HeartbeatTicks)})
	n.rebuildIfChanged()
	return snap, Admission{Member: joiner, Entry: snap.Clock, Signer: n.cfg.ID, Sig: a.Sig, JoinSig: joinSig}, nil
}

// CheckAdmit reports whether Admit would admit joiner now, without
// admitting it: a driver that takes the joiner's rows later (HoldRows)
// refuses at once what it will refuse then.
func (n *Node) CheckAdmit(joiner string, joinSig []byte) error {
	if err := CheckMemberID(joiner); err != nil {
		return fmt.Errorf("%w: %w", ErrAdmit, err)
	}
	if !n.verifyJoin(joiner, n.cfg.ID, joinSig) {
		return fmt.Errorf("%w: the join request of %s is not signed by its key", ErrAdmit, joiner)
	}
	if joiner == n.cfg.ID || n.isMember(joiner) {
		return fmt.Errorf("%w: %s is a member already (entry %d); join again as a new incarnation", ErrAdmit, joiner, n.entryOf[joiner])
	}
	if n.proto.leaving {
		return fmt.Errorf("%w: this member is leaving", ErrAdmit)
	}
	if n.proto.rejoin != "" {
		return fmt.Errorf("%w: this member fell behind the frame history and is rejoining", ErrAdmit)
	}
	name, inc := SplitMember(joiner)
	if cur, ok := n.peerInc(name); ok && inc <= cur {
		return fmt.Errorf("%w: incarnation %d of %s is not above the %d already admitted", ErrAdmit, inc, name, cur)
	}
	return nil
}
