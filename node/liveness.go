package node

import (
	"errors"
	"fmt"
	"slices"
)

// The membership protocol: time, failure detection, admission and leave.
//
// Time in the core is a count of ticks: the driver calls Tick at a steady
// pace (the daemon every 100 ms, the simulator on its virtual clock), and
// every timeout below is a number of ticks. Nothing here reads a clock, so
// the simulator runs exactly the protocol a real mesh runs.
//
//   - Every HeartbeatTicks a node broadcasts a signed hello (Ready.Broadcast).
//   - A member is heard when a hello of it arrives or when it sends this
//     node anything directly. An update it made that arrives through a
//     relay is no evidence: it may be old (a resend, or one a relay kept
//     across a partition). A live member silent for the suspicion timeout is suspected
//     (Suspect: the gate no longer waits for it, it keeps its share of the
//     step, see scale.go); suspected and silent for the death timeout, it is
//     declared dead (DeclareDead). The suspicion timeout is SuspectTicks or
//     ten of the slowest member's rounds, whichever is longer, so a mesh of
//     slow iterations is not taken for a dead one; the death timeout grows
//     with it.
//   - A suspected member that is heard again is live again; a dead one only
//     on a fresh hello (a member cut off long enough to be declared dead
//     that comes back).
//   - Admit makes this node the donor of a joiner: the joiner enters at the
//     donor's rows' clock, the admit is signed and broadcast, and the joiner
//     carries the signed admission in its hellos, so a member that missed
//     the admit still learns the same entry. One incarnation has one entry:
//     a retried join is a new incarnation, which supersedes the old.
//   - Leave sends a signed notice to every live member directly and resends
//     it every HeartbeatTicks to those that have not acknowledged it.
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
	// Withholding is set on a suspicion of a member that keeps saying
	// hello but whose updates the gate needs never come.
	Withholding bool
}

// Timing defaults, in ticks (100 ms each in the daemon).
const (
	DefaultHeartbeatTicks = 5
	DefaultSuspectTicks   = 50
	DefaultDeadTicks      = 200
)

// memberInfo is what the protocol knows of one member.
type memberInfo struct {
	heard uint64 // tick last heard
	// spoke is set once the member itself was heard (a hello or a direct
	// message); admittedBy is who admitted it.
	spoke      bool
	admittedBy string
	// blockedSince is the tick since which the member, by its own word
	// past the clock the gate needs, has held the gate; withholding is set
	// once it is suspected for that, until its entry passes withheld.
	blockedSince, withheld uint64
	withholding            bool
	seq                    uint64 // last hello sequence number
	round                  uint64 // milliticks per iteration, from its hellos
	clock                  uint64 // last announced clock
	addrs                  []string
}

// protocol is the membership state of a Syncer.
type protocol struct {
	tick  uint64
	info  map[string]*memberInfo
	peers map[string]uint64 // peer name → highest incarnation admitted
	// Own hellos and round time.
	helloSeq, lastHello  uint64
	round, lastTrainTick uint64
	trained, gateOpen    bool
	gateOpenAt           uint64
	addrs                []string
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
	// membershipChanged asks for the overlay to be rebuilt.
	membershipChanged bool
	// rejoin is the member this node must rejoin through (catchup.go).
	rejoin string
}

func (s *Syncer) initProtocol() {
	s.proto.info = make(map[string]*memberInfo, len(s.members))
	s.proto.peers = map[string]uint64{}
	for _, m := range s.members {
		s.trackMember(m)
	}
}

// trackMember records a member the core now has in its list.
func (s *Syncer) trackMember(m string) {
	if _, ok := s.proto.info[m]; !ok {
		s.proto.info[m] = &memberInfo{heard: s.proto.tick}
	}
	name, inc := SplitMember(m)
	if cur, ok := s.proto.peers[name]; !ok || inc > cur {
		s.proto.peers[name] = inc
	}
}

// Tick advances the core's time by one tick: hellos, failure detection and
// leave retransmission happen here.
func (s *Syncer) Tick() {
	p := &s.proto
	p.tick++
	// Answers to sync requests are budgeted per requester and tick.
	clear(s.replied)
	if p.leaving {
		if p.tick-p.lastLeaveSend >= uint64(s.sc.HeartbeatTicks) {
			s.sendLeave()
		}
		return
	}
	if p.tick-p.lastHello >= uint64(s.sc.HeartbeatTicks) {
		s.hello()
	}
	s.detect()
	s.decideRejoin()
	s.rebuildIfChanged()
	s.noteGate()
}

// Ticks returns the core's time in ticks.
func (s *Syncer) Ticks() uint64 { return s.proto.tick }

// SetAddrs sets the addresses this node's hellos carry.
func (s *Syncer) SetAddrs(addrs []string) { s.proto.addrs = slices.Clone(addrs) }

// Addrs returns the addresses member last announced.
func (s *Syncer) Addrs(member string) []string {
	if i := s.proto.info[member]; i != nil {
		return slices.Clone(i.addrs)
	}
	return nil
}

// MemberOf returns the member id of the newest incarnation admitted on
// peer name, or "" when no member runs on it.
func (s *Syncer) MemberOf(name string) string {
	inc, ok := s.proto.peers[name]
	if !ok {
		return ""
	}
	for _, id := range []string{name + "/" + fmt.Sprint(inc), name} {
		if s.isMember(id) {
			if _, i := SplitMember(id); i == inc {
				return id
			}
		}
	}
	return ""
}

// suspectAfter is the suspicion timeout in ticks: the floor, or ten of the
// slowest live member's rounds.
func (s *Syncer) suspectAfter() uint64 {
	slowest := s.proto.round
	for _, m := range s.liveList {
		if i := s.proto.info[m]; i != nil {
			slowest = max(slowest, i.round)
		}
	}
	return max(uint64(s.sc.SuspectTicks), 10*slowest/1000)
}

// deadAfter is the death timeout: DeadTicks, stretched as the suspicion
// timeout is.
func (s *Syncer) deadAfter() uint64 {
	return uint64(s.sc.DeadTicks) + s.suspectAfter() - uint64(s.sc.SuspectTicks)
}

func (s *Syncer) detect() {
	p := &s.proto
	suspect, dead := s.suspectAfter(), s.deadAfter()
	for _, m := range s.members {
		i := p.info[m]
		if m == s.cfg.ID || i == nil {
			continue
		}
		silent := p.tick - i.heard
		switch {
		case s.Leaving(m) && silent >= suspect:
			// It left, and its last updates never came.
			s.DeclareDead(m)
			p.events = append(p.events, Event{Kind: EventDead, Member: m, Clock: i.clock, Silent: silent, Waiting: true})
			p.membershipChanged = true
		case s.live[m] && silent >= suspect && !i.spoke && !s.foundedWith(m):
			// Admitted, never heard from: no update of it can be in any
			// row, so it keeps no share of the step (a made-up joiner).
			s.DeclareDead(m)
			p.events = append(p.events, Event{Kind: EventDead, Member: m, Clock: i.clock, Silent: silent})
			p.membershipChanged = true
		case s.live[m] && silent >= suspect:
			s.Suspect(m)
			p.events = append(p.events, Event{Kind: EventSuspected, Member: m, Clock: i.clock, Silent: silent})
			p.membershipChanged = true
		case s.Suspected(m) && silent >= dead:
			s.DeclareDead(m)
			p.events = append(p.events, Event{Kind: EventDead, Member: m, Clock: i.clock, Silent: silent})
			p.membershipChanged = true
		case s.live[m]:
			s.detectWithholding(m, i, dead)
		}
	}
}

// foundedWith reports whether m was a member when this node started (its
// configured members or its snapshot's): those may have sent updates
// before this node heard them.
func (s *Syncer) foundedWith(m string) bool {
	i := s.proto.info[m]
	return i != nil && i.admittedBy == ""
}

// detectWithholding suspects a live member that says (in its hellos) it
// is past the clock this node's gate needs of it, but whose updates have
// not arrived for the death timeout although the node asks for them: a
// member that only says hello must not hold everyone's gate for good. It
// stays suspected until one of its missing updates arrives.
func (s *Syncer) detectWithholding(m string, i *memberInfo, after uint64) {
	p := &s.proto
	need := s.syncNeed()
	if need == 0 || s.vc.Get(m) >= need || i.clock < need {
		i.blockedSince = 0
		return
	}
	if i.blockedSince == 0 {
		i.blockedSince = p.tick
		return
	}
	if p.tick-i.blockedSince < after {
		return
	}
	i.blockedSince, i.withheld, i.withholding = 0, s.vc.Get(m), true
	s.Suspect(m)
	p.events = append(p.events, Event{Kind: EventSuspected, Member: m, Clock: i.clock, Withholding: true})
	p.membershipChanged = true
}

// releaseWithholders returns to the live set the members suspected of
// withholding whose updates came after all.
func (s *Syncer) releaseWithholders() {
	for _, m := range s.members {
		if i := s.proto.info[m]; i != nil && i.withholding && s.vc.Get(m) > i.withheld {
			i.withholding = false
			s.heard(m)
		}
	}
}

// heard records that member m showed signs of life; a suspected member is
// live again.
func (s *Syncer) heard(m string) {
	i := s.proto.info[m]
	if i == nil || s.MemberOf(nameOf(m)) != m {
		return
	}
	i.heard, i.spoke = s.proto.tick, true
	if s.Suspected(m) && !i.withholding {
		s.PeerUp(m)
		s.proto.events = append(s.proto.events, Event{Kind: EventBack, Member: m, Clock: i.clock})
		s.proto.membershipChanged = true
	}
}

func nameOf(m string) string {
	name, _ := SplitMember(m)
	return name
}

// noteGate records the tick the staleness gate was first found open
// since the last Train: the time a node waits at its gate is not part of
// its round (a mesh stalled for a while must not stretch every timeout).
func (s *Syncer) noteGate() {
	p := &s.proto
	if !p.gateOpen && s.Node.CanTrain() {
		p.gateOpen, p.gateOpenAt = true, p.tick
	}
}

// observeRound updates the node's own round time at each Train: the ticks
// since the later of its last Train and its gate opening, which is what a
// driver that trains on its event loop is deaf for.
func (s *Syncer) observeRound() {
	p := &s.proto
	s.noteGate()
	if p.trained {
		took := 1000 * (p.tick - max(p.lastTrainTick, p.gateOpenAt))
		if p.round == 0 {
			p.round = took
		} else {
			p.round = (9*p.round + took) / 10
		}
	}
	p.lastTrainTick, p.trained, p.gateOpen = p.tick, true, false
}

// RejectSignFailed counts announcements this node could not sign (and so
// did not send).
const RejectSignFailed = "sign_failed"

// sign fills a's signature; false when the node cannot sign (the
// announcement is then not sent).
func (s *Syncer) sign(a *Announcement) bool {
	a.Signer = s.cfg.ID
	if s.cfg.Auth == nil {
		return true
	}
	sig, err := s.cfg.Auth.SignMessage(AnnouncementSignedBytes(*a))
	if err != nil {
		s.reject(RejectSignFailed)
		return false
	}
	a.Sig = sig
	return true
}

// verifyAnn checks a's signature (and a hello's admission, when asked).
func (s *Syncer) verifyAnn(a Announcement) bool {
	if s.cfg.Auth == nil {
		return true
	}
	return len(a.Sig) > 0 && s.cfg.Auth.VerifyMessage(a.Signer, AnnouncementSignedBytes(a), a.Sig) == nil
}

func (s *Syncer) hello() {
	p := &s.proto
	p.helloSeq++
	p.lastHello = p.tick
	a := Announcement{Kind: KindHello, Member: s.cfg.ID, Entry: s.ownEntry(), Clock: s.clock, Seq: p.helloSeq,
		Round: min(p.round, maxRound), Addrs: p.addrs}
	if c := s.cfg.Admission; c != nil {
		a.CertSigner, a.CertSig = c.Signer, c.Sig
	}
	if s.sign(&a) {
		p.bcast = append(p.bcast, EncodeAnnouncement(a))
	}
}

// ownEntry is the clock this node started at.
func (s *Syncer) ownEntry() uint64 { return s.entryOf[s.cfg.ID] }

// receiveAnnouncement handles one membership message.
func (s *Syncer) receiveAnnouncement(from string, data []byte) {
	a, err := DecodeAnnouncement(data)
	if err != nil {
		s.reject(RejectBadAnnouncement)
		return
	}
	if reason := s.step(a); reason != "" {
		s.reject(reason)
	}
	if s.isMember(from) {
		s.heard(from)
	}
	s.rebuildIfChanged()
}

// step applies one decoded announcement; it returns the rejection reason
// or "".
func (s *Syncer) step(a Announcement) string {
	if a.Member == s.cfg.ID && a.Kind != KindLeaveAck {
		return "" // our own, back through gossip
	}
	if !s.verifyAnn(a) {
		return RejectForgedAnnouncement
	}
	name, inc := SplitMember(a.Member)
	if cur, ok := s.proto.peers[name]; ok && inc < cur && a.Kind != KindLeaveAck {
		return RejectStaleIncarnation
	}
	switch a.Kind {
	case KindHello:
		return s.onHello(a)
	case KindAdmit:
		return s.onAdmit(a, false)
	case KindLeave:
		return s.onLeave(a)
	case KindLeaveAck:
		return s.onAck(a)
	}
	return RejectBadAnnouncement
}

func (s *Syncer) onHello(a Announcement) string {
	if !s.isMember(a.Member) {
		if a.CertSigner == "" {
			return RejectNotAdmitted
		}
		// The hello is the member's own word: its consent to the
		// admission needs no join signature.
		cert := Admission{Member: a.Member, Entry: a.Entry, Signer: a.CertSigner, Sig: a.CertSig}.admitOf()
		if !s.verifyAnn(cert) {
			return RejectForgedAnnouncement
		}
		if reason := s.onAdmit(cert, true); reason != "" {
			return reason
		}
	}
	if _, gone := s.left[a.Member]; gone {
		return ""
	}
	i := s.proto.info[a.Member]
	if a.Seq <= i.seq {
		return RejectStaleHello
	}
	if !slices.Equal(i.addrs, a.Addrs) {
		i.addrs = slices.Clone(a.Addrs)
		s.proto.events = append(s.proto.events, Event{Kind: EventAddrs, Member: a.Member})
	}
	i.seq, i.round, i.clock = a.Seq, a.Round, a.Clock
	i.heard, i.spoke = s.proto.tick, true
	switch {
	case s.Suspected(a.Member):
		s.heard(a.Member)
	case !s.live[a.Member]:
		s.PeerUp(a.Member)
		s.proto.events = append(s.proto.events, Event{Kind: EventBack, Member: a.Member, Clock: a.Clock})
		s.proto.membershipChanged = true
	}
	return ""
}

// onAdmit applies a verified admit (or a hello's admission).
func (s *Syncer) onAdmit(a Announcement, fromHello bool) string {
	if !s.canAdmit(a.Signer, a.Entry) {
		return RejectForgedAnnouncement
	}
	if s.isMember(a.Member) {
		if s.entryOf[a.Member] != a.Entry && !fromHello {
			return RejectReadmit
		}
		return ""
	}
	if !fromHello {
		if !s.verifyJoin(a.Member, a.Signer, a.JoinSig) {
			return RejectForgedAnnouncement
		}
		if s.silentAdmits(a.Signer) >= MaxSilentAdmits {
			return RejectAdmitLimit
		}
	}
	s.admit(a.Member, a.Entry, a.Signer)
	if fromHello {
		s.proto.info[a.Member].spoke = true
	}
	return ""
}

// verifyJoin checks joiner's request to be admitted by donor's peer.
func (s *Syncer) verifyJoin(joiner, donor string, sig []byte) bool {
	if s.cfg.Auth == nil {
		return true
	}
	return len(sig) > 0 && s.cfg.Auth.VerifyMessage(joiner, JoinSignedBytes(joiner, nameOf(donor)), sig) == nil
}

// silentAdmits counts the members signer's admit announcements brought in
// that were never heard from, whatever became of them since: an honest
// joiner speaks within a heartbeat (and one whose admit was refused admits
// itself with the admission its hellos carry), so only made-up joiners
// count, for the signer's whole incarnation.
func (s *Syncer) silentAdmits(signer string) int {
	k := 0
	for _, m := range s.members {
		if i := s.proto.info[m]; i != nil && i.admittedBy == signer && !i.spoke {
			k++
		}
	}
	return k
}

// canAdmit reports whether signer's admission at entry counts: signer is
// a member of this node and its peer's newest incarnation, and if it has
// left, it admitted before its last update (a donor may leave before its
// joiner's first hello reaches everyone).
func (s *Syncer) canAdmit(signer string, entry uint64) bool {
	if signer == s.cfg.ID {
		return true
	}
	if !s.isMember(signer) || s.MemberOf(nameOf(signer)) != signer {
		return false
	}
	last, gone := s.left[signer]
	return !gone || entry <= last
}

// admit adds member at entry and retires its peer's older incarnations.
func (s *Syncer) admit(member string, entry uint64, by string) {
	s.AddMember(member, entry)
	s.trackMember(member)
	s.proto.info[member].admittedBy = by
	s.supersede(member)
	s.proto.events = append(s.proto.events, Event{Kind: EventJoined, Member: member, Clock: entry, By: by})
	s.proto.membershipChanged = true
	if by != s.cfg.ID && s.proto.rejoin == "" {
		s.sendOwnSince(member, entry)
	}
}

// sendOwnSince sends a member that just joined this node's own updates
// above its entry: those made before this node knew of it went to the
// others only, and the joiner's gate needs them (its donor's snapshot
// carries only what the donor held). The donor's own are in the snapshot.
func (s *Syncer) sendOwnSince(member string, entry uint64) {
	i, ok := s.index[s.cfg.ID]
	if !ok {
		return
	}
	for _, r := range s.logs[i] {
		if r.clock > entry {
			s.outbox[member] = append(s.outbox[member], Update{Origin: s.cfg.ID, Clock: r.clock, Frame: r.frame, Sig: r.sig})
		}
	}
}

// supersede declares dead every older incarnation of member's peer.
func (s *Syncer) supersede(member string) {
	name, inc := SplitMember(member)
	for _, m := range s.members {
		if mn, mi := SplitMember(m); mn != name || mi >= inc || m == s.cfg.ID {
			continue
		}
		if _, gone := s.left[m]; gone || (!s.live[m] && !s.Suspected(m)) {
			continue
		}
		s.DeclareDead(m)
		s.proto.events = append(s.proto.events, Event{Kind: EventSuperseded, Member: m, By: member})
	}
}

func (s *Syncer) onLeave(a Announcement) string {
	if !s.isMember(a.Member) {
		return RejectNotAdmitted
	}
	if _, gone := s.left[a.Member]; !gone {
		s.Leave(a.Member, a.Clock)
		if i := s.proto.info[a.Member]; i != nil {
			i.heard, i.clock = s.proto.tick, a.Clock
		}
		s.proto.events = append(s.proto.events, Event{Kind: EventLeft, Member: a.Member, Clock: a.Clock, Waiting: s.Leaving(a.Member)})
		s.proto.membershipChanged = true
	}
	// Two members leaving at once: the other is gone, not waited for.
	if s.proto.leaving {
		delete(s.proto.unacked, a.Member)
	}
	// Acknowledge every copy: the leaver resends until it hears back.
	ack := Announcement{Kind: KindLeaveAck, Member: a.Member, Clock: a.Clock}
	if s.sign(&ack) {
		s.proto.direct = append(s.proto.direct, Message{To: a.Member, Data: EncodeAnnouncement(ack)})
	}
	return ""
}

func (s *Syncer) onAck(a Announcement) string {
	p := &s.proto
	if a.Member != s.cfg.ID || !p.leaving {
		return ""
	}
	if p.unacked[a.Signer] {
		delete(p.unacked, a.Signer)
		p.acked = append(p.acked, a.Signer)
		p.events = append(p.events, Event{Kind: EventLeaveAcked, Member: a.Signer})
	}
	return ""
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
func (s *Syncer) Admit(joiner string, joinSig []byte) (Snapshot, Admission, error) {
	if err := CheckMemberID(joiner); err != nil {
		return Snapshot{}, Admission{}, fmt.Errorf("%w: %w", ErrAdmit, err)
	}
	if !s.verifyJoin(joiner, s.cfg.ID, joinSig) {
		return Snapshot{}, Admission{}, fmt.Errorf("%w: the join request of %s is not signed by its key", ErrAdmit, joiner)
	}
	if joiner == s.cfg.ID || s.isMember(joiner) {
		return Snapshot{}, Admission{}, fmt.Errorf("%w: %s is a member already (entry %d); join again as a new incarnation", ErrAdmit, joiner, s.entryOf[joiner])
	}
	if s.proto.leaving {
		return Snapshot{}, Admission{}, fmt.Errorf("%w: this member is leaving", ErrAdmit)
	}
	if s.proto.rejoin != "" {
		return Snapshot{}, Admission{}, fmt.Errorf("%w: this member fell behind the frame history and is rejoining", ErrAdmit)
	}
	name, inc := SplitMember(joiner)
	if cur, ok := s.proto.peers[name]; ok && inc <= cur {
		return Snapshot{}, Admission{}, fmt.Errorf("%w: incarnation %d of %s is not above the %d already admitted", ErrAdmit, inc, name, cur)
	}
	// Older incarnations go first, so the joiner does not wait for them.
	s.supersede(joiner)
	snap := s.Snapshot()
	a := Announcement{Kind: KindAdmit, Member: joiner, Entry: snap.Clock, JoinSig: joinSig}
	if !s.sign(&a) {
		return Snapshot{}, Admission{}, fmt.Errorf("%w: cannot sign the admission", ErrAdmit)
	}
	s.admit(joiner, snap.Clock, s.cfg.ID)
	s.proto.info[joiner].heard = s.proto.tick
	s.proto.bcast = append(s.proto.bcast, EncodeAnnouncement(a))
	s.rebuildIfChanged()
	return snap, Admission{Member: joiner, Entry: snap.Clock, Signer: s.cfg.ID, Sig: a.Sig, JoinSig: joinSig}, nil
}

// StartLeave makes this node leave after its current clock: it trains no
// more, and its signed notice goes to every live or suspected member, again
// every
// HeartbeatTicks to those that have not acknowledged it (LeaveStatus).
func (s *Syncer) StartLeave() {
	p := &s.proto
	if p.leaving {
		return
	}
	p.leaving = true
	a := Announcement{Kind: KindLeave, Member: s.cfg.ID, Entry: s.ownEntry(), Clock: s.clock}
	if !s.sign(&a) {
		return
	}
	p.leaveNotice = EncodeAnnouncement(a)
	// Suspected members are presumed alive: they get the notice too, or
	// they would take this node for dead after their timeouts.
	p.unacked = map[string]bool{}
	for _, m := range s.members {
		if m != s.cfg.ID && !s.Leaving(m) && (s.live[m] || s.Suspected(m)) {
			p.unacked[m] = true
		}
	}
	p.bcast = append(p.bcast, p.leaveNotice)
	s.sendLeave()
}

func (s *Syncer) sendLeave() {
	p := &s.proto
	p.lastLeaveSend = p.tick
	for _, m := range s.members {
		if p.unacked[m] {
			p.direct = append(p.direct, Message{To: m, Data: p.leaveNotice})
		}
	}
}

// LeaveStatus returns, after StartLeave, the members that acknowledged the
// leave and those that have not yet.
func (s *Syncer) LeaveStatus() (acked, waiting []string) {
	for _, m := range s.members {
		if s.proto.unacked[m] {
			waiting = append(waiting, m)
		}
	}
	return slices.Clone(s.proto.acked), waiting
}

// rebuildIfChanged rebuilds the overlay over the live members, those on
// their way out excepted, when the membership changed and Config.Overlay
// is set.
func (s *Syncer) rebuildIfChanged() {
	if !s.proto.membershipChanged {
		return
	}
	s.proto.membershipChanged = false
	if s.cfg.Overlay == nil {
		return
	}
	live := slices.DeleteFunc(s.Live(), s.Leaving)
	s.SetRouter(s.cfg.Overlay(live))
}

// takeProtocolOutput moves what the protocol produced into rd.
func (s *Syncer) takeProtocolOutput(rd *Ready) {
	p := &s.proto
	rd.Broadcast, p.bcast = p.bcast, nil
	rd.Messages = append(rd.Messages, p.direct...)
	p.direct = nil
	rd.Events, p.events = p.events, nil
}

// SetTiming sets the protocol's timeouts in ticks (see SyncConfig), for a
// driver that knows its tick's length; zero keeps a value.
func (s *Syncer) SetTiming(heartbeat, suspect, dead int) {
	if heartbeat > 0 {
		s.sc.HeartbeatTicks = heartbeat
	}
	if suspect > 0 {
		s.sc.SuspectTicks = suspect
	}
	if dead > 0 {
		s.sc.DeadTicks = dead
	}
	s.sc.DeadTicks = max(s.sc.DeadTicks, s.sc.SuspectTicks)
}

// SetOverlay sets Config.Overlay and rebuilds the router with it.
func (s *Syncer) SetOverlay(f func(live []string) Router) {
	s.cfg.Overlay = f
	s.proto.membershipChanged = true
	s.rebuildIfChanged()
}

// SuspectAfter returns the current suspicion timeout in ticks.
func (s *Syncer) SuspectAfter() uint64 { return s.suspectAfter() }

// Entry returns the clock this node started at (its snapshot's rows' clock;
// 0 for a founding member).
func (s *Syncer) Entry() uint64 { return s.ownEntry() }

// HeardAbove reports whether some other live member is known to have run
// beyond clock c: its hellos say so, or the view holds an update of it
// above c.
func (s *Syncer) HeardAbove(c uint64) bool {
	for _, m := range s.liveList {
		if m == s.cfg.ID {
			continue
		}
		if i := s.proto.info[m]; (i != nil && i.clock > c) || s.vc.Get(m) > c {
			return true
		}
	}
	return false
}
