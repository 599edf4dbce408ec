package node

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/sketchmesh/sketchmesh/dataset"
)

// The membership protocol: time, failure detection, admission and leave.
//
// Time in the core is a count of ticks: the driver calls Tick at a steady
// pace (the daemon every 100 ms, the simulator on its virtual clock), and
// every timeout below is a number of ticks. Nothing here reads a clock, so
// the simulator runs exactly the protocol a real mesh runs.
//
//   - Every HeartbeatTicks a node broadcasts a signed hello (Ready.Broadcast),
//     unless it sent an update of its own lately (within half of
//     SuspectTicks, at least HeartbeatTicks) and sees every member live:
//     that update, relayed to every member, is its sign of life, and a mesh
//     that trains says no hellos, which cost P² deliveries a heartbeat. A
//     member's suspicion timeout runs from when that update reached it, so
//     the other half leaves the hellos that follow (one a heartbeat, two at
//     least while SuspectTicks is four heartbeats or more) time to arrive;
//     a quarter had a mesh whose members waited at their gates for a little
//     longer (the first updates crossing 10,000 members) say a round of
//     hellos for nothing.
//     It still says one every RefreshTicks (its round, addresses and
//     admission reach every member, and a member that suspected it wrongly
//     hears it again before it would declare it dead), when its site or
//     addresses change, while an admit it made is being resent, and as long
//     as it sees a member down (so a member cut off hears it the moment the
//     link heals).
//   - A member is heard only through what the core accepts of it: a valid
//     announcement other than a leave notice, or one of its own updates
//     applied; relayed, such an update keeps a live member live but brings
//     no suspected one back (see heardUpdate). Updates it relays, sync
//     requests, duplicates and refusals are no evidence (a superseded
//     incarnation's peer still sends them). A live member silent for the suspicion timeout is
//     suspected (Suspect: the gate no longer waits for it, it keeps its
//     share of the step, see scale.go); suspected and silent for the death
//     timeout, it is declared dead (DeclareDead). The suspicion timeout is
//     SuspectTicks or ten of the slowest member's rounds, whichever is
//     longer, so a mesh of slow iterations is not taken for a dead one; the
//     death timeout grows with it.
//   - A suspected member that is heard again is live again; a dead one only
//     on a fresh hello (a member cut off long enough to be declared dead
//     that comes back).
//   - Admit makes this node the donor of a joiner: the joiner enters at the
//     donor's rows' clock, the admit is signed and broadcast (and sent
//     again with the donor's next hellos, see admission.go), and the joiner
//     carries the signed admission in its hellos, so a member that missed
//     the admit still learns the same entry. One incarnation has one entry:
//     a retried join is a new incarnation, which supersedes the old.
//   - Leave sends a signed notice to every live member directly and resends
//     it every HeartbeatTicks to those that have not acknowledged it. A
//     member acknowledges once it holds the leaver's updates up to the
//     notice's clock, asking the leaver for those a resent notice finds
//     missing.
//
// What the protocol decides is reported in Ready.Events for the driver to
// log and to act on (dial a member, drop a queue); so is a member whose view
// digest differs from this node's (EventDiverged, see digest.go).

// EventKind says what changed in the membership (or, for EventDiverged,
// what anti-entropy found).
type EventKind uint8

// Membership events.
const (
	EventJoined     EventKind = 1 + iota // a member was admitted
	EventSuspected                       // a live member fell silent
	EventDead                            // a member was declared dead
	EventBack                            // a suspected or dead member was heard again
	EventLeft                            // a member's leave notice arrived
	EventSuperseded                      // a member was replaced by its peer's newer incarnation
	EventLeaveAcked                      // a member acknowledged this node's leave
	EventAddrs                           // a member announced other addresses
	// EventDiverged: a member's view digest differs from this node's of
	// the same row (Clock): their committed views have drifted apart (see
	// digest.go).
	EventDiverged
)

func (k EventKind) String() string {
	switch k {
	case EventJoined:
		return "joined"
	case EventSuspected:
		return "suspected"
	case EventDead:
		return "dead"
	case EventBack:
		return "back"
	case EventLeft:
		return "left"
	case EventSuperseded:
		return "superseded"
	case EventLeaveAcked:
		return "leave_acked"
	case EventAddrs:
		return "addrs"
	case EventDiverged:
		return "diverged"
	case EventRejoin:
		return "rejoin"
	}
	return fmt.Sprintf("event(%d)", k)
}

// Event is one membership change.
type Event struct {
	Kind   EventKind
	Member string
	// Clock is the entry (joined), the last update (left), the row whose
	// digests differ (diverged), or the member's last announced clock.
	Clock uint64
	// Silent is how many ticks the member had been silent (suspected, dead).
	Silent uint64
	// By is the admitting member (joined) or the new incarnation
	// (superseded).
	By string
	// Waiting is set on a leave whose last updates have not all arrived.
	Waiting bool
	// Withholding is set on a suspicion of a member that is heard from
	// but whose updates the gate needs do not come.
	Withholding bool
}

// Timing defaults, in ticks (100 ms each in the daemon).
const (
	DefaultHeartbeatTicks = 5
	DefaultSuspectTicks   = 50
	DefaultDeadTicks      = 200
)

// memberExtra is what only some members have: who admitted a joiner and
// its admit as this node verified it (to send a member that missed it,
// resendAdmits), and the addresses a member announced (a simulated one
// announces none).
type memberExtra struct {
	admittedBy string
	// admit is sent again to a member back from a silence that began
	// before admittedAt, the tick this node took it in.
	admit      []byte
	admittedAt uint64
	addrs      []string
}

// protocol is the membership state of a node.
type protocol struct {
	tick uint64
	// states[q] is the record of the member of vector clock slot q (not
	// tracked for none); Node.info finds it by id. A map by id beside it
	// cost each simulated core about 40 bytes per member. extras are the
	// extra records, sorted by slot (see memberstate.go).
	states []memberState
	extras []slotExtra
	// peers[i] is the highest incarnation admitted on the peer name of
	// slot i of the vector clock's table, if peerKnown[i]: a map by name
	// cost each simulated core about 40 bytes per member. peersShared
	// says both are still the slot table's (SlotTable.sharePeers), which
	// setPeerInc copies before it writes.
	peers       []uint64
	peerKnown   []bool
	peersShared bool
	// Own hellos and round time; period is the mean ticks between two
	// Trains (thousandths, as round), waits included.
	helloSeq, lastHello uint64
	// lastSpoke is the tick of this node's last own update, if spoken;
	// announce is set when its site or addresses changed since its last
	// hello.
	lastSpoke            uint64
	spoken, announce     bool
	round, lastTrainTick uint64
	period               uint64
	// Asking (asking.go): whether the node is stalled and since when, and
	// the ticks of its last requests of each kind.
	stalled                              bool
	stalledAt, lastStallAsk, lastEntropy uint64
	trained, gateOpen                    bool
	gateOpenAt                           uint64
	addrs                                []string
	site                                 string
	// Outputs since the last Ready.
	bcast  [][]byte
	direct []Message
	events []Event
	// Leaving: the notice, who has acknowledged it, who has not.
	leaving       bool
	leaveNotice   []byte
	unacked       map[string]bool
	acked         []string
	lastLeaveSend uint64
	// leaveAsked is, per member whose leave this node has not yet
	// acknowledged, the tick it last waited on or asked for the leaver's
	// last updates (onLeave).
	leaveAsked map[string]uint64
	// admits are the admit announcements this node made lately, resent
	// with its hellos until their tick (see hello).
	admits []recentAdmit
	// membershipChanged asks for the overlay to be rebuilt; overlayStale
	// says it was asked for and is built when the node next routes.
	membershipChanged bool
	overlayStale      bool
	// overlayKey digests the overlay's input (see OverlayKey): sums of
	// keyOf over the live members not leaving; overlaySummed[q] is whether
	// the member of vector clock slot q is in the sum. A member's labelled
	// term is keyOf of its id and the label it has now (siteOf), computed
	// again when it leaves the sum or its label changes: kept, it cost a
	// simulated core 8 bytes per member. overlayKeyStale says it is summed
	// again when asked for (after a snapshot, or many changes),
	// overlayDirty lists the members whose liveness or leaving changed
	// since (overlayChanged); a label changes one term.
	overlayKey      OverlayKey
	overlaySummed   []bool
	overlayKeyStale bool
	overlayDirty    []string
	// withholders counts the members suspected of withholding
	// (memberState.withholding).
	withholders int
	// rejoin is the member this node must rejoin through (catchup.go).
	rejoin string
}

// recentAdmit is an admit announcement and the tick up to which it is resent.
type recentAdmit struct {
	data  []byte
	until uint64
}

// admitResends is how many heartbeats an admit is resent with the hellos: a
// broadcast can be lost, and a member that missed it while the joiner said
// nothing (killed at once, say) would refuse the joiner's updates that
// every other member holds. An identical admit is a no-op to whoever has
// it.
const admitResends = 3

func (n *Node) initProtocol() {
	n.proto.states = make([]memberState, 0, len(n.members))
	n.proto.withholders = 0
	t := n.vc.table
	if t.isStart(n.members) && t.startPeersKnown {
		// The peers' incarnations are those of the table's start list,
		// which a node before this one worked out: only the records are
		// this node's.
		for _, q := range n.memberSlots {
			n.trackSlot(q)
		}
		n.proto.peers, n.proto.peerKnown, n.proto.peersShared = t.startPeers, t.startPeerKnown, true
		return
	}
	n.proto.peers = make([]uint64, 0, len(n.members))
	n.proto.peerKnown = make([]bool, 0, len(n.members))
	n.proto.peersShared = false
	for _, m := range n.members {
		n.trackMember(m)
	}
	n.proto.peers, n.proto.peerKnown = t.sharePeers(n.proto.peers, n.proto.peerKnown)
	n.proto.peersShared = true
	if t.isStart(n.members) {
		t.startPeers, t.startPeerKnown, t.startPeersKnown = n.proto.peers, n.proto.peerKnown, true
	}
}

// Tick advances the core's time by one tick: hellos, failure detection,
// leave retransmission and the requests for what the node lacks (asking.go)
// happen here.
func (n *Node) Tick() {
	p := &n.proto
	p.tick++
	n.payReplies()
	if p.leaving {
		if p.tick-p.lastLeaveSend >= uint64(n.sc.HeartbeatTicks) {
			n.sendLeave()
		}
		return
	}
	if p.tick-p.lastHello >= uint64(n.sc.HeartbeatTicks) && n.helloDue() {
		n.hello()
	}
	n.detect()
	n.decideRejoin()
	n.rebuildIfChanged()
	n.noteGate()
	n.askWhenDue()
}

// meanTicks folds a new sample into a running mean of tick counts (a tenth
// of its weight), the first sample taken as it is.
func meanTicks(mean, sample uint64) uint64 {
	if mean == 0 {
		return sample
	}
	return (9*mean + sample) / 10
}

// Ticks returns the core's time in ticks.
func (n *Node) Ticks() uint64 { return n.proto.tick }

// SetSite sets the site label this node's hellos carry, as the driver
// derives it from its measured round-trip times (halton.SiteLabel), and
// rebuilds the overlay when it changed. A label that CheckSite refuses is
// an error and changes nothing.
func (n *Node) SetSite(label string) error {
	if err := CheckSite(label); err != nil {
		return fmt.Errorf("set site: %w", err)
	}
	if label != n.proto.site {
		n.relabel(n.cfg.ID, n.proto.site, label)
		n.proto.site = label
		n.proto.membershipChanged, n.proto.announce = true, true
		n.rebuildIfChanged()
	}
	return nil
}

// Sites returns the site label of every member that announced one, this
// node's own included: what Config.Overlay builds the overlay from.
func (n *Node) Sites() map[string]string {
	// Sized at once: a core rebuilds its overlay from this on each first
	// hello, P times over P members while a mesh starts.
	sites := make(map[string]string, len(n.proto.states)+1)
	if n.proto.site != "" {
		sites[n.cfg.ID] = n.proto.site
	}
	for q := range n.proto.states {
		i := &n.proto.states[q]
		if m := n.vc.nameAt(q); i.tracked() && m != n.cfg.ID {
			if site := n.cardOf(i).site; site != "" {
				sites[m] = site
			}
		}
	}
	return sites
}

// SetAddrs sets the addresses this node's hellos carry.
func (n *Node) SetAddrs(addrs []string) {
	if !slices.Equal(addrs, n.proto.addrs) {
		n.proto.addrs = slices.Clone(addrs)
		n.proto.announce = true
	}
}

// Addrs returns the addresses member last announced.
func (n *Node) Addrs(member string) []string {
	if x := n.extraOf(member); x != nil && n.info(member) != nil {
		return slices.Clone(x.addrs)
	}
	return nil
}

// peerInc returns the highest incarnation admitted on peer name, and
// whether there is one.
func (n *Node) peerInc(name string) (uint64, bool) {
	i, ok := n.vc.table.lookup(name)
	if !ok || i >= len(n.proto.peers) || !n.proto.peerKnown[i] {
		return 0, false
	}
	return n.proto.peers[i], true
}

// setPeerInc records inc as the highest incarnation admitted on name.
func (n *Node) setPeerInc(name string, inc uint64) {
	i := n.vc.table.intern(name)
	if n.proto.peersShared {
		n.proto.peers, n.proto.peerKnown = slices.Clone(n.proto.peers), slices.Clone(n.proto.peerKnown)
		n.proto.peersShared = false
	}
	n.proto.peers, n.proto.peerKnown = reach(n.proto.peers, i), reach(n.proto.peerKnown, i)
	n.proto.peers[i], n.proto.peerKnown[i] = inc, true
}

// MemberOf returns the member id of the newest incarnation admitted on
// peer name, or "" when no member runs on it.
func (n *Node) MemberOf(name string) string {
	inc, ok := n.peerInc(name)
	if !ok {
		return ""
	}
	// Without fmt and a slice of the two candidates: heard calls it for
	// every envelope that brings a member's own update.
	if id := name + "/" + strconv.FormatUint(inc, 10); n.isMember(id) {
		if _, i := SplitMember(id); i == inc {
			return id
		}
	}
	if n.isMember(name) {
		if _, i := SplitMember(name); i == inc {
			return name
		}
	}
	return ""
}

// suspectAfter is the suspicion timeout in ticks: the floor, or ten of the
// slowest live member's rounds.
func (n *Node) suspectAfter() uint64 {
	slowest := n.proto.round
	for _, q := range n.liveSlots {
		if i := n.infoAt(q); i != nil {
			slowest = max(slowest, n.cardOf(i).round)
		}
	}
	return max(uint64(n.sc.SuspectTicks), 10*slowest/1000)
}

// deadAfter is the death timeout: DeadTicks, stretched as the suspicion
// timeout is.
func (n *Node) deadAfter() uint64 { return n.deadAfterSuspect(n.suspectAfter()) }

// deadAfterSuspect is deadAfter for a suspicion timeout already found:
// suspectAfter walks every live member.
func (n *Node) deadAfterSuspect(suspect uint64) uint64 {
	return uint64(n.sc.DeadTicks) + suspect - uint64(n.sc.SuspectTicks)
}

func (n *Node) detect() {
	p := &n.proto
	suspect := n.suspectAfter()
	dead := n.deadAfterSuspect(suspect)
	// By slot: the walk is O(P) per tick, and map lookups by id were most
	// of it.
	for k, m := range n.members {
		q := n.memberSlots[k]
		i := n.infoAt(q)
		if m == n.cfg.ID || i == nil {
			continue
		}
		silent := i.silentAt(p.tick)
		state := n.live.at(q)
		live := state == liveUp
		if !live {
			// Its hold on the gate counts from when it is live again.
			i.blockedSince = 0
		}
		if silent < suspect && silent < dead {
			// Heard from lately, the usual case: of the cases below only
			// the last can hold.
			if live {
				n.detectWithholding(m, q, i, dead)
			}
			continue
		}
		if state == liveDown {
			// Dead or gone, as most silent members are under churn: none of
			// the cases below holds (a leaving member is live, a suspected
			// one's liveness not known), and their lookups by id, each tick
			// for each such member, were a tenth of a churning simulator's
			// time.
			continue
		}
		switch {
		case n.Leaving(m) && silent >= suspect:
			// It left, and its last updates never came.
			n.DeclareDead(m)
			p.events = append(p.events, Event{Kind: EventDead, Member: m, Clock: i.clock, Silent: silent, Waiting: true})
			p.membershipChanged = true
		case live && silent >= suspect && !i.spoke() && !n.foundedWith(m):
			// Admitted, never heard from: no update of it can be in any
			// row, so it keeps no share of the step (a made-up joiner).
			n.DeclareDead(m)
			p.events = append(p.events, Event{Kind: EventDead, Member: m, Clock: i.clock, Silent: silent})
			p.membershipChanged = true
		case live && silent >= suspect:
			n.Suspect(m)
			p.events = append(p.events, Event{Kind: EventSuspected, Member: m, Clock: i.clock, Silent: silent})
			p.membershipChanged = true
		case state == liveUnknown && n.Suspected(m) && silent >= dead:
			n.DeclareDead(m)
			p.events = append(p.events, Event{Kind: EventDead, Member: m, Clock: i.clock, Silent: silent})
			p.membershipChanged = true
		case live:
			n.detectWithholding(m, q, i, dead)
		}
	}
}

// foundedWith reports whether m was a member when this node started (its
// configured members or its snapshot's): those may have sent updates
// before this node heard them.
func (n *Node) foundedWith(m string) bool {
	return n.info(m) != nil && n.admittedBy(m) == ""
}

// detectWithholding suspects a live member whose updates this node's gate
// has needed, without its entry moving, for the death timeout although the
// node asks for them: a member that only says hello, or only passes on
// others' updates, must not hold everyone's gate for good, whatever clock
// it claims. An honest member makes an update every round, far within the
// timeout (stretched with the slowest round), and one held back itself is
// suspected only once nothing has moved for that long. It stays suspected
// until one of its missing updates arrives.
func (n *Node) detectWithholding(m string, q int, i *memberState, after uint64) {
	p := &n.proto
	need, have := n.syncNeed(), n.vc.getAt(q)
	if need == 0 || have >= need || uint32(have) != i.withheld {
		i.blockedSince, i.withheld = 0, uint32(have)
		return
	}
	if i.blockedSince == 0 {
		i.blockedSince = max(uint32(p.tick), 1) // 0 is none: a tick later at worst
		return
	}
	if ticksSince(p.tick, i.blockedSince) < after {
		return
	}
	i.blockedSince, i.withheld = 0, uint32(have)
	i.set(flagWithholding, true)
	n.proto.withholders++
	n.Suspect(m)
	p.events = append(p.events, Event{Kind: EventSuspected, Member: m, Clock: i.clock, Withholding: true})
	p.membershipChanged = true
}

// releaseWithholders returns to the live set the members suspected of
// withholding whose updates came after all.
func (n *Node) releaseWithholders() {
	// Called on every envelope: without suspects of withholding (the
	// usual case) it need not look at each of the P members.
	if n.proto.withholders == 0 {
		return
	}
	for _, m := range n.members {
		if i := n.info(m); i != nil && i.withholding() && entryPast(n.vc.Get(m), i.withheld) {
			i.set(flagWithholding, false)
			n.proto.withholders--
			n.heard(m)
		}
	}
}

// heard records that member m showed signs of life; a suspected member is
// live again.
func (n *Node) heard(m string) {
	if i := n.info(m); i != nil {
		n.heardSince(m, i.heardAt(n.proto.tick))
	}
}

// heardSince is heard for a member last heard at tick since, before this
// sign of life: a suspected member that comes back is sent the admits of
// the members taken in since (resendAdmits).
func (n *Node) heardSince(m string, since uint64) {
	i := n.info(m)
	if i == nil || n.MemberOf(nameOf(m)) != m {
		return
	}
	i.hear(n.proto.tick)
	if n.Suspected(m) && !i.withholding() {
		n.PeerUp(m)
		n.proto.events = append(n.proto.events, Event{Kind: EventBack, Member: m, Clock: i.clock})
		n.proto.membershipChanged = true
		n.resendAdmits(m, since)
	}
}

func nameOf(m string) string {
	name, _ := SplitMember(m)
	return name
}

// noteGate records the tick the staleness gate was first found open
// since the last Train: the time a node waits at its gate is not part of
// its round (a mesh stalled for a while must not stretch every timeout).
func (n *Node) noteGate() {
	p := &n.proto
	if !p.gateOpen && n.canTrain() {
		p.gateOpen, p.gateOpenAt = true, p.tick
	}
}

// observeRound updates the node's own round time at each Train: the ticks
// since the later of its last Train and its gate opening, which is what a
// driver that trains on its event loop is deaf for.
func (n *Node) observeRound() {
	p := &n.proto
	n.noteGate()
	if p.trained {
		p.round = meanTicks(p.round, 1000*(p.tick-max(p.lastTrainTick, p.gateOpenAt)))
		p.period = meanTicks(p.period, 1000*(p.tick-p.lastTrainTick))
	}
	p.lastTrainTick, p.trained, p.gateOpen = p.tick, true, false
}

// RejectSignFailed counts announcements this node could not sign (and so
// did not send).
const RejectSignFailed RejectReason = "sign_failed"

// sign fills a's signature; false when the node cannot sign (the
// announcement is then not sent).
func (n *Node) sign(a *Announcement) bool {
	a.Signer = n.cfg.ID
	if n.cfg.Auth == nil {
		return true
	}
	sig, err := n.cfg.Auth.SignMessage(AnnouncementSignedBytes(*a))
	if err != nil {
		n.reject(RejectSignFailed)
		return false
	}
	a.Sig = sig
	return true
}

// verifyAnn checks a's signature (and a hello's admission, when asked).
func (n *Node) verifyAnn(a Announcement) bool {
	if n.cfg.Auth == nil {
		return true
	}
	return len(a.Sig) > 0 && n.cfg.Auth.VerifyMessage(a.Signer, AnnouncementSignedBytes(a), a.Sig) == nil
}

// helloDue reports whether this heartbeat's hello is needed (see the
// protocol above): it is skipped only by a node whose own updates speak for
// it to a mesh it sees whole.
func (n *Node) helloDue() bool {
	p := &n.proto
	switch {
	case !p.spoken || p.tick-p.lastSpoke >= uint64(max(n.sc.HeartbeatTicks, n.sc.SuspectTicks/2)):
		return true // nothing of its own on the way
	case p.announce || len(p.admits) > 0 || p.tick-p.lastHello >= uint64(n.sc.RefreshTicks):
		return true
	}
	return n.degraded // some member down that did not leave
}

// heardUpdate records member slot q's update of clock as a sign of life,
// wherever it came from: it is only called for an update that was not in
// the view before, so each clock counts once, and a relay that held
// updates back can keep their origin live for no more than those (under
// SSP, the few clocks the origin may run ahead). It keeps a live member
// live but brings no suspected one back: the updates of a member that
// left or died keep arriving from others' logs after it is gone. That
// takes the member's own word, a hello (at least every RefreshTicks) or a
// message of its own.
func (n *Node) heardUpdate(q int, clock uint64) {
	if i := n.infoAt(q); i != nil {
		i.clock = max(i.clock, clock)
		if n.live.at(q) == liveUp {
			i.hear(n.proto.tick)
		}
	}
}

func (n *Node) hello() {
	p := &n.proto
	p.helloSeq++
	p.lastHello, p.announce = p.tick, false
	a := Announcement{Kind: KindHello, Member: n.cfg.ID, Entry: n.ownEntry(), Clock: n.clock, Seq: p.helloSeq,
		Round: min(p.round, maxRound), Addrs: p.addrs, Site: p.site}
	if c := n.cfg.Admission; c != nil {
		a.CertSigner, a.CertSig = c.Signer, c.Sig
	}
	if n.sign(&a) {
		p.bcast = append(p.bcast, EncodeAnnouncement(a))
	}
	kept := p.admits[:0]
	for _, r := range p.admits {
		if r.until >= p.tick {
			p.bcast = append(p.bcast, r.data)
			kept = append(kept, r)
		}
	}
	p.admits = kept
}

// ownEntry is the clock this node started at.
func (n *Node) ownEntry() uint64 { return n.entryOf[n.cfg.ID] }

// receiveAnnouncement handles one membership message.
func (n *Node) receiveAnnouncement(from string, data []byte) {
	decode := DecodeAnnouncement
	if c := n.cfg.DecodeCache; c != nil {
		decode = c.announcement
	}
	a, err := decode(data)
	if err != nil {
		n.reject(RejectBadAnnouncement)
		return
	}
	// Only what the protocol accepts is a sign of life: a member's peer
	// that sends nothing but refused messages (an old incarnation's
	// hellos, say) must not keep a newer incarnation that never speaks
	// from being declared dead. Nor is a leave notice, resent until it is
	// acknowledged: a member that cannot get the leaver's last updates (the
	// leaver no longer keeps them) holds its acknowledgement back, and the
	// copies would keep the leaver live, and waited for, as long as it
	// resends (TestLeaverWhoseLastUpdatesAreGoneIsDeclaredDead).
	if reason := n.step(a); reason != "" {
		n.reject(reason)
	} else if a.Kind != KindLeave && n.isMember(from) {
		n.heard(from)
	}
	n.rebuildIfChanged()
}

// step applies one decoded announcement; it returns the rejection reason
// or "".
func (n *Node) step(a Announcement) RejectReason {
	if a.Member == n.cfg.ID && a.Kind != KindLeaveAck {
		return "" // our own, back through gossip
	}
	if !n.verifyAnn(a) {
		return RejectForgedAnnouncement
	}
	name, inc := SplitMember(a.Member)
	if cur, ok := n.peerInc(name); ok && inc < cur && a.Kind != KindLeaveAck {
		return RejectStaleIncarnation
	}
	switch a.Kind {
	case KindHello:
		return n.onHello(a)
	case KindAdmit:
		return n.onAdmit(a, false)
	case KindLeave:
		return n.onLeave(a)
	case KindLeaveAck:
		return n.onAck(a)
	}
	return RejectBadAnnouncement
}

func (n *Node) onHello(a Announcement) RejectReason {
	// Every member hears every hello: the member is looked up by id once,
	// and read by slot after.
	q := n.memberSlot(a.Member)
	if q < 0 {
		if a.CertSigner == "" {
			return RejectNotAdmitted
		}
		// The hello is the member's own word: its consent to the
		// admission needs no join signature.
		cert := Admission{Member: a.Member, Entry: a.Entry, Signer: a.CertSigner, Sig: a.CertSig}.admitOf()
		if !n.verifyAnn(cert) {
			return RejectForgedAnnouncement
		}
		if reason := n.onAdmit(cert, true); reason != "" {
			return reason
		}
		if q = n.memberSlot(a.Member); q < 0 {
			return RejectNotAdmitted
		}
	}
	if _, gone := n.left[a.Member]; gone {
		return ""
	}
	i := n.infoAt(q)
	if i == nil {
		return RejectNotAdmitted // a member whose record is not kept yet
	}
	card := n.cardOf(i)
	if a.Seq <= card.seq {
		return RejectStaleHello
	}
	if x := n.extraAt(q); (x == nil && len(a.Addrs) > 0) || (x != nil && !slices.Equal(x.addrs, a.Addrs)) {
		n.moreAt(q).addrs = slices.Clone(a.Addrs)
		n.proto.events = append(n.proto.events, Event{Kind: EventAddrs, Member: a.Member})
	}
	if card.site != a.Site {
		n.relabel(a.Member, card.site, a.Site)
		n.proto.membershipChanged = true
	}
	n.setCard(i, memberCard{seq: a.Seq, round: a.Round, site: a.Site})
	i.clock = a.Clock
	silentSince := i.heardAt(n.proto.tick)
	i.hear(n.proto.tick)
	// Suspected(a.Member) by slot: a member that has not left (above).
	switch n.live.at(q) {
	case liveUnknown:
		n.heardSince(a.Member, silentSince)
	case liveDown:
		n.PeerUp(a.Member)
		n.proto.events = append(n.proto.events, Event{Kind: EventBack, Member: a.Member, Clock: a.Clock})
		n.proto.membershipChanged = true
		n.resendAdmits(a.Member, silentSince)
	}
	return ""
}

// resendAdmits sends member m, back from a silence that began at tick
// since, the admits of the members this node took in after it: a joiner
// admitted while m was cut off, and gone before the link healed, never
// says hello to m, so without its admit m would refuse the joiner's
// updates that every other member holds. A member m knows already is no
// change there (onAdmit).
func (n *Node) resendAdmits(m string, since uint64) {
	// An admit taken in a little before m fell silent may have been on
	// its way to m when the link went: a suspicion timeout earlier.
	since -= min(since, uint64(n.sc.SuspectTicks))
	for _, e := range n.proto.extras {
		x := e.extra
		if n.infoAt(e.slot) == nil || len(x.admit) == 0 || x.admittedAt < since || n.vc.nameAt(e.slot) == m {
			continue
		}
		n.proto.direct = append(n.proto.direct, Message{To: m, Data: x.admit})
	}
}

// forwardAdmit sends the admit of member k, which this node has just
// taken in, to the joiners this node admitted since k's entry: their
// snapshots came from this node when it did not know k yet (its admit
// was cut off on its way here), and k, gone, may never say hello to them.
func (n *Node) forwardAdmit(k string, entry uint64, admit []byte) {
	for _, m := range n.members {
		if i := n.info(m); i != nil && m != k && n.admittedBy(m) == n.cfg.ID && n.entryOf[m] >= entry {
			n.proto.direct = append(n.proto.direct, Message{To: m, Data: admit})
		}
	}
}

func (n *Node) onLeave(a Announcement) RejectReason {
	if !n.isMember(a.Member) {
		return RejectNotAdmitted
	}
	_, repeat := n.left[a.Member]
	if !repeat {
		n.Leave(a.Member, a.Clock)
		if i := n.info(a.Member); i != nil {
			i.heard, i.clock = uint32(n.proto.tick), a.Clock
		}
		n.proto.events = append(n.proto.events, Event{Kind: EventLeft, Member: a.Member, Clock: a.Clock, Waiting: n.Leaving(a.Member)})
		n.proto.membershipChanged = true
	}
	// Two members leaving at once: the other is gone, not waited for.
	if n.proto.leaving {
		delete(n.proto.unacked, a.Member)
	}
	// The acknowledgement lets the leaver go, and with it the one sure
	// source of its last updates, so a member acknowledges only once it
	// holds them (one leaving too at once: its view no longer counts).
	// Those still on their way are acknowledged as they arrive
	// (retireLeavers); a copy of the notice the leaver sent again finds
	// some still missing and asks the leaver for them.
	have := n.vc.Get(a.Member)
	if have >= a.Clock || n.proto.leaving {
		n.ackLeave(a.Member, a.Clock)
		return ""
	}
	// The notice goes out broadcast and direct, and copies come again
	// every heartbeat: the leaver is asked at most once a heartbeat, the
	// first copy only waited on.
	p := &n.proto
	asked, waited := p.leaveAsked[a.Member]
	if waited && p.tick-asked < uint64(n.sc.HeartbeatTicks) {
		return ""
	}
	if p.leaveAsked == nil {
		p.leaveAsked = map[string]uint64{}
	}
	p.leaveAsked[a.Member] = p.tick
	if waited {
		ask := SyncMessage{Upto: a.Clock, Have: []SyncEntry{{Origin: a.Member, Clock: have}}}
		p.direct = append(p.direct, n.request(a.Member, ask))
	}
	return ""
}

// ackLeave acknowledges member m's leave after clock.
func (n *Node) ackLeave(m string, clock uint64) {
	delete(n.proto.leaveAsked, m)
	ack := Announcement{Kind: KindLeaveAck, Member: m, Clock: clock}
	if n.sign(&ack) {
		n.proto.direct = append(n.proto.direct, Message{To: m, Data: EncodeAnnouncement(ack)})
	}
}

func (n *Node) onAck(a Announcement) RejectReason {
	p := &n.proto
	if a.Member != n.cfg.ID || !p.leaving {
		return ""
	}
	if p.unacked[a.Signer] {
		delete(p.unacked, a.Signer)
		p.acked = append(p.acked, a.Signer)
		p.events = append(p.events, Event{Kind: EventLeaveAcked, Member: a.Signer})
	}
	return ""
}

// StartLeave makes this node leave after its current clock: it trains no
// more, and its signed notice goes to every live or suspected member, again
// every
// HeartbeatTicks to those that have not acknowledged it (LeaveStatus).
func (n *Node) StartLeave() {
	p := &n.proto
	if p.leaving {
		return
	}
	p.leaving = true
	a := Announcement{Kind: KindLeave, Member: n.cfg.ID, Entry: n.ownEntry(), Clock: n.clock}
	if !n.sign(&a) {
		return
	}
	p.leaveNotice = EncodeAnnouncement(a)
	// Suspected members are presumed alive: they get the notice too, or
	// they would take this node for dead after their timeouts.
	p.unacked = map[string]bool{}
	for _, m := range n.members {
		if m != n.cfg.ID && !n.Leaving(m) && (n.live.up(m) || n.Suspected(m)) {
			p.unacked[m] = true
		}
	}
	p.bcast = append(p.bcast, p.leaveNotice)
	n.sendLeave()
}

func (n *Node) sendLeave() {
	p := &n.proto
	p.lastLeaveSend = p.tick
	for _, m := range n.members {
		if p.unacked[m] {
			p.direct = append(p.direct, Message{To: m, Data: p.leaveNotice})
		}
	}
}

// LeaveStatus returns, after StartLeave, the members that acknowledged the
// leave and those that have not yet.
func (n *Node) LeaveStatus() (acked, waiting []string) {
	for _, m := range n.members {
		if n.proto.unacked[m] {
			waiting = append(waiting, m)
		}
	}
	return slices.Clone(n.proto.acked), waiting
}

// LeaveAcknowledged reports, after StartLeave, whether every member the
// notice went to has acknowledged it: LeaveStatus's waiting list is
// empty. It looks only at the members still waited for, so a driver can
// ask after every message without walking the membership.
func (n *Node) LeaveAcknowledged() bool {
	for m := range n.proto.unacked {
		if n.isMember(m) {
			return false
		}
	}
	return true
}

// rebuildIfChanged rebuilds the overlay over the live members, those on
// their way out excepted, when the membership changed and Config.Overlay
// is set.
func (n *Node) rebuildIfChanged() {
	if !n.proto.membershipChanged {
		return
	}
	n.proto.membershipChanged = false
	// The overlay is built when the node next routes, not here: a mesh of
	// P starting hears P - 1 first hellos, each a change of labels, and
	// routes a few times in between, so building on each change cost
	// O(P) per hello and O(P^2) per node. The overlay is a pure function
	// of the live set and the labels (Config.Overlay), so building it late
	// builds the same one.
	n.proto.overlayStale = n.cfg.Overlay != nil
}

// currentRouter returns the router, building the overlay first when the
// membership changed since it was built.
func (n *Node) currentRouter() Router {
	if n.proto.overlayStale {
		n.proto.overlayStale = false
		var r Router
		key := n.currentOverlayKey()
		if n.cfg.OverlayByKey != nil {
			r = n.cfg.OverlayByKey(key)
		}
		if r == nil {
			r = n.cfg.Overlay(slices.DeleteFunc(n.Live(), n.Leaving), n.Sites())
			if n.cfg.OverlayBuilt != nil {
				n.cfg.OverlayBuilt(key, r)
			}
		}
		n.cfg.Router = r
		n.rebuildRouter()
	}
	return n.router
}

// keyOf is member m's term in the overlay's key: the feature hash
// (dataset.Hash64) of its id and label, NUL between them (neither holds
// one). The buffer keeps the usual id and label off the heap.
func keyOf(m, site string) uint64 {
	var buf [128]byte
	b := append(buf[:0], m...)
	b = append(b, 0)
	return dataset.Hash64(append(b, site...))
}

// siteOf is the label member m announced ("" for none).
func (n *Node) siteOf(m string) string {
	if m == n.cfg.ID {
		return n.proto.site
	}
	if i := n.info(m); i != nil {
		return n.cardOf(i).site
	}
	return ""
}

// currentOverlayKey returns the overlay's key: summed again over the live
// members after a snapshot or many changes, else with each member whose
// liveness or leaving changed since put in or out of the sum.
func (n *Node) currentOverlayKey() OverlayKey {
	p := &n.proto
	if p.overlayKeyStale || p.overlaySummed == nil {
		p.overlayKeyStale = false
		p.overlayDirty = p.overlayDirty[:0]
		p.overlayKey = OverlayKey{}
		// reach (below) zeroes what it grows over.
		p.overlaySummed = p.overlaySummed[:0]
		for _, m := range n.liveList {
			if !n.Leaving(m) {
				n.addToKey(m)
			}
		}
	}
	for _, m := range p.overlayDirty {
		n.placeInKey(m)
	}
	p.overlayDirty = p.overlayDirty[:0]
	return p.overlayKey
}

// addToKey adds member m's terms to the overlay's key.
func (n *Node) addToKey(m string) {
	p := &n.proto
	site := n.siteOf(m)
	t := keyOf(m, site)
	q := n.vc.intern(m) // a live member has its slot already
	p.overlaySummed = reach(p.overlaySummed, q)
	p.overlaySummed[q] = true
	p.overlayKey.Labelled += t
	p.overlayKey.Members += keyOf(m, "")
	if site == "" {
		p.overlayKey.Unlabelled++
	}
}

// placeInKey puts member m in the overlay key's sum or takes it out, as
// it is live and not leaving or not.
func (n *Node) placeInKey(m string) {
	p := &n.proto
	q := n.vc.slot(m)
	in := q >= 0 && q < len(p.overlaySummed) && p.overlaySummed[q]
	switch want := n.live.up(m) && !n.Leaving(m); {
	case want && !in:
		n.addToKey(m)
	case !want && in:
		// relabel kept its term and the count of the unlabelled current.
		site := n.siteOf(m)
		p.overlayKey.Labelled -= keyOf(m, site)
		p.overlayKey.Members -= keyOf(m, "")
		if site == "" {
			p.overlayKey.Unlabelled--
		}
		p.overlaySummed[q] = false
	}
}

// overlayChanged notes that member m's liveness or leaving changed: the
// key puts it in or out of its sum when next read. Summing again, O(P),
// on each change cost a simulated mesh under churn 5 % of its time, each
// of P cores summing P terms for every change it heard. Past a few
// changes at once, summing again costs less.
func (n *Node) overlayChanged(m string) {
	p := &n.proto
	if p.overlayKeyStale {
		return
	}
	if len(p.overlayDirty) >= max(16, len(n.liveList)/8) {
		p.overlayKeyStale = true
		p.overlayDirty = p.overlayDirty[:0]
		return
	}
	p.overlayDirty = append(p.overlayDirty, m)
}

// relabel changes member m's term in the overlay's key from its label
// from, the one it has until now, to to: O(1), where summing the key
// again is O(P), and a mesh of P starting hears P - 1 labels.
func (n *Node) relabel(m, from, to string) {
	p := &n.proto
	if q := n.vc.slot(m); q >= 0 && q < len(p.overlaySummed) && p.overlaySummed[q] && !p.overlayKeyStale {
		p.overlayKey.Labelled += keyOf(m, to) - keyOf(m, from)
		switch {
		case from == "" && to != "":
			p.overlayKey.Unlabelled--
		case from != "" && to == "":
			p.overlayKey.Unlabelled++
		}
	}
}

// takeProtocolOutput moves what the protocol produced into rd.
func (n *Node) takeProtocolOutput(rd *Ready) {
	p := &n.proto
	rd.Broadcast, p.bcast = p.bcast, nil
	rd.Messages = append(rd.Messages, p.direct...)
	p.direct = nil
	rd.Events, p.events = p.events, nil
}

// SetTiming sets the protocol's timeouts in ticks (see SyncConfig), for a
// driver that knows its tick's length; zero keeps a value.
func (n *Node) SetTiming(heartbeat, suspect, dead int) {
	if heartbeat > 0 {
		n.sc.HeartbeatTicks = heartbeat
	}
	if suspect > 0 {
		n.sc.SuspectTicks = suspect
	}
	if dead > 0 {
		n.sc.DeadTicks = dead
	}
	n.sc.DeadTicks = max(n.sc.DeadTicks, n.sc.SuspectTicks)
}

// SetOverlay sets Config.Overlay and rebuilds the router with it.
func (n *Node) SetOverlay(f func(live []string, site map[string]string) Router) {
	n.cfg.Overlay = f
	n.proto.membershipChanged = true
	n.rebuildIfChanged()
}

// SuspectAfter returns the current suspicion timeout in ticks.
func (n *Node) SuspectAfter() uint64 { return n.suspectAfter() }

// Entry returns the clock this node started at (its snapshot's rows' clock;
// 0 for a founding member).
func (n *Node) Entry() uint64 { return n.ownEntry() }

// HeardAbove reports whether some other live member is known to have run
// beyond clock c: its hellos say so, or the view holds an update of it
// above c.
func (n *Node) HeardAbove(c uint64) bool {
	for _, m := range n.liveList {
		if m == n.cfg.ID {
			continue
		}
		if i := n.info(m); (i != nil && i.clock > c) || n.vc.Get(m) > c {
			return true
		}
	}
	return false
}
