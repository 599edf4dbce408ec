package mesh

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/sketchmesh/sketchmesh/wire"
)

// MemberID names one run of a node: its libp2p peer id and an incarnation
// number. A node keeps its peer id across restarts (its key file), but each
// restart is a new member, so the clocks of its updates start afresh without
// colliding with what its previous run sent.
func MemberID(p peer.ID, incarnation uint64) string {
	return p.String() + "/" + strconv.FormatUint(incarnation, 10)
}

// PeerOf returns the peer id a member id runs on. A bare peer id (as the
// testnet uses) is its own member id.
func PeerOf(member string) (peer.ID, error) {
	p, _, err := MemberPeer(member)
	return p, err
}

// checkMember checks a member id read from the network: it must be written
// as MemberID writes one, a peer id in its canonical text form, then
// optionally "/" and a canonical decimal incarnation. A peer id has several
// text forms and an incarnation several spellings, so anything else would
// be a second name for one member, or a member id MemberPeer refuses.
func checkMember(member string) error {
	p, _, err := MemberPeer(member)
	if err != nil {
		return err
	}
	if id, _, _ := strings.Cut(member, "/"); id != p.String() {
		return fmt.Errorf("member id %q: the peer id is not in its canonical form %s", member, p)
	}
	return nil
}

// Announcement kinds on the membership topic.
const (
	// AnnounceHello is a member's heartbeat: it is alive, at this clock,
	// reachable at these addresses.
	AnnounceHello = "hello"
	// AnnounceAdmit is sent by the member that admitted a joiner, on its
	// behalf, so the mesh learns of it before the joiner's first hello.
	AnnounceAdmit = "admit"
	// AnnounceLeave is a member's notice that it stops after Clock.
	AnnounceLeave = "leave"
)

// Announcement is one message on a mesh's membership topic.
type Announcement struct {
	Kind   string
	Member string
	// Entry is the clock the member started at; its first update is
	// Entry+1.
	Entry uint64
	// Clock is the member's clock (for a leave, its last update).
	Clock uint64
	// Round is the member's recent time per iteration, which peers use to
	// adapt how long they wait before declaring it dead.
	Round time.Duration
	Addrs []string
}

const (
	announceVersion  = 1
	maxAnnounceBytes = 16 << 10
	maxAddrs         = 32
	maxAddrBytes     = 512
	maxMemberBytes   = 256
)

// ErrBadAnnouncement is wrapped by every announcement decoding error.
var ErrBadAnnouncement = errors.New("bad announcement")

// EncodeAnnouncement writes a as a msgpack array.
func EncodeAnnouncement(a Announcement) []byte {
	w := wire.NewWriter()
	w.Array(7)
	w.Uint(announceVersion)
	w.String(a.Kind)
	w.String(a.Member)
	w.Uint(a.Entry)
	w.Uint(a.Clock)
	w.Uint(uint64(max(a.Round, 0) / time.Microsecond))
	w.Strings(a.Addrs)
	return w.Bytes()
}

// DecodeAnnouncement parses and checks an announcement: its kind is known,
// its member id names a valid peer id, its clocks are ordered.
func DecodeAnnouncement(data []byte) (Announcement, error) {
	a, err := decodeAnnouncement(data)
	if err != nil {
		return Announcement{}, fmt.Errorf("%w: %w", ErrBadAnnouncement, err)
	}
	return a, nil
}

func decodeAnnouncement(data []byte) (Announcement, error) {
	var a Announcement
	if len(data) > maxAnnounceBytes {
		return a, fmt.Errorf("%d bytes exceeds the %d-byte limit", len(data), maxAnnounceBytes)
	}
	r := wire.NewReader(data)
	if err := r.Fields("announcement", 7); err != nil {
		return a, err
	}
	ver, err := r.Uint("version")
	if err != nil {
		return a, err
	}
	if ver != announceVersion {
		return a, fmt.Errorf("version %d, want %d", ver, announceVersion)
	}
	if a.Kind, err = r.String("kind", 16); err != nil {
		return a, err
	}
	switch a.Kind {
	case AnnounceHello, AnnounceAdmit, AnnounceLeave:
	default:
		return a, fmt.Errorf("unknown kind %q", a.Kind)
	}
	if a.Member, err = r.String("member", maxMemberBytes); err != nil {
		return a, err
	}
	if err := checkMember(a.Member); err != nil {
		return a, err
	}
	if a.Entry, err = r.Uint("entry"); err != nil {
		return a, err
	}
	if a.Clock, err = r.Uint("clock"); err != nil {
		return a, err
	}
	if a.Clock < a.Entry {
		return a, fmt.Errorf("clock %d is below the entry %d", a.Clock, a.Entry)
	}
	us, err := r.Uint("round")
	if err != nil {
		return a, err
	}
	if us > uint64(time.Hour/time.Microsecond) {
		return a, fmt.Errorf("round of %d µs is over an hour", us)
	}
	a.Round = time.Duration(us) * time.Microsecond
	if a.Addrs, err = r.Strings("addrs", maxAddrs, maxAddrBytes); err != nil {
		return a, err
	}
	return a, r.End()
}
