package node

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/sketchmesh/sketchmesh/wire"
)

// Retransmission ("sync").
//
// Updates travel once, pushed along the overlay; nothing in the push path
// resends. A message lost on a link, or an update that a partitioned or paused
// member never saw, would leave a gap in the receiver's vector clock and close
// its staleness gate for good. Sync closes such gaps by pulling:
//
//   - a node keeps the frames it has applied: all of its own (up to
//     SyncConfig.History clocks) and, per other origin, the newest
//     SyncConfig.Window clocks plus any still uncommitted; while it counts
//     any member down, it keeps everything (up to History), since a member
//     cut off by a partition may need, after the heal, the updates of an
//     origin that died in the meantime and that only this side holds; and
//     for a while after it took updates of a member cut off from it, it
//     keeps that member's, up to twice History (keepsCutOff, catchup.go);
//   - when the node has waited at its gate for a while, the driver calls
//     SyncRequest, which asks the live members that hold it back
//     ("laggards") for their own updates;
//   - periodically, the driver calls AntiEntropy, which sends one live
//     member in turn the node's entries for every origin it lacks something
//     old of (clocks its gate is already past); that is how the last
//     updates of members that died reach everyone, since nobody waits for
//     them;
//   - the receiver of a request answers with an ordinary update envelope,
//     a bounded batch of what it retains between the requester's entries
//     and the clock the request asks up to.
//
// A request costs its sender a few bytes and may ask for everything, so
// what a node answers is bounded whatever the request says: the clock asked
// up to is clamped to what the node can hold (its own updates up to its
// clock, others' up to the highest clock it accepts, History clocks above
// the requester's entry), and the answers queued for one requester within
// one tick hold at most MaxReplyBytes of updates (one update more
// when a single one is larger), or, with a reply rate, no more on average
// than the link carries (SyncConfig.ReplyRate, payReplies); requests past
// that budget are dropped and counted (RejectSyncBudget), and the
// requester asks again later. Ready splits what it sends a peer into
// envelopes within MaxEnvelopeBytes.
//
// Resent updates are applied through the normal path, so the rules of
// Receive (membership, duplicates, clock bounds, frame checks) hold for them
// unchanged: a resend can never make an update apply twice.
//
// # Wire format
//
// A sync request is a msgpack array distinguished from an envelope by its
// first element, 2 instead of the envelope version 1:
//
//	[2, "sync", upto uint, [[origin str, have uint], ...], digest_clock uint, digest uint]
//
// Each pair asks for origin's updates with clock in (have, upto]. The last
// two fields are the requester's latest view digest (see digest.go): the
// clock of the row it hashed last and the 64-bit digest, both 0 when it has
// none. It is encoded canonically, so it always starts with the bytes
// 0x96 0x02; a gone notice (catchup.go) starts with 0x94 0x02. That is how
// IsSyncMessage tells both from an envelope.

const (
	syncKind = 2
	syncTag  = "sync"
	// syncFields is the sync request's field count; its array header is
	// 0x90|syncFields.
	syncFields = 6
	// MaxSyncBytes bounds a sync request; a full vector clock of 4096
	// members with 52-byte libp2p ids takes about 250 KB.
	MaxSyncBytes = 4 << 20
)

// RejectBadSync counts sync requests that do not parse, in Stats.Rejected.
const RejectBadSync RejectReason = "bad_sync"

// RejectSyncBudget counts sync requests dropped because the answers queued
// for their sender since the last Ready already hold MaxReplyBytes.
const RejectSyncBudget RejectReason = "sync_budget"

// ErrBadSync is wrapped by every sync decoding error.
var ErrBadSync = errors.New("bad sync request")

// SyncMessage is a decoded sync request.
type SyncMessage struct {
	// Upto is the highest clock asked for. A laggard request asks up to
	// what the requester accepts (its clock + s + 1); anti-entropy only up
	// to what it should hold already, so updates still in flight are not
	// sent twice.
	Upto uint64
	// Have lists, per origin asked about, the requester's contiguous
	// high-water mark: it wants that origin's updates above it.
	Have []SyncEntry
	// Digest is the requester's latest view digest, which the answerer
	// compares with its own of the same row; Clock 0 means none.
	Digest ViewDigest
}

// SyncEntry is one origin's entry in a sync request.
type SyncEntry struct {
	Origin string
	Clock  uint64
}

// IsSyncMessage reports whether data is a sync request or a gone notice
// rather than an update envelope. It looks at the first two bytes only.
func IsSyncMessage(data []byte) bool {
	return len(data) >= 2 && (data[0] == 0x90|syncFields || data[0] == 0x90|goneFields) && data[1] == syncKind
}

// EncodeSync writes a sync request.
func EncodeSync(m SyncMessage) []byte {
	w := wire.NewWriter()
	w.Array(syncFields)
	w.Uint(syncKind)
	w.String(syncTag)
	w.Uint(m.Upto)
	w.Array(len(m.Have))
	for _, e := range m.Have {
		w.Array(2)
		w.String(e.Origin)
		w.Uint(e.Clock)
	}
	w.Uint(m.Digest.Clock)
	w.Uint(m.Digest.Sum)
	return w.Bytes()
}

// DecodeSync parses a sync request with the same discipline as
// DecodeEnvelope: every length is checked against the bytes that remain
// before anything is allocated, so a hostile header cannot make it allocate
// more than a small multiple of len(data).
func DecodeSync(data []byte) (SyncMessage, error) {
	m, err := decodeSync(data)
	if err != nil {
		return SyncMessage{}, fmt.Errorf("%w: %w", ErrBadSync, err)
	}
	return m, nil
}

func decodeSync(data []byte) (SyncMessage, error) {
	if len(data) > MaxSyncBytes {
		return SyncMessage{}, fmt.Errorf("%d bytes exceeds the %d-byte limit", len(data), MaxSyncBytes)
	}
	r := wire.NewReader(data)
	if err := r.Fields("sync request", syncFields); err != nil {
		return SyncMessage{}, err
	}
	kind, err := r.Uint("kind")
	if err != nil {
		return SyncMessage{}, err
	}
	if kind != syncKind {
		return SyncMessage{}, fmt.Errorf("kind %d, want %d", kind, syncKind)
	}
	tag, err := r.Bytes("tag", len(syncTag))
	if err != nil {
		return SyncMessage{}, err
	}
	if string(tag) != syncTag {
		return SyncMessage{}, fmt.Errorf("tag %q, want %q", tag, syncTag)
	}
	var m SyncMessage
	if m.Upto, err = r.Uint("upto"); err != nil {
		return SyncMessage{}, err
	}
	count, err := r.Array("entry list", 1)
	if err != nil {
		return SyncMessage{}, err
	}
	// Each entry takes at least 4 bytes (array header, origin header and one
	// byte of origin, clock); the digest's two fields take at least 2 more.
	if count > max(r.Remaining()-2, 0)/4 {
		return SyncMessage{}, fmt.Errorf("%d entries cannot fit in %d bytes", count, r.Remaining())
	}
	m.Have = make([]SyncEntry, 0, count)
	for i := 0; i < count; i++ {
		if err := r.Fields("entry", 2); err != nil {
			return SyncMessage{}, fmt.Errorf("entry %d: %w", i, err)
		}
		origin, err := r.Bytes("origin", maxOriginBytes)
		if err != nil {
			return SyncMessage{}, fmt.Errorf("entry %d: %w", i, err)
		}
		if len(origin) == 0 {
			return SyncMessage{}, fmt.Errorf("entry %d: empty origin", i)
		}
		c, err := r.Uint("clock")
		if err != nil {
			return SyncMessage{}, fmt.Errorf("entry %d: %w", i, err)
		}
		m.Have = append(m.Have, SyncEntry{Origin: string(origin), Clock: c})
	}
	if m.Digest.Clock, err = r.Uint("digest clock"); err != nil {
		return SyncMessage{}, err
	}
	if m.Digest.Sum, err = r.Uint("digest"); err != nil {
		return SyncMessage{}, err
	}
	if err := r.End(); err != nil {
		return SyncMessage{}, err
	}
	return m, nil
}

// SyncConfig tunes retransmission. The zero value picks the defaults.
type SyncConfig struct {
	// Window is how many of the newest clocks of each other live origin a
	// node keeps while every member is live in its view (uncommitted ones
	// are kept regardless). The default,
	// 2·Staleness+2, covers every update that a member the origin still
	// counts as live can lack: the origin is at most s ahead of that member's
	// clock, and the member's clock is at most s ahead of its entry for the
	// origin.
	Window int
	// History caps the clocks kept per origin: for the node's own updates,
	// for origins it has been told are down (their last frames may exist
	// nowhere else), and for every origin while any member is down in its
	// view. Default 4096.
	History int
	// MaxReplyBytes bounds the bytes of the updates (as encoded in an
	// envelope) answered to one requester within one tick (Tick); the
	// requester asks again for the rest. Default 1 MiB.
	MaxReplyBytes int
	// ReplyRate, when set, makes the budget a burst: what is answered
	// to one requester is paid back at ReplyRate bytes a tick, so that
	// its answers take no more than that on average, and the burst is at
	// most ReplyRate × SuspectTicks (one update larger than the burst
	// still goes alone once the debt is paid). A driver that knows its
	// links sets it to their bandwidth in bytes per tick (SetReplyRate).
	// 0, the default, allows MaxReplyBytes every tick.
	ReplyRate int
	// Fanout is how many laggards one SyncRequest asks; repeated calls
	// take the next ones. Default 32.
	Fanout int
	// HeartbeatTicks, SuspectTicks and DeadTicks time the membership
	// protocol (see liveness.go): a hello every HeartbeatTicks, a silent
	// member suspected after SuspectTicks (or ten of the slowest member's
	// rounds) and declared dead after DeadTicks, stretched likewise.
	// Defaults 5, 50 and 200.
	HeartbeatTicks, SuspectTicks, DeadTicks int
	// RefreshTicks bounds how long a node that skips its hellos (it sent an
	// update of its own lately and sees every member live, see
	// liveness.go) goes without one, so that what only hellos carry (its
	// round, addresses, admission) still reaches every member, and one that
	// suspected it wrongly hears it again before it would declare it dead.
	// Default SuspectTicks.
	RefreshTicks int
	// StallTicks is the fewest ticks a node waits at its gate before Tick
	// sends SyncRequest's requests, and between two sends, AskPeriods
	// stretching it to that many of the node's iteration periods;
	// EntropyTicks is the period of AntiEntropy's (asking.go). A tick
	// count of 0, the default, leaves that request to the driver.
	StallTicks, EntropyTicks, AskPeriods int
}

func (c *SyncConfig) fill(staleness int) error {
	switch {
	case c.Window < 0 || c.History < 0 || c.MaxReplyBytes < 0 || c.ReplyRate < 0 || c.Fanout < 0 ||
		c.HeartbeatTicks < 0 || c.SuspectTicks < 0 || c.DeadTicks < 0 || c.RefreshTicks < 0 || c.StallTicks < 0 || c.EntropyTicks < 0 || c.AskPeriods < 0:
		return fmt.Errorf("node: sync settings must be >= 0, got %+v", *c)
	case c.Window != 0 && c.Window < staleness+2:
		return fmt.Errorf("node: sync window %d is below staleness+2 = %d", c.Window, staleness+2)
	}
	if c.Window == 0 {
		c.Window = 2*staleness + 2
	}
	if c.History == 0 {
		c.History = 4096
	}
	c.History = max(c.History, c.Window)
	if c.MaxReplyBytes == 0 {
		c.MaxReplyBytes = 1 << 20
	}
	if c.Fanout == 0 {
		c.Fanout = 32
	}
	if c.HeartbeatTicks == 0 {
		c.HeartbeatTicks = DefaultHeartbeatTicks
	}
	if c.SuspectTicks == 0 {
		c.SuspectTicks = DefaultSuspectTicks
	}
	if c.DeadTicks == 0 {
		c.DeadTicks = DefaultDeadTicks
	}
	c.DeadTicks = max(c.DeadTicks, c.SuspectTicks)
	if c.RefreshTicks == 0 {
		c.RefreshTicks = c.SuspectTicks
	}
	c.RefreshTicks = max(c.RefreshTicks, c.HeartbeatTicks)
	return nil
}

// SyncStats count retransmission work.
type SyncStats struct {
	RequestsSent uint64 // requests built by SyncRequest and AntiEntropy
	RequestBytes uint64
	// StallAsks counts the times Tick asked because the node was stalled
	// (asking.go).
	StallAsks      uint64
	RequestsServed uint64 // well-formed requests from members answered
	UpdatesResent  uint64 // updates queued in answers
	ResentBytes    uint64 // frame bytes of those updates
	Retained       int    // frames held now
	RetainedBytes  int
	// DigestsCompared counts requesters' view digests this node compared
	// with its own of the same row; ViewDivergence those that differed
	// (see digest.go), the last of them from DivergedFrom at row
	// DivergedAt.
	DigestsCompared uint64
	ViewDivergence  uint64
	DivergedFrom    string
	DivergedAt      uint64
}

// retained is one kept frame. It is a pointer, 8 bytes in a log, so that
// the nodes sharing a decode cache, which keep the same frames of the same
// members, share one entry per frame (keep): in a simulator the logs were
// O(P) entries per core, of 56 bytes each.
type retained struct{ *keptUpdate }

type keptUpdate struct {
	// origin is the member whose update this is: the entry is shared (by
	// the logs and outboxes of every core on a decode cache), and its
	// outbox entries are pointers to it alone, where an origin slot beside
	// each made them twice the size (P² of them in a simulator).
	origin string
	clock  uint64
	frame  []byte
	sig    []byte // the origin's signature, resent with the frame
}

// update is k as its origin's update on the wire.
func (k *keptUpdate) update() Update {
	return Update{Origin: k.origin, Clock: k.clock, Frame: k.frame, Sig: k.sig}
}

// peerUp is the view part of PeerUp.
func (n *Node) peerUp(id string) {
	if id == n.cfg.ID || n.live.up(id) {
		return
	}
	if _, ok := slices.BinarySearch(n.members, id); !ok {
		return
	}
	n.setLive(id, true)
}

// PeerDown removes a member from the live set: the gate stops waiting for it
// and rows commit without it. Updates it already sent stay in the view, and
// while any member is down the node keeps the frames of every origin (up to
// SyncConfig.History), so a member cut off can catch up after a heal.
func (n *Node) PeerDown(id string) {
	n.peerDown(id)
	n.updateDegraded()
}

// PeerUp returns a member to the live set, the inverse of PeerDown: the gate
// waits for it again and rows commit only with its updates. Rows already
// committed without it stay committed; its updates for those clocks are
// still added to the view when they arrive (read as pending).
func (n *Node) PeerUp(id string) {
	n.peerUp(id)
	n.updateDegraded()
}

// AddMember admits member id, live, with entry as its vector clock entry:
// its first update is entry+1, and the node starts keeping its frames. A
// member already known is only marked live again (see PeerUp); its entry is
// never moved back.
func (n *Node) AddMember(id string, entry uint64) {
	n.addMember(id, entry)
	if n.isMember(id) {
		n.trackMember(id)
	}
	n.updateDegraded()
}

// Leave records that member id stops after its update last. It stays in the
// live set until the view holds its updates up to last (they may still be
// in flight when the notice arrives), then leaves it (see PeerDown);
// anti-entropy never asks for its updates above last. Unlike a member that
// is down, one that left with notice does not make the node keep every
// frame: it announced its last clock, and nobody will need more of it.
func (n *Node) Leave(id string, last uint64) {
	n.leave(id, last)
	n.updateDegraded()
}

// updateDegraded sets degraded while some member is down without having
// left.
func (n *Node) updateDegraded() {
	n.degraded = false
	for _, m := range n.members {
		if _, gone := n.left[m]; !n.live.up(m) && !gone {
			n.degraded = true
			return
		}
	}
}

// Snapshot returns the node's committed rows for a joiner (see Rows), with
// the frames it keeps of updates above them, so the joiner need not fetch
// those from their origins, and the marks of those it refused.
func (n *Node) Snapshot() Snapshot {
	snap := n.Rows()
	for _, m := range n.members {
		i := n.memberSlot(m)
		if i < 0 {
			continue
		}
		for _, r := range n.logOf(i) {
			if r.clock > snap.Clock {
				snap.Pending = append(snap.Pending, r.update())
				if id := (UpdateID{Origin: m, Clock: r.clock}); n.refused[id] {
					snap.Refused = append(snap.Refused, id)
				}
			}
		}
	}
	return snap
}

// Receive handles one network message from peer from: an announcement goes
// to the membership protocol, a sync request is answered (the answer goes
// out with the next Ready), a gone notice to the catch-up; updates are
// checked, applied, relayed and retained. Bad content is counted and
// dropped.
func (n *Node) Receive(from string, data []byte) {
	if IsAnnouncement(data) {
		n.receiveAnnouncement(from, data)
		return
	}
	if IsSyncMessage(data) {
		if isGone(data) {
			n.handleGone(from, data)
			return
		}
		n.handleSync(from, data)
		return
	}
	// Read into the pool's slice, used again for every envelope: a new
	// one per envelope was a fifth of a simulator's allocations.
	// The origins are read with their slot table slots, each origin's
	// member slot found from its table slot, without a second lookup by
	// name.
	origins := &n.spares.origins
	origins.table, origins.slots = n.vc.table, origins.slots[:0]
	updates, err := decodeEnvelopeInto(n.spares.read[:0], data, origins.origin)
	if err != nil {
		n.receive(from, data) // counts the bad envelope
		return
	}
	n.spares.read = updates
	defer clear(updates) // nothing of the envelope stays reachable from the pool
	// An update the core applies is one it did not hold before and holds
	// after.
	n.spares.fresh = n.spares.fresh[:0]
	slots := origins.slots
	for i, u := range updates {
		q := n.memberSlotAt(slots[i])
		slots[i] = q
		if !n.vc.hasAt(q, u.Clock) {
			n.spares.fresh = append(n.spares.fresh, i)
		}
	}
	n.warm(slots)
	n.receiveUpdates(from, updates, slots)
	ownApplied := false
	for k, i := range n.spares.fresh {
		u, q := updates[i], slots[i]
		if !n.vc.hasAt(q, u.Clock) {
			continue
		}
		ownApplied = ownApplied || u.Origin == from
		n.heardUpdate(q, u.Clock)
		// With two copies of one update in an envelope, the first that
		// passed the core's checks was applied; which one that was is not
		// observable here, so keep neither (the origin keeps its own).
		// Only a copy refused as held can be the second of a pair: without
		// one, the quadratic search is skipped (at P = 2048 it was 7 % of
		// the simulator's time, envelopes carrying hundreds of relays).
		if n.duplicates && repeated(updates, n.spares.fresh, k) {
			continue
		}
		r := retained{n.spares.kept[i]}
		if r.keptUpdate == nil { // heard but refused (skip)
			r = n.keep(u)
		}
		n.retainAt(q, u.Origin, r)
	}
	// A member's own updates applied are a sign of life; what it passes on
	// of others' is not, nor are requests, refusals and duplicates (see
	// receiveAnnouncement): else a peer could keep a member that never
	// makes an update live. Its own updates count wherever they come from
	// (heardUpdate), since a member that is making them skips its hellos.
	if ownApplied && n.isMember(from) {
		n.heard(from)
	}
	n.releaseWithholders()
	n.noteGate()
}

// keep returns the entry to keep for a frame of clock with its signature:
// the decode cache's, which every node sharing the cache keeps alike, when
// it has the frame, else one of copies. Kept entries are only read.
func (n *Node) keep(u Update) retained {
	if c := n.cfg.DecodeCache; c != nil {
		if k := c.kept(u); k != nil {
			return retained{k}
		}
	}
	return retained{&keptUpdate{origin: u.Origin, clock: u.Clock, frame: slices.Clone(u.Frame), sig: slices.Clone(u.Sig)}}
}

// repeated reports whether the update at fresh[k] occurs more than once in
// the envelope.
func repeated(updates []Update, fresh []int, k int) bool {
	u := updates[fresh[k]]
	for j, i := range fresh {
		if j != k && updates[i].Origin == u.Origin && updates[i].Clock == u.Clock {
			return true
		}
	}
	return false
}

// Train takes one optimizer step: it reads the view, computes a mini-batch
// gradient and the optimizer's update, encodes it, puts what receivers will
// decode into its own view and queues the frame for its next hops. The node
// keeps its own frame and signature whether or not any next hop is live.
// With local steps (Config.LocalSteps) only an exchange's last step makes
// an update, of the change the exchange's steps accumulated.
func (n *Node) Train() error {
	if n.proto.leaving || n.proto.rejoin != "" {
		return ErrGateClosed
	}
	n.observeRound()
	clock := n.clock
	if err := n.train(); err != nil {
		return err
	}
	if n.clock == clock {
		return nil // a local step: nothing to send yet
	}
	n.retain(n.cfg.ID, retained{n.lastOwn})
	return nil
}

// CanTrain reports whether the node has iterations left and its staleness
// gate is open; never once it is leaving or must rejoin.
func (n *Node) CanTrain() bool {
	return !n.proto.leaving && n.proto.rejoin == "" && n.canTrain()
}

// HasReady reports whether Ready has anything to hand out.
func (n *Node) HasReady() bool {
	p := &n.proto
	return n.hasReady() || len(p.bcast) > 0 || len(p.direct) > 0 || len(p.events) > 0
}

// retain keeps r as origin's update of its clock and drops what the
// retention rules no longer require.
func (n *Node) retain(origin string, r retained) {
	n.retainAt(n.memberSlot(origin), origin, r)
}

// handleSync answers a sync request by queueing, for the requester, the
// retained updates it asks for: per origin, the clocks above its entry and
// at most the clamped Upto (syncLimit), oldest first, within what is left of
// the requester's budget for this round (see Ready).
func (n *Node) handleSync(from string, data []byte) {
	if n.proto.rejoin != "" {
		// Its state is about to be dropped: what it holds must not
		// spread.
		return
	}
	req, err := DecodeSync(data)
	if err != nil {
		n.reject(RejectBadSync)
		return
	}
	if n.memberSlot(from) < 0 || from == n.cfg.ID {
		n.reject(RejectNotMember)
		return
	}
	used, budget := n.replied[from], n.replyBudget()
	if used >= budget {
		n.reject(RejectSyncBudget)
		return
	}
	n.syncStats.RequestsServed++
	n.compareDigest(from, req.Digest)
	defer func() { n.replied[from] = used }()
	for _, e := range req.Have {
		i := n.memberSlot(e.Origin)
		if i < 0 {
			continue
		}
		if e.Origin == n.cfg.ID {
			if n.answerGone(from, e.Clock) {
				continue
			}
			// from holds all of them that are gone (see lacksOurs).
			delete(n.toldGone, from)
		}
		if n.proto.leaving && e.Origin != n.cfg.ID {
			// It trains no more, so it keeps others' frames long after
			// their origins dropped them (see catchup.go).
			continue
		}
		limit := n.syncLimit(e, req.Upto)
		log := n.logOf(i)
		if e.Origin != n.cfg.ID {
			n.noteLacking(from, e.Origin, e.Clock, log)
		}
		j, _ := slices.BinarySearchFunc(log, e.Clock+1, func(r retained, c uint64) int { return cmp.Compare(r.clock, c) })
		// Only what continues the requester's entry: updates above a gap
		// this node cannot fill either may be gone for good (a split that
		// outlasted the history), and one that holds them would hold what
		// the others never will.
		if j < len(log) && log[j].clock != e.Clock+1 {
			continue
		}
		for ; j < len(log) && log[j].clock <= limit; j++ {
			u := queued{log[j].keptUpdate}
			size := updateWireBytes(u.update())
			// One update larger than the whole budget still goes, alone,
			// or it could never be fetched.
			if used+size > budget && used > 0 {
				used = budget
				return
			}
			used += size
			n.outbox[from] = append(n.outbox[from], u)
			n.syncStats.UpdatesResent++
			n.syncStats.ResentBytes += uint64(len(u.frame))
		}
	}
}

// syncLimit clamps the clock a request asks up to for entry e to what a
// requester can be missing of e's origin that this node can hold: its own
// updates exist up to its clock, another origin's are accepted up to
// acceptBound, and no origin's are kept for more than History clocks.
func (n *Node) syncLimit(e SyncEntry, upto uint64) uint64 {
	held := n.acceptBound()
	if e.Origin == n.cfg.ID {
		held = n.clock
	}
	limit := min(upto, held)
	if span := uint64(n.sc.History); e.Clock <= ^uint64(0)-span {
		limit = min(limit, e.Clock+span)
	}
	return limit
}

// Ready returns what the driver must do: per next hop, the updates due to it
// batched in as few envelopes as hold them within MaxEnvelopeBytes (which
// every receiver refuses to exceed), the sync answers queued since the last
// call, and the membership protocol's messages, broadcasts and events.
func (n *Node) Ready() Ready {
	rd := n.ready()
	n.takeProtocolOutput(&rd)
	return rd
}

// SyncRequest returns what a node stuck at its gate (or, having run all its
// iterations, waiting for the last updates) sends: one request to each of up
// to Fanout live members whose entry holds it back, asking for their own
// updates up to what it accepts (its clock + s + 1), and the same request to
// one other live member each, which holds them too if they reached it. Repeated calls take the
// next laggards in turn. It returns nil when nothing holds the node back.
// The driver sends the requests like any other message; answers arrive as
// envelopes.
func (n *Node) SyncRequest() []Message {
	need := n.syncNeed()
	if need == 0 {
		return nil
	}
	var laggards []string
	for _, q := range n.Live() {
		if q != n.cfg.ID && n.vc.Get(q) < need {
			laggards = append(laggards, q)
		}
	}
	if len(laggards) == 0 {
		return nil
	}
	upto := n.clock + uint64(n.cfg.Staleness) + 1
	start := n.lagCursor % len(laggards)
	k := min(n.sc.Fanout, len(laggards))
	n.lagCursor = start + k
	out := make([]Message, 0, 2*k)
	for i := range k {
		q := laggards[(start+i)%len(laggards)]
		req := SyncMessage{Upto: upto, Have: []SyncEntry{{Origin: q, Clock: n.vc.Get(q)}}}
		// A member that announced its departure is gone; others hold
		// what it sent before it left.
		if !n.Leaving(q) {
			out = append(out, n.request(q, req))
		}
		// The same question to another member, in turn: the laggard may be
		// unreachable from here (a link with no path), while its updates
		// reached others, who keep them (Window).
		if other := n.otherThan(q); other != "" {
			out = append(out, n.request(other, req))
		}
	}
	return out
}

// otherThan returns the next live member in turn that is neither this node,
// nor q, nor leaving; "" when there is none.
func (n *Node) otherThan(q string) string {
	live := n.Live()
	for range live {
		m := live[n.peerCursor%len(live)]
		n.peerCursor++
		if m != n.cfg.ID && m != q && !n.Leaving(m) {
			return m
		}
	}
	return ""
}

// AntiEntropy returns one request, to the next live member in turn, carrying
// the node's whole vector clock and asking for the updates the node should
// hold already (clocks up to its clock − s − 1, all of them once it has run
// its iterations): gaps the gate does not wait for, such as the last updates
// of a member that died. Only the origins it lacks something of are listed.
// The request also carries the node's latest view digest (see digest.go);
// when the node lacks nothing, it goes out alone until it has been offered
// to every other live member once. AntiEntropy returns nil when there is
// nothing to ask or to offer (or no other live member to ask).
func (n *Node) AntiEntropy() []Message {
	live := n.Live()
	if len(live) < 2 {
		return nil
	}
	var upto uint64
	switch {
	case n.clock >= n.lastClock():
		upto = n.lastClock()
	case n.clock > uint64(n.cfg.Staleness)+1:
		upto = n.clock - uint64(n.cfg.Staleness) - 1
	}
	var have []SyncEntry
	for _, m := range n.members {
		want := upto
		if last, gone := n.left[m]; gone {
			want = min(want, last)
		}
		if m != n.cfg.ID && n.vc.Get(m) < want {
			have = append(have, SyncEntry{Origin: m, Clock: n.vc.Get(m)})
		}
	}
	digest := n.LatestDigest()
	if digest.Clock != n.digestOffered {
		n.digestOffered, n.digestOffers = digest.Clock, 0
	}
	if len(have) == 0 && (digest.Clock == 0 || n.digestOffers >= uint64(len(live)-1)) {
		return nil
	}
	n.digestOffers++
	// Walk the live members after this node's own place, one per request.
	self, _ := slices.BinarySearch(live, n.cfg.ID)
	peer := live[(self+1+n.peerCursor%(len(live)-1))%len(live)]
	n.peerCursor++
	if !slices.ContainsFunc(have, func(e SyncEntry) bool { return e.Origin == peer }) {
		// The peer's own entry, which asks for nothing (it is at upto),
		// shows the peer that this node lacks none of its updates it told
		// it were gone (see lacksOurs).
		have = append(have, SyncEntry{Origin: peer, Clock: n.vc.Get(peer)})
	}
	return []Message{n.request(peer, SyncMessage{Upto: upto, Have: have, Digest: digest})}
}

// compareDigest compares a requester's view digest with this node's own of
// the same row, once per requester and row, and reports a difference.
func (n *Node) compareDigest(from string, d ViewDigest) {
	if d.Clock == 0 || d.Clock <= n.digestChecked[from] {
		return
	}
	own, ok := n.DigestAt(d.Clock)
	if !ok {
		return
	}
	n.digestChecked[from] = d.Clock
	n.syncStats.DigestsCompared++
	if own == d.Sum {
		return
	}
	n.syncStats.ViewDivergence++
	n.syncStats.DivergedFrom, n.syncStats.DivergedAt = from, d.Clock
	n.proto.events = append(n.proto.events, Event{Kind: EventDiverged, Member: from, Clock: d.Clock})
}

func (n *Node) request(to string, m SyncMessage) Message {
	data := EncodeSync(m)
	n.syncStats.RequestsSent++
	n.syncStats.RequestBytes += uint64(len(data))
	return Message{To: to, Data: data}
}

// syncNeed is the entry every live member must reach for the node to make
// progress: clock − s before its next iteration, the last iteration once it
// has run them all; 0 when it needs nothing.
func (n *Node) syncNeed() uint64 {
	if last := n.lastClock(); n.clock >= last {
		return last
	}
	if need := int64(n.clock) - int64(n.cfg.Staleness); need > 0 {
		return uint64(need)
	}
	return 0
}

// SyncStats returns the node's retransmission counters.
func (n *Node) SyncStats() SyncStats {
	st := n.syncStats
	st.Retained = n.count
	st.RetainedBytes = n.bytes
	return st
}

// warm reads, for each member slot of an envelope's updates, the core's
// records of that member that handling the update reads after: the loads
// are independent of one another here, so the processor overlaps their
// cache misses, where the handling of one update after another waits for
// each in turn.
func (n *Node) warm(slots []int) {
	var sum uint64
	states, live, logs, set := n.proto.states, n.live.state, n.logs, n.vc.set
	for _, q := range slots {
		if q < 0 {
			continue
		}
		if q < len(states) {
			sum += uint64(states[q].card)
		}
		if q < len(live) {
			sum += uint64(live[q])
		}
		if q < len(logs) {
			sum += uint64(logs[q].n)
		}
		if q < len(set) && set[q] {
			sum++
		}
	}
	n.warmed += sum
}
