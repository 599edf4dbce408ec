package node

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/sketchmesh/sketchmesh/codec"
)

// Signed updates.
//
// In a mesh with an Authenticator every update carries its origin's
// signature over (mesh name, origin, clock, SHA-256 of the frame). A node
// signs its own update when it makes it and verifies every other update
// before it decodes the frame; relays forward the signature byte for byte
// with the frame. A relay can therefore drop an update but not alter it,
// move it to another clock or mesh, or forge one in another member's name:
// any of these fails verification and is counted as RejectBadSignature.
//
// An authenticated update whose content is then refused (a frame the codec
// rejects, values that are not finite, a norm above the bound) is the
// origin's own word for that clock, and the origin cannot send another:
// the node counts it as rejected, applies nothing of it, and marks the
// origin's clock as heard, so that a faulty or malicious member cannot stall
// the staleness gate of everyone else by sending poison. It still forwards
// the update along the overlay, unchanged, so that nodes behind it are not
// left waiting either; each of them checks it again and refuses it too.
// Without an Authenticator nothing proves who made an update, so a refused
// one is simply dropped (a forger must not be able to censor the real one).
//
// Whether content is refused can depend on the node's history (the norm
// bound is relative to the updates it accepted), and a joiner has none. So
// a node remembers which updates above its rows it refused, a snapshot
// carries the mark with their frames (Snapshot.Refused), and a node started
// from it treats a marked update as refused: heard, relayed, not applied
// (RejectMarkedRefused), so that no member applies what its donor refused.

// Authenticator signs a node's own updates and verifies other members'.
// The key of a member id is the driver's business (package mesh derives it
// from the libp2p peer id); the node only asks. Implementations used by one
// node are called from one goroutine.
type Authenticator interface {
	// Sign returns origin's signature of its update of clock with frame.
	Sign(origin string, clock uint64, frame []byte) ([]byte, error)
	// Verify returns nil when sig is origin's valid signature of its
	// update of clock with frame, and an error naming the cause otherwise.
	Verify(origin string, clock uint64, frame, sig []byte) error
	// SignMessage returns this node's signature of a membership message
	// (the bytes AnnouncementSignedBytes gives), under MessageBytes.
	SignMessage(msg []byte) ([]byte, error)
	// VerifyMessage returns nil when sig is signer's valid signature of
	// msg, and an error naming the cause otherwise.
	VerifyMessage(signer string, msg, sig []byte) error
}

// messageDomain separates membership signatures from update signatures.
const messageDomain = "sketchmesh membership signature v1\n"

// MessageBytes returns the bytes a membership signature covers: a domain
// string of its own (so no update signature can pass for one, or the
// reverse), the mesh name with a 4-byte big-endian length, and msg.
func MessageBytes(mesh string, msg []byte) []byte {
	b := make([]byte, 0, len(messageDomain)+4+len(mesh)+len(msg))
	b = append(b, messageDomain...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(mesh)))
	b = append(b, mesh...)
	return append(b, msg...)
}

// RejectBadSignature counts updates whose signature is missing or does not
// verify, in a mesh with an Authenticator.
const RejectBadSignature RejectReason = "bad_signature"

// ErrBadSignature is wrapped by Authenticator implementations' verification
// errors.
var ErrBadSignature = errors.New("bad signature")

// signedDomain separates update signatures from anything else a member's
// key might sign.
const signedDomain = "sketchmesh update signature v1\n"

// SignedBytes returns the bytes an update's signature covers: a domain
// string, the mesh name and the origin (each with a 4-byte big-endian
// length), the clock as 8 bytes big-endian, and the SHA-256 of the frame.
// Every Authenticator signs exactly these bytes, so implementations agree
// byte for byte.
func SignedBytes(mesh, origin string, clock uint64, frame []byte) []byte {
	digest := sha256.Sum256(frame)
	b := make([]byte, 0, len(signedDomain)+4+len(mesh)+4+len(origin)+8+len(digest))
	b = append(b, signedDomain...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(mesh)))
	b = append(b, mesh...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(origin)))
	b = append(b, origin...)
	b = binary.BigEndian.AppendUint64(b, clock)
	return append(b, digest[:]...)
}

// verify checks u's signature when the mesh is signed; it returns the
// rejection reason or "".
func (n *Node) verify(u Update) RejectReason {
	a := n.cfg.Auth
	if a == nil {
		return ""
	}
	if len(u.Sig) == 0 || a.Verify(u.Origin, u.Clock, u.Frame, u.Sig) != nil {
		return RejectBadSignature
	}
	return ""
}

// sendOwn signs the node's own update of clock t (in a signed mesh), feeds
// its norm to the screen, and queues it for the next hops. A signing error
// is returned: the update is then in the node's own view but was sent to
// nobody, and the driver must stop.
func (n *Node) sendOwn(t uint64, frame []byte, decoded codec.Sparse) error {
	n.proto.lastSpoke, n.proto.spoken = n.proto.tick, true
	u := Update{Origin: n.cfg.ID, Clock: t, Frame: frame}
	if n.cfg.Auth != nil {
		sig, err := n.cfg.Auth.Sign(n.cfg.ID, t, frame)
		if err != nil {
			return fmt.Errorf("node %s: sign update %d: %w", n.cfg.ID, t, err)
		}
		u.Sig = sig
	}
	n.screen().own(decoded, len(n.committed))
	n.lastOwn = &keptUpdate{origin: u.Origin, clock: u.Clock, frame: u.Frame, sig: u.Sig}
	if c := n.cfg.DecodeCache; c != nil {
		if k := c.kept(u); k != nil {
			n.lastOwn = k
		}
	}
	n.route(n.vc.slot(n.cfg.ID), n.lastOwn)
	return nil
}

// skip marks an authenticated but refused update as heard, and forwards it
// unchanged (see the package notes above on signed updates).
func (n *Node) skip(u Update) {
	if n.cfg.Auth == nil || !n.vc.Add(u.Origin, u.Clock) {
		return
	}
	n.markRefused(UpdateID{Origin: u.Origin, Clock: u.Clock})
	n.route(n.vc.slot(u.Origin), n.keep(u).keptUpdate)
}

// RejectMarkedRefused counts updates a node's starting snapshot marked as
// refused by its donor (Snapshot.Refused): they are heard and relayed, and
// nothing of them is applied.
const RejectMarkedRefused RejectReason = "marked_refused"

// markRefused remembers that update id was refused, for the snapshots this
// node gives (see Node.Snapshot). Only updates above the committed rows
// travel in a snapshot's Pending, so marks at or below them are dropped.
func (n *Node) markRefused(id UpdateID) {
	for r := range n.refused {
		if r.Clock <= n.committedClock {
			delete(n.refused, r)
		}
	}
	if id.Clock <= n.committedClock {
		return
	}
	if n.refused == nil {
		n.refused = map[UpdateID]bool{}
	}
	n.refused[id] = true
}

// Refused reports whether the node refused update id (or was told by its
// donor that it was refused) and the update is above the committed rows.
func (n *Node) Refused(id UpdateID) bool { return n.refused[id] }
