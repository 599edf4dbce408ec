package mesh

import (
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/sketchmesh/sketchmesh/node"
	"github.com/sketchmesh/sketchmesh/wire"
)

// JoinProtocol is the libp2p protocol a joiner asks a member on: one
// request per stream. A join request is answered with a plan (the clock of
// the rows the joiner will get, and the members who can confirm them), then
// a welcome or a refusal; a rows request with one rows digest or a refusal
// (see joincheck.go).
const JoinProtocol = protocol.ID("/sketchmesh/join/1")

// Limits of the join exchange.
const (
	maxJoinRequestBytes = 64 << 10
	// MaxJoinReplyBytes bounds a reply, which carries the whole view.
	MaxJoinReplyBytes = 1 << 30
	// joinVersion 2 added the joiner's admission to the reply; 3 the plan
	// before the welcome and the rows request (verified snapshots).
	joinVersion = 3
)

// ErrRefused is wrapped by the error a joiner gets when the member it asked
// refuses it (another mesh, conflicting settings).
var ErrRefused = errors.New("join refused")

// JoinRequest is what a joiner sends.
type JoinRequest struct {
	Mesh   string
	Member string
	// Settings are the joiner's settings; Explicit names those its user
	// set, which must agree with the mesh's. The rest it takes from the
	// mesh.
	Settings node.Settings
	Explicit []string
	Addrs    []string
	// Sig is the joiner's signature of node.JoinSignedBytes(Member, the
	// donor's peer id): its request to be admitted by that member, which
	// the admit carries so no member can make up a joiner.
	Sig []byte
}

// PeerRecord is a member and where to reach it.
type PeerRecord struct {
	Member string
	Addrs  []string
}

// JoinReply admits a joiner: the mesh's settings, its members, the
// snapshot the joiner starts from, and its admission: the donor's signed
// word that the joiner entered at the snapshot's clock, which the joiner's
// hellos carry (see node.Admission).
type JoinReply struct {
	Settings  node.Settings
	Members   []PeerRecord
	Snapshot  *node.Snapshot
	Admission node.Admission
	// Witness is the member (or, for a --join address, the peer) whose
	// digest of its own rows confirmed the snapshot's; empty when the rows
	// are at clock 0 (checked without one) or when neither the donor nor
	// the caller named another member to ask (a mesh of one). Not sent.
	Witness string
}

// ReplayPending hands n, the core started from r's snapshot, the frames the
// snapshot holds above its rows, as if the donor had sent them: they are
// checked and applied like any update. A nil reply or one without frames
// hands nothing.
func (r *JoinReply) ReplayPending(n *node.Node) {
	if r == nil || r.Snapshot == nil || len(r.Snapshot.Pending) == 0 || len(r.Members) == 0 {
		return
	}
	n.Receive(r.Members[0].Member, node.EncodeEnvelope(r.Snapshot.Pending))
}

func encodeJoinRequest(q JoinRequest) []byte {
	w := wire.NewWriter()
	w.Array(8)
	w.Uint(joinVersion)
	w.String("join")
	w.String(q.Mesh)
	w.String(q.Member)
	q.Settings.WriteTo(w)
	w.Strings(q.Explicit)
	w.Strings(q.Addrs)
	w.Bin(q.Sig)
	return w.Bytes()
}

func decodeJoinRequest(data []byte) (JoinRequest, error) {
	var q JoinRequest
	r := wire.NewReader(data)
	if err := r.Fields("join request", 8); err != nil {
		return q, err
	}
	if err := readHeader(r, "join"); err != nil {
		return q, err
	}
	var err error
	if q.Mesh, err = r.String("mesh", maxMemberBytes); err != nil {
		return q, err
	}
	if q.Member, err = r.String("member", maxMemberBytes); err != nil {
		return q, err
	}
	if err := checkMember(q.Member); err != nil {
		return q, fmt.Errorf("%w: %w", wire.ErrMalformed, err)
	}
	if q.Settings, err = node.ReadSettings(r); err != nil {
		return q, err
	}
	if q.Explicit, err = r.Strings("explicit settings", 32, 32); err != nil {
		return q, err
	}
	if q.Addrs, err = r.Strings("addrs", maxAddrs, maxAddrBytes); err != nil {
		return q, err
	}
	if q.Sig, err = r.Bytes("signature", node.MaxSignatureBytes); err != nil {
		return q, err
	}
	return q, r.End()
}

func readHeader(r *wire.Reader, kind string) error {
	ver, err := r.Uint("version")
	if err != nil {
		return err
	}
	if ver != joinVersion {
		return fmt.Errorf("%w: version %d, want %d", wire.ErrMalformed, ver, joinVersion)
	}
	k, err := r.String("kind", 16)
	if err != nil {
		return err
	}
	if k != kind {
		return fmt.Errorf("%w: kind %q, want %q", wire.ErrMalformed, k, kind)
	}
	return nil
}

// encodeJoinReply writes a welcome, or a refusal when reason is not empty.
func encodeJoinReply(p *JoinReply, reason string) []byte {
	w := wire.NewWriter()
	if reason != "" {
		w.Array(3)
		w.Uint(joinVersion)
		w.String("refused")
		w.String(reason)
		return w.Bytes()
	}
	w.Array(6)
	w.Uint(joinVersion)
	w.String("welcome")
	p.Settings.WriteTo(w)
	writeMembers(w, p.Members)
	p.Snapshot.WriteTo(w)
	w.Array(5)
	w.String(p.Admission.Member)
	w.Uint(p.Admission.Entry)
	w.String(p.Admission.Signer)
	w.Bin(p.Admission.Sig)
	w.Bin(p.Admission.JoinSig)
	return w.Bytes()
}

func decodeJoinReply(data []byte) (*JoinReply, error) {
	r := wire.NewReader(data)
	n, err := r.Array("join reply", 1)
	if err != nil {
		return nil, err
	}
	if n == 3 {
		return nil, readRefusal(r)
	}
	if n != 6 {
		return nil, fmt.Errorf("%w: join reply has %d fields, want 3 or 6", wire.ErrMalformed, n)
	}
	if err := readHeader(r, "welcome"); err != nil {
		return nil, err
	}
	p := &JoinReply{}
	if p.Settings, err = node.ReadSettings(r); err != nil {
		return nil, err
	}
	if p.Members, err = readMembers(r); err != nil {
		return nil, err
	}
	if p.Snapshot, err = node.ReadSnapshot(r); err != nil {
		return nil, err
	}
	// A member the joiner would wait for must be one it can declare dead:
	// a peer, its id in canonical form.
	for _, m := range p.Snapshot.Members {
		if err := checkMember(m.ID); err != nil {
			return nil, fmt.Errorf("%w: snapshot member: %w", wire.ErrMalformed, err)
		}
	}
	if err := r.Fields("admission", 5); err != nil {
		return nil, err
	}
	a := &p.Admission
	if a.Member, err = r.String("admitted member", maxMemberBytes); err != nil {
		return nil, err
	}
	if a.Entry, err = r.Uint("admission entry"); err != nil {
		return nil, err
	}
	if a.Signer, err = r.String("admission signer", maxMemberBytes); err != nil {
		return nil, err
	}
	if a.Sig, err = r.Bytes("admission signature", node.MaxSignatureBytes); err != nil {
		return nil, err
	}
	if a.JoinSig, err = r.Bytes("join signature", node.MaxSignatureBytes); err != nil {
		return nil, err
	}
	if a.Entry != p.Snapshot.Clock {
		return nil, fmt.Errorf("%w: admission at entry %d, the snapshot is at %d", wire.ErrMalformed, a.Entry, p.Snapshot.Clock)
	}
	return p, r.End()
}

// readLimited reads one length-prefixed message (the update protocol's
// framing) of at most limit bytes. It checks the length before it reads on,
// and its buffer grows with the bytes that arrive (see readMessageMax): a
// reply may be a GiB long, and a peer that only claims one must not cost
// that much memory.
func readLimited(r io.Reader, limit int) ([]byte, error) {
	return readMessageMax(r, limit)
}

// Join asks the member at addr (a full multiaddr with /p2p/) to admit the
// node described by q, checks the snapshot it sends against a second
// member's rows (JoinChecked), and returns what the mesh sends back. sign,
// when set, signs the request for the member's peer (q.Sig).
func Join(ctx context.Context, h *Host, addr ma.Multiaddr, q JoinRequest, sign func(msg []byte) ([]byte, error)) (*JoinReply, error) {
	return JoinChecked(ctx, h, addr, q, sign, nil)
}

// JoinChecked is Join that also asks the peers at witnesses (full
// multiaddrs, such as the other --join addresses) to confirm the rows,
// before the members the donor names: a donor cannot choose those. The
// snapshot is refused (an error wrapping node.ErrSnapshotMismatch) when a
// second member's rows at the snapshot's clock differ, and when nobody
// that was asked confirmed them (node.ErrUnverified); rows at clock 0 are
// checked without anyone, and a donor that names nobody else, asked
// with no witnesses given, is a mesh of one and is trusted (Witness empty).
func JoinChecked(ctx context.Context, h *Host, addr ma.Multiaddr, q JoinRequest, sign func(msg []byte) ([]byte, error), witnesses []ma.Multiaddr) (*JoinReply, error) {
	info, err := peer.AddrInfoFromP2pAddr(addr)
	if err != nil {
		return nil, fmt.Errorf("join address %s: %w (it must end in /p2p/<peer id>)", addr, err)
	}
	if sign != nil {
		if q.Sig, err = sign(node.JoinSignedBytes(q.Member, info.ID.String())); err != nil {
			return nil, fmt.Errorf("sign the join request: %w", err)
		}
	}
	if err := h.Connect(ctx, *info); err != nil {
		return nil, fmt.Errorf("reach member at %s: %w", addr, err)
	}
	s, err := h.h.NewStream(network.WithAllowLimitedConn(ctx, "join"), info.ID, JoinProtocol)
	if err != nil {
		return nil, fmt.Errorf("open join stream to %s: %w", info.ID, err)
	}
	defer s.Close()
	if d, ok := ctx.Deadline(); ok {
		_ = s.SetDeadline(d)
	}
	if err := writeMessage(s, encodeJoinRequest(q)); err != nil {
		return nil, fmt.Errorf("send join request to %s: %w", info.ID, err)
	}
	_ = s.CloseWrite()
	data, err := readLimited(s, maxPlanBytes)
	if err != nil {
		return nil, fmt.Errorf("read join plan from %s: %w", info.ID, err)
	}
	plan, err := decodeJoinPlan(data)
	if err != nil {
		return nil, fmt.Errorf("member %s: %w", info.ID, err)
	}
	// The second members are asked now, while the donor waits for its
	// rows to reach the plan's clock, so that they are not past it.
	cands := witnessCandidates(h, info.ID, plan.Members, witnesses)
	var answers <-chan rowsAnswer
	// The donor must not know the seed of the projections it is checked
	// by.
	var seedBytes [8]byte
	_, _ = crand.Read(seedBytes[:])
	seed := binary.LittleEndian.Uint64(seedBytes[:])
	if plan.Clock > 0 && len(cands) > 0 {
		answers = askRows(ctx, h, RowsRequest{Mesh: q.Mesh, Clock: plan.Clock, Seed: seed}, cands)
	}
	data, err = readLimited(s, MaxJoinReplyBytes)
	if err != nil {
		return nil, fmt.Errorf("read join reply from %s: %w", info.ID, err)
	}
	reply, err := decodeJoinReply(data)
	if errors.Is(err, ErrRefused) {
		// It gave up after its plan (its rows did not reach the clock in
		// time, it is leaving): another member may admit the node.
		return nil, fmt.Errorf("member %s planned rows at clock %d and sent none: %s", info.ID, plan.Clock, strings.TrimPrefix(err.Error(), ErrRefused.Error()+": "))
	}
	if err != nil {
		return nil, fmt.Errorf("member %s: %w", info.ID, err)
	}
	if reply.Snapshot.Clock != plan.Clock {
		return nil, fmt.Errorf("member %s: %w: it planned rows at clock %d and sent rows at %d", info.ID, node.ErrSnapshotMismatch, plan.Clock, reply.Snapshot.Clock)
	}
	var asked error
	if answers != nil {
		// Any second member that confirms the rows will do: after a
		// member died with an update in flight, some members may hold
		// that update in their rows at the clock and others not yet.
		var w node.RowsWitness
		if w, err, asked = confirmRows(ctx, answers, len(cands), reply.Snapshot, seed); err == nil {
			reply.Witness = w.Member
			return reply, nil
		}
		if asked == nil {
			retire(h, reply, sign)
			return nil, fmt.Errorf("member %s: %w", info.ID, err)
		}
	}
	err = node.VerifySnapshot(reply.Snapshot, seed, nil)
	switch {
	case err == nil:
	case errors.Is(err, node.ErrUnverified) && len(cands) == 0:
		// A mesh of one member: nobody else holds its rows.
	case asked != nil:
		retire(h, reply, sign)
		return nil, fmt.Errorf("member %s: %w: %w", info.ID, err, asked)
	default:
		retire(h, reply, sign)
		return nil, fmt.Errorf("member %s: %w", info.ID, err)
	}
	return reply, nil
}

// joinCall is a request on the join protocol handed to the daemon's loop,
// which owns the node; the handler writes each message the loop puts on
// out, until the loop closes it.
type joinCall struct {
	req  JoinRequest
	rows *RowsRequest
	out  chan []byte
}

// serveStream handles one stream of the join protocol: read, hand to the
// loop, write what it answers.
func (js *JoinService) serveStream(s network.Stream) {
	defer s.Close()
	_ = s.SetDeadline(time.Now().Add(js.timeout))
	data, err := readLimited(s, maxJoinRequestBytes)
	if err != nil {
		if ok, n := js.warn.allow(time.Now()); ok {
			js.log.Warn("join request unreadable", "from", s.Conn().RemotePeer(), "err", err, "unreported_since_last", n)
		}
		_ = s.Reset()
		return
	}
	call := joinCall{out: make(chan []byte, 2)}
	if requestKind(data) == "rows" {
		var q RowsRequest
		if q, err = decodeRowsRequest(data); err == nil {
			call.rows = &q
		}
	} else if call.req, err = decodeJoinRequest(data); err == nil {
		if p, _ := PeerOf(call.req.Member); p != s.Conn().RemotePeer() {
			err = fmt.Errorf("member %s does not run on the requesting peer %s", call.req.Member, s.Conn().RemotePeer())
		}
	}
	if err != nil {
		if ok, n := js.warn.allow(time.Now()); ok {
			js.log.Warn("join request refused", "from", s.Conn().RemotePeer(), "err", err, "unreported_since_last", n)
		}
		_ = writeMessage(s, encodeJoinReply(nil, "bad join request: "+err.Error()))
		return
	}
	select {
	case js.calls <- call:
	case <-js.stopped:
		return
	}
	for {
		select {
		case out, ok := <-call.out:
			if !ok {
				return
			}
			if err := writeMessage(s, out); err != nil {
				js.log.Warn("join answer not sent", "to", s.Conn().RemotePeer(), "err", err)
				return
			}
		case <-js.stopped:
			return
		}
	}
}
