package mesh

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/sketchmesh/sketchmesh/node"
	"github.com/sketchmesh/sketchmesh/wire"
)

// Verified snapshots on the join protocol (see node/verify.go).
//
// A donor answers a join request with a plan first: the clock T of the
// rows the joiner will get, and the other live members. While the mesh
// trains, T is a few rounds above the donor's rows (rowsMargin), so that
// the members the joiner asks are not past T when they hear from it; while
// the mesh waits (for --wait-members, or done), T is the donor's rows'
// clock. The donor holds its rows at T (node.HoldRows) and admits the
// joiner there; the joiner meanwhile asks up to maxWitnesses second
// members, in parallel, for the digest of their own rows at T, each of
// which holds its rows at T in turn, answers at once if it is there, and
// refuses if it is past T. The first digest that comes back decides.
//
//	rows request: [3, "rows", mesh str, clock uint, seed uint]
//	plan:         [3, "plan", clock uint, [[member str, [addr str...]]...]]
//	rows reply:   [3, "rows", clock uint, digest bin(32), held bin(32), projections floats]
//	refusal:      [3, "refused", reason str]

// Limits of the verification exchange.
const (
	// maxPlanBytes bounds a plan: a clock and the members' records.
	maxPlanBytes = 4 << 20
	// maxRowsReplyBytes bounds a rows reply or a refusal.
	maxRowsReplyBytes = 8 << 10
	// maxRowsAhead bounds how far above its rows a member holds them for a
	// rows request.
	maxRowsAhead = 4096
	// maxWitnesses is how many second members a joiner asks at once.
	maxWitnesses = 3
)

// RowsRequest asks a member for the digest of its rows at Clock, and
// their projections with Seed (node.RowsProjections).
type RowsRequest struct {
	Mesh  string
	Clock uint64
	Seed  uint64
}

// JoinPlan is a donor's first answer: the clock of the rows the joiner
// will get, and the other members it can ask to confirm them.
type JoinPlan struct {
	Clock   uint64
	Members []PeerRecord
}

func encodeRowsRequest(q RowsRequest) []byte {
	w := wire.NewWriter()
	w.Array(5)
	w.Uint(joinVersion)
	w.String("rows")
	w.String(q.Mesh)
	w.Uint(q.Clock)
	w.Uint(q.Seed)
	return w.Bytes()
}

func decodeRowsRequest(data []byte) (RowsRequest, error) {
	var q RowsRequest
	r := wire.NewReader(data)
	if err := r.Fields("rows request", 5); err != nil {
		return q, err
	}
	if err := readHeader(r, "rows"); err != nil {
		return q, err
	}
	var err error
	if q.Mesh, err = r.String("mesh", maxMemberBytes); err != nil {
		return q, err
	}
	if q.Clock, err = r.Uint("rows clock"); err != nil {
		return q, err
	}
	if q.Seed, err = r.Uint("seed"); err != nil {
		return q, err
	}
	return q, r.End()
}

// requestKind returns the kind a request on the join protocol names, for
// its own decoder to read in full; "" if it names none.
func requestKind(data []byte) string {
	r := wire.NewReader(data)
	if _, err := r.Array("request", 2); err != nil {
		return ""
	}
	if _, err := r.Uint("version"); err != nil {
		return ""
	}
	k, _ := r.String("kind", 16)
	return k
}

func writeMembers(w *wire.Writer, members []PeerRecord) {
	w.Array(len(members))
	for _, m := range members {
		w.Array(2)
		w.String(m.Member)
		w.Strings(m.Addrs)
	}
}

func readMembers(r *wire.Reader) ([]PeerRecord, error) {
	k, err := r.Array("members", 3)
	if err != nil {
		return nil, err
	}
	if k > node.MaxMembers {
		return nil, fmt.Errorf("%w: %d members, limit %d", wire.ErrMalformed, k, node.MaxMembers)
	}
	out := make([]PeerRecord, k)
	for i := range out {
		if err := r.Fields("member", 2); err != nil {
			return nil, err
		}
		if out[i].Member, err = r.String("member", maxMemberBytes); err != nil {
			return nil, err
		}
		if err := checkMember(out[i].Member); err != nil {
			return nil, fmt.Errorf("%w: %w", wire.ErrMalformed, err)
		}
		if out[i].Addrs, err = r.Strings("addrs", maxAddrs, maxAddrBytes); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func encodeJoinPlan(p JoinPlan) []byte {
	w := wire.NewWriter()
	w.Array(4)
	w.Uint(joinVersion)
	w.String("plan")
	w.Uint(p.Clock)
	writeMembers(w, p.Members)
	return w.Bytes()
}

// decodeJoinPlan reads a plan, or a refusal (an error wrapping ErrRefused).
func decodeJoinPlan(data []byte) (JoinPlan, error) {
	var p JoinPlan
	r := wire.NewReader(data)
	n, err := r.Array("join plan", 1)
	if err != nil {
		return p, err
	}
	if n == 3 {
		return p, readRefusal(r)
	}
	if n != 4 {
		return p, fmt.Errorf("%w: join plan has %d fields, want 3 or 4", wire.ErrMalformed, n)
	}
	if err := readHeader(r, "plan"); err != nil {
		return p, err
	}
	if p.Clock, err = r.Uint("plan clock"); err != nil {
		return p, err
	}
	if p.Members, err = readMembers(r); err != nil {
		return p, err
	}
	return p, r.End()
}

func encodeRowsReply(w node.RowsWitness) []byte {
	wr := wire.NewWriter()
	wr.Array(6)
	wr.Uint(joinVersion)
	wr.String("rows")
	wr.Uint(w.Clock)
	wr.Bin(w.Sum[:])
	wr.Bin(w.Held[:])
	wr.Floats(w.Projections)
	return wr.Bytes()
}

// decodeRowsReply reads a rows reply (Member left empty), or a refusal (an
// error wrapping ErrRefused).
func decodeRowsReply(data []byte) (node.RowsWitness, error) {
	var w node.RowsWitness
	r := wire.NewReader(data)
	n, err := r.Array("rows reply", 1)
	if err != nil {
		return w, err
	}
	if n == 3 {
		return w, readRefusal(r)
	}
	if n != 6 {
		return w, fmt.Errorf("%w: rows reply has %d fields, want 3 or 6", wire.ErrMalformed, n)
	}
	if err := readHeader(r, "rows"); err != nil {
		return w, err
	}
	if w.Clock, err = r.Uint("rows clock"); err != nil {
		return w, err
	}
	for _, d := range []struct {
		what string
		sum  *[32]byte
	}{{"rows digest", &w.Sum}, {"held digest", &w.Held}} {
		b, err := r.Bytes(d.what, len(d.sum))
		if err != nil {
			return w, err
		}
		if len(b) != len(d.sum) {
			return w, fmt.Errorf("%w: %s of %d bytes, want %d", wire.ErrMalformed, d.what, len(b), len(d.sum))
		}
		copy(d.sum[:], b)
	}
	if w.Projections, err = r.Floats("projections", node.RowsProjectionCount); err != nil {
		return w, err
	}
	if len(w.Projections) != node.RowsProjectionCount {
		return w, fmt.Errorf("%w: %d projections, want %d", wire.ErrMalformed, len(w.Projections), node.RowsProjectionCount)
	}
	return w, r.End()
}

// readRefusal reads the rest of a refusal and returns it as an error
// wrapping ErrRefused.
func readRefusal(r *wire.Reader) error {
	if err := readHeader(r, "refused"); err != nil {
		return err
	}
	reason, err := r.String("reason", 4096)
	if err != nil {
		return err
	}
	if err := r.End(); err != nil {
		return err
	}
	return fmt.Errorf("%w: %s", ErrRefused, reason)
}

// witness is a second member a joiner may ask, and what it calls it.
type witness struct {
	name string
	info peer.AddrInfo
}

// witnessCandidates returns up to maxWitnesses peers to ask: those at the
// given addresses first, then the members the donor named; never the
// donor, the joiner's own peer, or one peer twice.
func witnessCandidates(h *Host, donor peer.ID, named []PeerRecord, given []ma.Multiaddr) []witness {
	seen := map[peer.ID]bool{donor: true, h.h.ID(): true}
	var out []witness
	add := func(name string, info *peer.AddrInfo) {
		if len(out) < maxWitnesses && !seen[info.ID] {
			seen[info.ID] = true
			out = append(out, witness{name: name, info: *info})
		}
	}
	for _, a := range given {
		if info, err := peer.AddrInfoFromP2pAddr(a); err == nil {
			add(info.ID.String(), info)
		}
	}
	for _, m := range named {
		p, err := PeerOf(m.Member)
		if err != nil {
			continue
		}
		info := &peer.AddrInfo{ID: p}
		for _, s := range m.Addrs {
			if a, err := ma.NewMultiaddr(s); err == nil {
				info.Addrs = append(info.Addrs, a)
			}
		}
		add(m.Member, info)
	}
	return out
}

// rowsAnswer is one second member's answer to a rows request.
type rowsAnswer struct {
	w   node.RowsWitness
	err error
}

// askRows asks every candidate, in parallel, for its account of its rows
// at q's clock; the answers arrive on the channel returned, one per
// candidate.
func askRows(ctx context.Context, h *Host, q RowsRequest, cands []witness) <-chan rowsAnswer {
	out := make(chan rowsAnswer, len(cands))
	for _, c := range cands {
		go func() {
			w, err := rowsOf(ctx, h, c.info, q)
			if err != nil {
				err = fmt.Errorf("member %s: %w", c.name, err)
			}
			w.Member = c.name
			out <- rowsAnswer{w: w, err: err}
		}()
	}
	return out
}

// rowsOf asks one member for its account of its rows.
func rowsOf(ctx context.Context, h *Host, info peer.AddrInfo, q RowsRequest) (node.RowsWitness, error) {
	var sum node.RowsWitness
	if err := h.Connect(ctx, info); err != nil {
		return sum, fmt.Errorf("reach: %w", err)
	}
	s, err := h.h.NewStream(network.WithAllowLimitedConn(ctx, "rows"), info.ID, JoinProtocol)
	if err != nil {
		return sum, fmt.Errorf("open rows stream: %w", err)
	}
	defer s.Close()
	if d, ok := ctx.Deadline(); ok {
		_ = s.SetDeadline(d)
	}
	if err := writeMessage(s, encodeRowsRequest(q)); err != nil {
		return sum, fmt.Errorf("send rows request: %w", err)
	}
	_ = s.CloseWrite()
	data, err := readLimited(s, maxRowsReplyBytes)
	if err != nil {
		return sum, fmt.Errorf("read rows reply: %w", err)
	}
	w, err := decodeRowsReply(data)
	if err != nil {
		return w, err
	}
	if w.Clock != q.Clock {
		return w, fmt.Errorf("%w: rows at clock %d, asked for %d", wire.ErrMalformed, w.Clock, q.Clock)
	}
	return w, nil
}

// confirmRows reads the n answers until one confirms s's rows
// (node.VerifySnapshot): it returns that witness, or the first refusal
// (err) when some answered and none confirmed, or why nobody answered
// (asked) when none did.
func confirmRows(ctx context.Context, answers <-chan rowsAnswer, n int, s *node.Snapshot, seed uint64) (w node.RowsWitness, err, asked error) {
	var errs []error
	for range n {
		select {
		case a := <-answers:
			if a.err != nil {
				errs = append(errs, a.err)
				continue
			}
			e := node.VerifySnapshot(s, seed, []node.RowsWitness{a.w})
			if e == nil {
				return a.w, nil, nil
			}
			if err == nil {
				err = e
			}
		case <-ctx.Done():
			errs = append(errs, fmt.Errorf("no further second member answered in time: %w", ctx.Err()))
			if err == nil {
				err = node.ErrUnverified
			}
			return w, err, errors.Join(errs...)
		}
	}
	if err != nil {
		return w, err, nil
	}
	return w, node.ErrUnverified, fmt.Errorf("no second member answered: %w", errors.Join(errs...))
}

// JoinService answers the join protocol for one node core. Its stream
// handler hands each request to the loop that owns the core (Calls), which
// answers it with Serve and, on each turn, ServeHeld; the Daemon drives
// it.
type JoinService struct {
	host     *Host
	meshName string
	settings node.Settings
	timeout  time.Duration
	log      *slog.Logger
	calls    chan joinCall
	stopped  chan struct{}
	stopOnce sync.Once
	warn     logEvery
	held     []heldCall
}

// NewJoinService answers the join protocol on h for a node of mesh
// meshName with settings; each request waits at most timeout for its
// answer.
func NewJoinService(h *Host, meshName string, settings node.Settings, timeout time.Duration, logger *slog.Logger) *JoinService {
	if logger == nil {
		logger = slog.Default()
	}
	s := &JoinService{host: h, meshName: meshName, settings: settings, timeout: timeout, log: logger,
		calls: make(chan joinCall), stopped: make(chan struct{})}
	h.h.SetStreamHandler(JoinProtocol, s.serveStream)
	return s
}

// Stop refuses the held requests and makes the handlers give up on the
// rest; the loop no longer reads Calls.
func (s *JoinService) Stop(d joinDriver, reason string) {
	s.DropHeld(d, reason)
	s.stopOnce.Do(func() { close(s.stopped) })
}

// joinDriver is what the join service asks of the loop that owns the core.
type joinDriver interface {
	core() *node.Node
	// training reports whether the mesh trains now (the rows move), so
	// that a joiner's rows are planned ahead of them.
	training() bool
	// admitted sends what an admission queued (the admit announcement).
	admitted()
}

// heldCall is a request on the join protocol whose answer waits for the
// node's rows to reach a clock.
type heldCall struct {
	call     joinCall
	clock    uint64
	deadline time.Time
}

// rowsMargin is how far above its rows a training donor plans a joiner's
// rows: past the spread of members' rows (about twice the staleness bound)
// by enough rounds for the joiner to reach its second members.
func (s *JoinService) rowsMargin() uint64 {
	return 2*(uint64(s.settings.Staleness)+1) + 8
}

// Serve answers a request on the join protocol, on the loop.
func (s *JoinService) Serve(d joinDriver, call joinCall) {
	if call.rows != nil {
		s.serveRows(d, call)
		return
	}
	n, q := d.core(), call.req
	refuse := func(reason string) {
		call.out <- encodeJoinReply(nil, reason)
		close(call.out)
	}
	if q.Mesh != s.meshName {
		refuse(fmt.Sprintf("this member is in mesh %q, not %q", s.meshName, q.Mesh))
		return
	}
	if err := q.Settings.Conflict(s.settings, q.Explicit); err != nil {
		s.log.Warn("joiner refused", "member", shortMember(q.Member), "err", err)
		refuse(err.Error())
		return
	}
	if err := n.CheckAdmit(q.Member, q.Sig); err != nil {
		s.log.Warn("joiner refused", "member", shortMember(q.Member), "err", err)
		refuse(err.Error())
		return
	}
	rows := n.CommittedClock()
	at := rows
	if d.training() {
		at += s.rowsMargin()
		if it := n.Config().Iterations; it > rows {
			at = min(at, it)
		}
	}
	call.out <- encodeJoinPlan(JoinPlan{Clock: at, Members: s.otherMembers(d.core(), q.Member, false)})
	if at == rows {
		s.welcome(d, call)
		return
	}
	if !n.HoldRows(at) {
		refuse(fmt.Sprintf("this member serves %d joins already", len(s.held)))
		return
	}
	s.held = append(s.held, heldCall{call: call, clock: at, deadline: time.Now().Add(s.timeout)})
}

// welcome admits a joiner at the rows the node holds now and sends it its
// snapshot.
func (s *JoinService) welcome(d joinDriver, call joinCall) {
	defer close(call.out)
	q := call.req
	snap, adm, err := d.core().Admit(q.Member, q.Sig)
	if err != nil {
		s.log.Warn("joiner refused", "member", shortMember(q.Member), "err", err)
		call.out <- encodeJoinReply(nil, err.Error())
		return
	}
	learnAddrs(s.host, q.Member, q.Addrs)
	d.admitted()
	reply := &JoinReply{Settings: s.settings, Snapshot: &snap, Admission: adm, Members: s.otherMembers(d.core(), q.Member, true)}
	call.out <- encodeJoinReply(reply, "")
}

// otherMembers returns the live members but the joiner's peer, sorted,
// with their addresses; the node itself among them when withSelf.
func (s *JoinService) otherMembers(n *node.Node, joiner string, withSelf bool) []PeerRecord {
	var out []PeerRecord
	if withSelf {
		out = append(out, PeerRecord{Member: n.ID(), Addrs: hostAddrs(s.host)})
	}
	jp, _ := PeerOf(joiner)
	for _, m := range n.Live() {
		if m == n.ID() {
			continue
		}
		if p, err := PeerOf(m); err == nil && p != jp {
			out = append(out, PeerRecord{Member: m, Addrs: addrsOf(s.host, p)})
		}
	}
	slices.SortFunc(out, func(x, y PeerRecord) int { return strings.Compare(x.Member, y.Member) })
	return out
}

// serveRows answers a rows request: at once when the rows are at its
// clock, when they reach it if they are below (within maxRowsAhead), and
// with a refusal when they are past it.
func (s *JoinService) serveRows(d joinDriver, call joinCall) {
	n, q := d.core(), call.rows
	rows := n.CommittedClock()
	refuse := func(reason string) {
		call.out <- encodeJoinReply(nil, reason)
		close(call.out)
	}
	switch {
	case q.Mesh != s.meshName:
		refuse(fmt.Sprintf("this member is in mesh %q, not %q", s.meshName, q.Mesh))
	case q.Clock == rows:
		sendRows(n, call)
	case q.Clock < rows:
		refuse(fmt.Sprintf("rows past clock %d: they are at %d", q.Clock, rows))
	case q.Clock-rows > maxRowsAhead:
		refuse(fmt.Sprintf("rows at clock %d are more than %d above this member's, at %d", q.Clock, maxRowsAhead, rows))
	case !n.HoldRows(q.Clock):
		refuse(fmt.Sprintf("this member serves %d joins already", len(s.held)))
	default:
		s.held = append(s.held, heldCall{call: call, clock: q.Clock, deadline: time.Now().Add(s.timeout)})
	}
}

func sendRows(n *node.Node, call joinCall) {
	rows := n.Rows()
	call.out <- encodeRowsReply(node.RowsWitness{Clock: rows.Clock, Sum: node.RowsDigest(&rows), Held: node.HeldDigest(&rows),
		Projections: node.RowsProjections(rows.View, call.rows.Seed)})
	close(call.out)
}

// ServeHeld answers the held requests whose rows the node holds now, and
// refuses those whose time is up.
func (s *JoinService) ServeHeld(d joinDriver, now time.Time) {
	if len(s.held) == 0 {
		return
	}
	n := d.core()
	rows := n.CommittedClock()
	kept := s.held[:0]
	var release []uint64
	for _, h := range s.held {
		switch {
		case h.clock == rows && h.call.rows != nil:
			sendRows(n, h.call)
		case h.clock == rows:
			s.welcome(d, h.call)
		case now.After(h.deadline):
			h.call.out <- encodeJoinReply(nil, fmt.Sprintf("this member's rows did not reach clock %d within %s (they are at %d)", h.clock, s.timeout, rows))
			close(h.call.out)
		default:
			kept = append(kept, h)
			continue
		}
		release = append(release, h.clock)
	}
	s.held = kept
	for _, c := range release {
		n.ReleaseRows(c)
	}
}

// DropHeld refuses every held request: the node stops, or its core is
// replaced.
func (s *JoinService) DropHeld(d joinDriver, reason string) {
	for _, h := range s.held {
		h.call.out <- encodeJoinReply(nil, reason)
		close(h.call.out)
		d.core().ReleaseRows(h.clock)
	}
	s.held = nil
}

// joinRounds is how many times JoinAny goes through its addresses when
// snapshots were refused, joinRoundPause the pause between rounds.
const (
	joinRounds     = 2
	joinRoundPause = 2 * time.Second
)

// maxRetireNotices bounds the members a joiner tells that an incarnation
// it refused to start leaves.
const maxRetireNotices = 64

// retire tells the members a donor named that the incarnation it admitted
// leaves at its entry: the joiner refused the rows and joins again as
// another incarnation, and without the notice they would wait for the
// refused one's first update until they suspect it. It needs the joiner's
// key (sign); the notice is the member's own, signed like any leave.
func retire(h *Host, reply *JoinReply, sign func([]byte) ([]byte, error)) {
	if sign == nil {
		return
	}
	adm := reply.Admission
	a := node.Announcement{Kind: node.KindLeave, Member: adm.Member, Entry: adm.Entry, Clock: adm.Entry, Signer: adm.Member}
	sig, err := sign(node.AnnouncementSignedBytes(a))
	if err != nil {
		return
	}
	a.Sig = sig
	data := node.EncodeAnnouncement(a)
	var to []string
	for _, m := range reply.Members {
		p, err := PeerOf(m.Member)
		if err != nil || p == h.h.ID() {
			continue
		}
		learnAddrs(h, m.Member, m.Addrs)
		if to = append(to, p.String()); len(to) == maxRetireNotices {
			break
		}
	}
	// The notice can overtake the admit it answers (they travel apart),
	// and a member refuses a leave of a member it does not know: it goes
	// again twice, as a leaver resends its notice; a member that has it
	// already only acknowledges it.
	go func() {
		for _, wait := range []time.Duration{0, 300 * time.Millisecond, time.Second} {
			time.Sleep(wait)
			for _, p := range to {
				h.Send(p, data)
			}
		}
	}()
}

// JoinAny asks the members at addrs in turn until one admits the node
// with a snapshot that checks out, each attempt bounded by timeout: a
// member that cannot be reached, dies mid-transfer, or sends rows a second
// member does not confirm is passed over for the next. When some snapshot
// was refused and none admitted, it goes through the addresses a second
// time, joinRoundPause later. It returns the
// reply and, by reason (node.RejectSnapshotMismatch,
// node.RejectSnapshotUnverified), the snapshots it refused on the way. A
// refusal by a member (another mesh, conflicting settings) ends it.
func JoinAny(ctx context.Context, h *Host, addrs []ma.Multiaddr, q JoinRequest, sign func([]byte) ([]byte, error), timeout time.Duration, logger *slog.Logger) (*JoinReply, map[node.RejectReason]uint64, error) {
	refused := map[node.RejectReason]uint64{}
	var errs []error
	p, inc, err := MemberPeer(q.Member)
	if err != nil {
		return nil, refused, err
	}
	// A second round gives members whose rows disagreed (a member died
	// with an update in flight) the time to exchange what they lack.
	var attempts []int
	for range joinRounds {
		for i := range addrs {
			attempts = append(attempts, i)
		}
	}
	for k, i := range attempts {
		a := addrs[i]
		if k == len(addrs) {
			if len(refused) == 0 {
				break // nothing a second round would change
			}
			select {
			case <-ctx.Done():
				return nil, refused, ctx.Err()
			case <-time.After(joinRoundPause):
			}
		}
		// Each attempt is a new incarnation: a member that admitted an
		// earlier attempt whose reply was lost knows that one at its own
		// entry, and the new one supersedes it everywhere.
		if k > 0 {
			inc++
			q.Member = MemberID(p, inc)
		}
		jctx, cancel := context.WithTimeout(ctx, timeout)
		reply, err := JoinChecked(jctx, h, a, q, sign, slices.Delete(slices.Clone(addrs), i, i+1))
		cancel()
		if err == nil && reply.Admission.Member != q.Member {
			err = fmt.Errorf("member at %s admitted %s, not %s", a, reply.Admission.Member, q.Member)
		}
		if err == nil {
			if reply.Witness == "" && reply.Snapshot.Clock > 0 {
				logger.Warn("joined with rows no second member confirmed: the donor named no other member", "through", a, "clock", reply.Snapshot.Clock)
			}
			logger.Info("joined the mesh", "through", a, "members", len(reply.Members), "clock", reply.Snapshot.Clock, "rows_confirmed_by", shortMember(reply.Witness))
			return reply, refused, nil
		}
		switch {
		case errors.Is(err, node.ErrSnapshotMismatch):
			refused[node.RejectSnapshotMismatch]++
			logger.Warn("snapshot refused: its rows differ from a second member's; trying the next member", "donor", a, "err", err)
		case errors.Is(err, node.ErrUnverified):
			refused[node.RejectSnapshotUnverified]++
			logger.Warn("snapshot refused: no second member confirmed its rows; trying the next member", "donor", a, "err", err)
		case errors.Is(err, ErrRefused):
			return nil, refused, err
		default:
			logger.Warn("join attempt failed; trying the next member as a new incarnation", "through", a, "err", err)
		}
		errs = append(errs, err)
	}
	if len(refused) == 0 {
		return nil, refused, fmt.Errorf("no --join member could be reached: %w", OneLine(errors.Join(errs...)))
	}
	return nil, refused, fmt.Errorf("no --join member admitted this node with rows that check out: %w", OneLine(errors.Join(errs...)))
}

// hostAddrs returns h's listen addresses as strings.
func hostAddrs(h *Host) []string {
	var out []string
	for _, m := range h.h.Addrs() {
		out = append(out, m.String())
	}
	return out
}

// learnAddrs keeps a member's announced addresses in h's peerstore, for
// addrTTL.
func learnAddrs(h *Host, member string, addrs []string) {
	p, err := PeerOf(member)
	if err != nil || p == h.h.ID() {
		return
	}
	var mas []ma.Multiaddr
	for _, s := range addrs {
		if m, err := ma.NewMultiaddr(s); err == nil {
			mas = append(mas, m)
		}
	}
	h.h.Peerstore().AddAddrs(p, mas, addrTTL)
}

// ServeJoinsWith answers join requests on h with answer instead of a node
// core: for a peer that plays a member without being one, as the
// testnet's hostile donor does. answer runs on the stream's goroutine; it
// returns the plan, then (when called again with the plan) the welcome.
// Rows requests are refused.
func ServeJoinsWith(h *Host, timeout time.Duration, answer func(q JoinRequest, plan *JoinPlan) (JoinPlan, *JoinReply, error)) {
	h.h.SetStreamHandler(JoinProtocol, func(s network.Stream) {
		defer s.Close()
		_ = s.SetDeadline(time.Now().Add(timeout))
		data, err := readLimited(s, maxJoinRequestBytes)
		if err != nil {
			_ = s.Reset()
			return
		}
		q, err := decodeJoinRequest(data)
		if err != nil {
			_ = writeMessage(s, encodeJoinReply(nil, "bad join request: "+err.Error()))
			return
		}
		plan, _, err := answer(q, nil)
		if err != nil {
			_ = writeMessage(s, encodeJoinReply(nil, err.Error()))
			return
		}
		if err := writeMessage(s, encodeJoinPlan(plan)); err != nil {
			return
		}
		_, reply, err := answer(q, &plan)
		if err != nil {
			_ = writeMessage(s, encodeJoinReply(nil, err.Error()))
			return
		}
		_ = writeMessage(s, encodeJoinReply(reply, ""))
	})
}
