package mesh

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/sketchmesh/sketchmesh/node"
	"github.com/sketchmesh/sketchmesh/wire"
)

// JoinProtocol is the libp2p protocol a joiner asks a member on: one
// request, one reply, on one stream.
const JoinProtocol = protocol.ID("/sketchmesh/join/1")

// Limits of the join exchange.
const (
	maxJoinRequestBytes = 64 << 10
	// MaxJoinReplyBytes bounds a reply, which carries the whole view.
	MaxJoinReplyBytes = 1 << 30
	// joinVersion 2 added the joiner's admission to the reply.
	joinVersion = 2
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
	w.Array(len(p.Members))
	for _, m := range p.Members {
		w.Array(2)
		w.String(m.Member)
		w.Strings(m.Addrs)
	}
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
		if err := readHeader(r, "refused"); err != nil {
			return nil, err
		}
		reason, err := r.String("reason", 4096)
		if err != nil {
			return nil, err
		}
		if err := r.End(); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %s", ErrRefused, reason)
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
	k, err := r.Array("members", 3)
	if err != nil {
		return nil, err
	}
	if k > node.MaxMembers {
		return nil, fmt.Errorf("%w: %d members, limit %d", wire.ErrMalformed, k, node.MaxMembers)
	}
	p.Members = make([]PeerRecord, k)
	for i := range p.Members {
		if err := r.Fields("member", 2); err != nil {
			return nil, err
		}
		if p.Members[i].Member, err = r.String("member", maxMemberBytes); err != nil {
			return nil, err
		}
		if err := checkMember(p.Members[i].Member); err != nil {
			return nil, fmt.Errorf("%w: %w", wire.ErrMalformed, err)
		}
		if p.Members[i].Addrs, err = r.Strings("addrs", maxAddrs, maxAddrBytes); err != nil {
			return nil, err
		}
	}
	if p.Snapshot, err = node.ReadSnapshot(r); err != nil {
		return nil, err
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
// node described by q, and returns what the mesh sends back. sign, when
// set, signs the request for the member's peer (q.Sig).
func Join(ctx context.Context, h *Host, addr ma.Multiaddr, q JoinRequest, sign func(msg []byte) ([]byte, error)) (*JoinReply, error) {
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
	data, err := readLimited(s, MaxJoinReplyBytes)
	if err != nil {
		return nil, fmt.Errorf("read join reply from %s: %w", info.ID, err)
	}
	reply, err := decodeJoinReply(data)
	if err != nil {
		return nil, fmt.Errorf("member %s: %w", info.ID, err)
	}
	return reply, nil
}

// joinCall is a join request handed to the daemon's loop, which owns the
// node; the handler waits for the answer.
type joinCall struct {
	req   JoinRequest
	reply chan []byte
}

// serveJoin handles one join stream: read, hand to the loop, answer.
func (a *Daemon) serveJoin(s network.Stream) {
	defer s.Close()
	_ = s.SetDeadline(time.Now().Add(a.cfg.JoinTimeout))
	data, err := readLimited(s, maxJoinRequestBytes)
	if err != nil {
		if ok, n := a.joinWarn.allow(time.Now()); ok {
			a.log.Warn("join request unreadable", "from", s.Conn().RemotePeer(), "err", err, "unreported_since_last", n)
		}
		_ = s.Reset()
		return
	}
	req, err := decodeJoinRequest(data)
	if err == nil {
		if p, _ := PeerOf(req.Member); p != s.Conn().RemotePeer() {
			err = fmt.Errorf("member %s does not run on the requesting peer %s", req.Member, s.Conn().RemotePeer())
		}
	}
	if err != nil {
		if ok, n := a.joinWarn.allow(time.Now()); ok {
			a.log.Warn("join request refused", "from", s.Conn().RemotePeer(), "err", err, "unreported_since_last", n)
		}
		_ = writeMessage(s, encodeJoinReply(nil, "bad join request: "+err.Error()))
		return
	}
	call := joinCall{req: req, reply: make(chan []byte, 1)}
	select {
	case a.joins <- call:
	case <-a.stopped:
		return
	}
	select {
	case out := <-call.reply:
		if err := writeMessage(s, out); err != nil {
			a.log.Warn("join reply not sent", "to", req.Member, "err", err)
		}
	case <-a.stopped:
	}
}
