package node

import (
	"errors"
	"fmt"

	"github.com/sketchmesh/sketchmesh/wire"
)

// Catching up past the frame history.
//
// A node keeps at most SyncConfig.History of its own frames. A member cut
// off for longer (a partition that outlasts the history, a node paused for
// that long) can then lack updates that exist nowhere any more: every side
// of a long partition lacks the other's. No resend can close that gap, and
// waiting for it would stall the mesh for good. So:
//
//   - a node asked for its own updates below the oldest it keeps answers
//     "gone" with that oldest clock (only the origin's word counts: a
//     member can always withhold its own updates, never another's);
//   - a node told that a live member's updates it lacks are gone rejoins:
//     it drops its state and starts again as a new incarnation from a
//     snapshot of a member of the side it lacks (Ready.Events carries
//     EventRejoin with that member; the driver runs the join), which
//     supersedes its old incarnation everywhere, so nobody waits for the
//     old one's gone updates either;
//   - a node that lacks gone updates of live members none of which lacks
//     anything of its side that is gone (as one that was down or paused
//     for long, whose own updates all reached the others before) is
//     simply behind: it rejoins. That such a member was cut off from it
//     is no sign that the lack is mutual: the other side of a split that
//     trained slower holds all its gone updates, which its members still
//     kept after the heal, and taking the cut-off member for a lacker made
//     such a node keep its state, refusing for good the updates it lacked,
//     while the rest of its side rejoined;
//   - when both sides of a split lack each other's gone updates, one side
//     must keep its state: the side of the smallest id. The decision is by
//     sides, not by pairs: a node rejoins when the smallest id among the
//     other side is below the smallest among its own. The other side is
//     the members whose gone updates it lacks, and those it lacks none of
//     but which are not of its side either: one it told that its own
//     updates are gone, or one whose updates reached it more than half
//     the history after its rows had passed them (cut off from it, see
//     noteCutOff). Without those two, a member whose updates up to the
//     split had reached both sides counted on each side's own, and when
//     it had the smallest id both sides kept their state and refused each
//     other's updates for good. Compared pairwise, a member that joined
//     the keeping side (a large id) would take the other side's smaller
//     ids for a reason to rejoin, through a member that rejoins itself,
//     and the two sides would trade members for ever. Since the two
//     directions are learned at different times, a node decides
//     SuspectTicks after its first gone notice, not at once, and again at
//     every tick until it must; until the driver has carried a rejoin
//     out, it is reviewed at every tick (reviewRejoin);
//   - a node whose side keeps by that rule, and which would rejoin only as
//     "simply behind" (it knows of no member it lacks that lacks anything
//     of its side), waits twice as long. That a member it lacks lacks its
//     side's gone updates is learned by the origin of those updates (it
//     answered "gone") and by the members the lacker happened to ask for
//     them, one in turn: the rest of the side hears nothing of it. When the
//     lack is mutual the lacker's side rejoins, and that every member
//     hears of (the new incarnation supersedes the old one), so the lacker
//     is given the time to decide: its own first gone notice comes within
//     SuspectTicks of this node's, as above, and it decides SuspectTicks
//     after it. Deciding at once, the members of one side that the lacker
//     had not asked yet rejoined through it while it was deciding to
//     rejoin itself, and ended with its dropped state: two views for good;
//   - a node that lacks none of the other side's gone updates follows its
//     side when the side rejoins (followSide): it took them all in time,
//     from their origins before these dropped them or from a member that
//     held them while their origin was dead to it, but the other side
//     lacks some of its side's, and those must be lost to the mesh with
//     the side's other updates made while it was cut off. That its side
//     rejoins it learns when a member of its side is superseded by an
//     incarnation that a member of the other side admitted, and it follows
//     only when the other side lacks something of its side (behind) and
//     the side rule agrees: the other side's smallest id is below its own
//     side's. Without it, such a node kept its state and the updates of
//     its side's old incarnations the other side never got: two views for
//     good;
//
// A member "lacks something of this node's side that is gone" (lacksOurs)
// when it asked this node for updates this node holds and cannot resend:
// its own below the oldest it keeps (it answered "gone", until a later
// request of the member's shows it took them after all), or another
// origin's it holds but no longer keeps, when that origin cannot resend
// them either: it is down, or this node knows of a clock of it more than
// History past them (a live origin keeps its last History updates). A
// member that lacks what this node or the origin can still send it is only
// catching up: counted behind, a node of a split's larger side took the
// single member of the other, which had fetched everything from the
// origins, for behind, kept its state while the rest of its side rejoined
// through that member, and held what they dropped.
//
// The rejoining side's updates made while it was cut off are lost to the
// mesh: they were in no view but its own side's, which it drops. None of
// them may enter a view of the other side either, or its members would
// hold different updates: one that fetched them before the origin trimmed
// them, or from a member that kept them longer (a leaver still up after
// the heal), and one told "gone". So an update of a live member for a row
// this node committed, its entry for that member more than History below
// the clock this node accepts up to (acceptBound; a late one, which its
// origin may no longer keep), is taken from its origin, which answers
// "gone" for what it no longer keeps, or from another member only once
// the origin itself has sent one at or below it (RejectLateRelayed). An
// origin keeps its last History updates and, training at the mesh's pace,
// is no further ahead than that clock, so a shorter gap holds nothing it
// has dropped. Measured from this node's rows instead, which trail its
// clock while the origin may be s + 1 clocks past it, a gap of History
// rows held an update its origin had dropped: a relay passed it on to the
// members the origin had told "gone", that side lacked nothing, and the
// other, which held them for behind, kept its state too. The last updates
// of a member that died without notice still come from whoever holds
// them. A leaving member, which trains no more and so keeps the others'
// frames long after their origins dropped them, resends only its own
// (handleSync).

// EventRejoin is reported when the node must rejoin through Event.Member.
const EventRejoin EventKind = 100

const (
	goneTag = "gone"
	// goneFields is the gone notice's field count; its array header is
	// 0x90|goneFields.
	goneFields = 4
)

// RejectBadGone counts gone notices that do not parse or do not come from
// the origin they speak of.
const RejectBadGone RejectReason = "bad_gone"

// ErrBadGone is wrapped by every gone notice decoding error.
var ErrBadGone = errors.New("bad gone notice")

// EncodeGone writes a gone notice: origin keeps none of its updates below
// oldest.
//
//	[2, "gone", origin str, oldest uint]
func EncodeGone(origin string, oldest uint64) []byte {
	w := wire.NewWriter()
	w.Array(goneFields)
	w.Uint(syncKind)
	w.String(goneTag)
	w.String(origin)
	w.Uint(oldest)
	return w.Bytes()
}

// isGone reports whether data, a sync-kind message, is a gone notice.
func isGone(data []byte) bool {
	return len(data) >= 7 && data[2] == 0xa0|byte(len(goneTag)) && string(data[3:7]) == goneTag
}

// DecodeGone parses a gone notice.
func DecodeGone(data []byte) (origin string, oldest uint64, err error) {
	r := wire.NewReader(data)
	fail := func(err error) (string, uint64, error) { return "", 0, fmt.Errorf("%w: %w", ErrBadGone, err) }
	if err := r.Fields("gone notice", goneFields); err != nil {
		return fail(err)
	}
	kind, err := r.Uint("kind")
	if err != nil {
		return fail(err)
	}
	tag, err := r.String("tag", len(goneTag))
	if err != nil {
		return fail(err)
	}
	if kind != syncKind || tag != goneTag {
		return fail(fmt.Errorf("kind %d %q, want %d %q", kind, tag, syncKind, goneTag))
	}
	if origin, err = r.String("origin", MaxMemberIDBytes); err != nil {
		return fail(err)
	}
	if oldest, err = r.Uint("oldest"); err != nil {
		return fail(err)
	}
	if err := r.End(); err != nil {
		return fail(err)
	}
	return origin, oldest, nil
}

// answerGone tells from, which asked for this node's own updates above
// have, that those below the oldest kept are gone, and reports whether it
// did: the updates above them are then not sent (whoever lacks the gone
// ones will rejoin, or make this node rejoin, and must not hold them).
func (n *Node) answerGone(from string, have uint64) bool {
	if have >= n.clock {
		return false
	}
	oldest := n.clock + 1
	if log := n.logOf(n.memberSlot(n.cfg.ID)); len(log) > 0 {
		oldest = log[0].clock
	}
	if oldest <= have+1 {
		return false
	}
	if n.toldGone == nil {
		n.toldGone = map[string]bool{}
	}
	n.toldGone[from] = true
	n.proto.direct = append(n.proto.direct, Message{To: from, Data: EncodeGone(n.cfg.ID, oldest)})
	return true
}

// handleGone records that origin's updates below oldest are gone, and
// decides whether this node must rejoin.
func (n *Node) handleGone(from string, data []byte) {
	origin, oldest, err := DecodeGone(data)
	if err != nil || origin != from || !n.isMember(origin) {
		n.reject(RejectBadGone)
		return
	}
	if n.gone == nil {
		n.gone = map[string]uint64{}
	}
	if oldest > 0 && oldest-1 > n.gone[origin] {
		n.gone[origin] = oldest - 1
		if n.goneSince == 0 {
			n.goneSince = n.proto.tick + 1
		}
	}
}

// lacksOurs reports whether member m lacks updates of this node's side
// that neither this node nor their origin can resend: this node's own,
// which it told m are gone, or another origin's (noteLacking).
//
// The first holds only until m shows it took them after all, its entry for
// this node in a later request reaching past them (handleSync): from a
// member of this node's side that still kept them, within the history by
// m's own rows, which may trail the origin's. Counted for good, that one
// stale notice made the origin's side keep its state while the rest of
// the side rejoined: two views for good.
func (n *Node) lacksOurs(m string) bool {
	return n.behind[m] || n.toldGone[m]
}

// lacksGone reports whether the node lacks some of member q's updates
// that are gone.
func (n *Node) lacksGone(q string) bool {
	g, ok := n.gone[q]
	return ok && n.vc.Get(q) < g
}

// noteLacking records that from, asking for origin's updates above have
// (an origin other than this node), lacks one this node holds but no
// longer keeps, so cannot resend, and which origin no longer keeps either:
// a gap of this node's side that may exist nowhere any more.
func (n *Node) noteLacking(from, origin string, have uint64, log []retained) {
	if !n.vc.Has(origin, have+1) || (len(log) > 0 && log[0].clock <= have+1) {
		return
	}
	if n.live.up(origin) && have+1+uint64(n.sc.History) > max(n.vc.Get(origin), n.AnnouncedClock(origin)) {
		// A live origin keeps its last History updates, up to a clock at
		// least the one this node knows of: from may still fetch it there.
		return
	}
	if n.behind == nil {
		n.behind = map[string]bool{}
	}
	n.behind[from] = true
}

// acceptFrom is accept for an update that from passed on, with the rule
// for late updates of live members (see above).
func (n *Node) acceptFrom(from string, u Update, q int) RejectReason {
	late := u.Origin != n.cfg.ID && u.Clock <= n.committedClock && q >= 0 && !n.vc.hasAt(q, u.Clock)
	// The origin, at the mesh's pace no further than acceptBound, keeps
	// its last History updates: a shorter gap holds none it has dropped.
	past := late && n.acceptBound()-n.vc.getAt(q) > uint64(n.sc.History)
	if past && from != u.Origin && n.live.up(u.Origin) {
		if shown, ok := n.lateShown[u.Origin]; !ok || u.Clock < shown {
			return RejectLateRelayed
		}
	}
	if reason := n.accept(u, q); reason != "" || !late {
		return reason
	}
	n.noteCutOff(u.Origin, u.Clock-1)
	if _, ok := n.lateShown[u.Origin]; !ok && from == u.Origin {
		if n.lateShown == nil {
			n.lateShown = map[string]uint64{}
		}
		n.lateShown[u.Origin] = u.Clock
	}
	if n.vc.getAt(q) >= n.committedClock {
		delete(n.lateShown, u.Origin)
	}
	return ""
}

// decideRejoin runs at each tick (see above).
func (n *Node) decideRejoin() {
	if n.proto.rejoin != "" {
		n.reviewRejoin()
		return
	}
	if by := n.followSide(); by != "" {
		n.startRejoin(by, 0)
		return
	}
	if n.goneSince == 0 || n.proto.tick-(n.goneSince-1) < uint64(n.sc.SuspectTicks) {
		return
	}
	var lacking []string
	ownSide, anyBehind := n.cfg.ID, false
	for _, m := range n.liveList {
		switch {
		case m != n.cfg.ID && n.lacksGone(m):
			lacking = append(lacking, m)
			anyBehind = anyBehind || n.lacksOurs(m)
		case m != n.cfg.ID && (n.toldGone[m] || n.cutOffLong(m)):
			// Not of this node's side, though it lacks none of m's gone
			// updates: m lacks this node's own, or m's updates reached
			// this node long after its rows had passed them.
			anyBehind = anyBehind || n.lacksOurs(m)
		default:
			ownSide = min(ownSide, m)
		}
	}
	if len(lacking) == 0 || (anyBehind && lacking[0] > ownSide) {
		return
	}
	if lacking[0] > ownSide && n.proto.tick-(n.goneSince-1) < 2*uint64(n.sc.SuspectTicks) {
		// Simply behind only for want of a sign that the lack is mutual,
		// which reaches only some of this side: give the members it lacks
		// the time to rejoin themselves if it is (see above).
		return
	}
	n.startRejoin(lacking[0], n.gone[lacking[0]])
}

// startRejoin decides that the node rejoins through m and reports it;
// clock is the last of m's updates that are gone (0: none it lacks).
func (n *Node) startRejoin(m string, clock uint64) {
	n.proto.rejoin = m
	n.proto.events = append(n.proto.events, Event{Kind: EventRejoin, Member: m, Clock: clock})
}

// otherSide reports whether member m is not of this node's side of a
// split: this node lacks some of its gone updates, told it that its own
// are gone, or took its updates long after its rows had passed them.
func (n *Node) otherSide(m string) bool {
	return n.lacksGone(m) || n.toldGone[m] || n.cutOffLong(m)
}

// followSide returns the member through which a node that lacks none of
// the other side's gone updates rejoins with its side (see above), or "".
// It rejoins when a live member of the other side is behind, a member of
// its own side was superseded by an incarnation that a live member of the
// other side admitted (the one it rejoins through), and the other side's
// smallest live id is below its own side's, that member's old incarnation
// counted: by the side rule, its side is the one that rejoins.
func (n *Node) followSide() string {
	if !n.lackedByOtherSide(n.behind) && !n.lackedByOtherSide(n.toldGone) {
		return ""
	}
	// The smallest ids of this node's side and of the other.
	ownSide, theirs, by := n.cfg.ID, "", ""
	for _, m := range n.members {
		switch {
		case m == n.cfg.ID:
		case n.otherSide(m):
			if n.live.up(m) && (theirs == "" || m < theirs) {
				theirs = m
			}
		case n.live.up(m):
			ownSide = min(ownSide, m)
		default:
			next := n.MemberOf(nameOf(m))
			if next == "" || next == m {
				continue
			}
			if i, who := n.info(next), n.admittedBy(next); i != nil && n.live.up(who) && n.otherSide(who) {
				ownSide = min(ownSide, m)
				if by == "" {
					by = who
				}
			}
		}
	}
	if by == "" || theirs > ownSide {
		return ""
	}
	return by
}

// lackedByOtherSide reports whether a live member of the other side is in
// lackers (behind or toldGone).
func (n *Node) lackedByOtherSide(lackers map[string]bool) bool {
	for m := range lackers {
		if n.live.up(m) && n.otherSide(m) {
			return true
		}
	}
	return false
}

// noteCutOff records, for an update of m taken for a row this node had
// committed without it, whether the rows were more than half the history
// past have, the update before it: whether m was cut off from this node,
// and the rows' clock when it last was. Half the history tells the other
// side of a split from a member whose update was only lost or slow: the
// gap of a split that left gone updates behind is about the history, and
// a resend closes a loss within a few rows.
func (n *Node) noteCutOff(m string, have uint64) {
	if have >= n.committedClock || n.committedClock-have <= uint64(n.sc.History)/2 {
		return
	}
	if n.cutOff == nil {
		n.cutOff = map[string]uint64{}
	}
	n.cutOff[m] = n.committedClock
}

// cutOffLong reports whether m's updates once reached this node more than
// half the history after its rows had passed them (noteCutOff).
func (n *Node) cutOffLong(m string) bool {
	_, ok := n.cutOff[m]
	return ok
}

// keepsCutOff reports whether this node keeps m's frames as if some member
// were down, up to twice the history: it took m's updates across a gap of
// more than half the history within the last two histories of rows. If
// m's side is the one that rejoins, m's incarnation is superseded, and the
// members of this node's side that lack those updates can get them only
// from a member that took them; the Window would have dropped all but the
// newest at once. Twice the history holds a gap of up to one history and
// the updates m made while the sides found each other.
func (n *Node) keepsCutOff(m string) bool {
	at, ok := n.cutOff[m]
	return ok && n.committedClock <= at+2*uint64(n.sc.History)
}

// reviewRejoin revisits a rejoin the driver has not carried out yet: the
// member it goes through may have rejoined itself (it lacked gone updates
// of a third side, and this node's through it), and then this node may
// lack nothing gone any more: its rejoin is called off; otherwise it goes
// through another member whose gone updates it lacks.
func (n *Node) reviewRejoin() {
	if n.live.up(n.proto.rejoin) && n.lacksGone(n.proto.rejoin) {
		return
	}
	for _, m := range n.liveList {
		if m != n.cfg.ID && n.lacksGone(m) {
			n.proto.rejoin = m
			return
		}
	}
	n.proto.rejoin = n.followSide()
}

// RejoinDonors returns, while the node must rejoin, the members it may
// rejoin through, the one Rejoining names first: the live members whose
// gone updates it lacks. Any other member may be of its own side, about to
// rejoin too, and its snapshot would lack the same updates.
func (n *Node) RejoinDonors() []string {
	if n.proto.rejoin == "" {
		return nil
	}
	donors := []string{n.proto.rejoin}
	for _, m := range n.liveList {
		if m != n.proto.rejoin && m != n.cfg.ID && n.lacksGone(m) {
			donors = append(donors, m)
		}
	}
	return donors
}

// Rejoining returns the member this node must rejoin through, or "".
func (n *Node) Rejoining() string { return n.proto.rejoin }
