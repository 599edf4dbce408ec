package node

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/sketchmesh/sketchmesh/wire"
)

// Membership announcements.
//
// Who is a member is decided by signed announcements that enter the core
// through Receive, like updates, and leave it through Ready:
//
//   - hello: a member's heartbeat (its clock, its recent round time in
//     milliticks, its addresses, its site), signed by the member, with a sequence
//     number that grows with each hello of its incarnation. A member that
//     joined carries its admission (the admitting member's signature over
//     member id and entry), so a node that missed the admit learns it from
//     any hello; a hello of an id the node does not know and that carries
//     no valid admission changes nothing.
//   - admit: a member's word that it admitted a joiner at an entry clock,
//     signed by that member, with the joiner's own signature asking that
//     member to admit it (JoinSignedBytes), so no member can make up an
//     incarnation of another's peer. It counts only when the signer is a
//     current member of the receiving node (one that left counts for
//     entries up to its last clock), and at most MaxSilentAdmits members a
//     signer's admits brought in may stay unheard-of.
//   - leave: a member's notice that it stops after its update Clock, signed
//     by the member, sent to every live member directly (and broadcast);
//     each answers with
//   - ack: the receiver's signed acknowledgement of a leave, sent to the
//     leaver, which resends its notice to whoever has not acknowledged.
//
// Member ids may carry an incarnation ("peer/7"): a node restarted or a
// join retried is a new incarnation of the same peer. A higher incarnation
// supersedes a lower one (which is declared dead), never the reverse:
// announcements about an incarnation below the highest known for its peer
// are refused as stale.
//
// In a mesh without an Authenticator, announcements carry no signature and
// are taken at their word, as updates are.
//
// # Wire format
//
//	[3, "member", kind uint, member str, entry uint, clock uint, seq uint,
//	 round uint, addrs [str...], site str, signer str, sig bin,
//	 cert_signer str, cert_sig bin, join_sig bin]
//
// It starts with the bytes 0x9f 0x03, which is how IsAnnouncement tells it
// from an envelope (0x92 0x01), a sync request (0x96 0x02) or a gone notice (0x94 0x02). The signature
// covers AnnouncementSignedBytes; an admit's covers only the kind, member,
// entry and signer, which is what lets a hello carry it as a certificate.

// AnnounceKind is the kind of a membership announcement.
type AnnounceKind uint8

// Announcement kinds.
const (
	KindHello AnnounceKind = 1 + iota
	KindAdmit
	KindLeave
	KindLeaveAck
)

func (k AnnounceKind) String() string {
	switch k {
	case KindHello:
		return "hello"
	case KindAdmit:
		return "admit"
	case KindLeave:
		return "leave"
	case KindLeaveAck:
		return "ack"
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Announcement is one membership message.
type Announcement struct {
	Kind AnnounceKind
	// Member is whom the announcement is about: the sender of a hello or a
	// leave, the joiner of an admit, the leaver of an ack.
	Member string
	// Entry is Member's entry clock: it has no updates at or below it.
	Entry uint64
	// Clock is the member's clock (hello), its last update (leave and ack).
	Clock uint64
	// Seq orders the hellos of one incarnation.
	Seq uint64
	// Round is the sender's recent time per iteration in thousandths of a
	// tick; receivers adapt their failure timeouts to the slowest member.
	Round uint64
	// Addrs are where the member listens (opaque to the core).
	Addrs []string
	// Site is a hello's site label, from the member's measured round-trip
	// times (halton.SiteLabel); empty when it has none. The overlay groups
	// members by the labels they announce (Config.Overlay), so all members
	// derive the same overlay from the same hellos.
	Site string
	// Signer made Sig: Member itself, the admitting member (admit) or the
	// acknowledging member (ack).
	Signer string
	Sig    []byte
	// CertSigner and CertSig are a hello's admission: CertSigner's admit
	// signature of (Member, Entry). Empty for a founding member.
	CertSigner string
	CertSig    []byte
	// JoinSig is, in an admit, the joiner's signature of JoinSignedBytes
	// (its request to be admitted by the signer's peer).
	JoinSig []byte
}

const (
	announceTag    = "member"
	announceKind   = 3
	announceFields = 15
	// MaxAnnouncementBytes bounds an announcement on the wire.
	MaxAnnouncementBytes = 16 << 10
	// MaxMemberIDBytes bounds a member id.
	MaxMemberIDBytes = 256
	maxAnnounceAddrs = 32
	maxAddrBytes     = 512
	// maxRound is an hour at 100 ms ticks, in milliticks.
	maxRound = 36_000_000
)

// Rejection reasons of the membership protocol, in Stats.Rejected.
const (
	// RejectBadAnnouncement: an announcement that does not parse.
	RejectBadAnnouncement RejectReason = "bad_announcement"
	// RejectForgedAnnouncement: a signature that is missing or does not
	// verify, or an admit whose signer is not a current member.
	RejectForgedAnnouncement RejectReason = "forged_announcement"
	// RejectStaleIncarnation: an announcement about an incarnation below
	// the highest known for its peer.
	RejectStaleIncarnation RejectReason = "stale_incarnation"
	// RejectStaleHello: a hello whose sequence number is not above the last
	// one seen of its member (a delayed or replayed hello).
	RejectStaleHello RejectReason = "stale_hello"
	// RejectNotAdmitted: a hello of an id that is not a member and carries
	// no valid admission, or an announcement about a non-member.
	RejectNotAdmitted RejectReason = "not_admitted"
	// RejectReadmit: an admit of a member known at another entry; one
	// incarnation has one entry.
	RejectReadmit RejectReason = "readmit"
	// RejectAdmitLimit: an admit by a member that already has
	// MaxSilentAdmits admitted members nobody has heard from.
	RejectAdmitLimit RejectReason = "admit_limit"
)

// MaxSilentAdmits bounds the members one member's admits may bring in that
// are never heard from: a member that admits made-up joiners (it can make
// keys for any number) makes everyone wait for each only until it is
// suspected, and for no more than this many over its incarnation.
const MaxSilentAdmits = 4

// ErrBadAnnouncement is wrapped by every announcement decoding error.
var ErrBadAnnouncement = errors.New("bad announcement")

// IsAnnouncement reports whether data is an announcement rather than an
// envelope or a sync request. It looks at the first two bytes only.
func IsAnnouncement(data []byte) bool {
	return len(data) >= 2 && data[0] == 0x90|announceFields && data[1] == announceKind
}

// EncodeAnnouncement writes a in the wire format above.
func EncodeAnnouncement(a Announcement) []byte {
	w := wire.NewWriter()
	w.Array(announceFields)
	w.Uint(announceKind)
	w.String(announceTag)
	writeSigned(w, a)
	w.Bin(a.Sig)
	w.String(a.CertSigner)
	w.Bin(a.CertSig)
	w.Bin(a.JoinSig)
	return w.Bytes()
}

// DecodeAnnouncement parses and checks an announcement: its kind is known,
// its ids are well formed, its fields are consistent with its kind. It
// does not verify signatures (the core does, with its Authenticator).
// Every length is checked before anything is allocated.
func DecodeAnnouncement(data []byte) (Announcement, error) {
	a, err := decodeAnnouncement(data)
	if err != nil {
		return Announcement{}, fmt.Errorf("%w: %w", ErrBadAnnouncement, err)
	}
	return a, nil
}

func decodeAnnouncement(data []byte) (Announcement, error) {
	var a Announcement
	if len(data) > MaxAnnouncementBytes {
		return a, fmt.Errorf("%d bytes exceeds the %d-byte limit", len(data), MaxAnnouncementBytes)
	}
	r := wire.NewReader(data)
	if err := r.Fields("announcement", announceFields); err != nil {
		return a, err
	}
	v, err := r.Uint("version")
	if err != nil {
		return a, err
	}
	if v != announceKind {
		return a, fmt.Errorf("message kind %d, want %d", v, announceKind)
	}
	tag, err := r.String("tag", len(announceTag))
	if err != nil {
		return a, err
	}
	if tag != announceTag {
		return a, fmt.Errorf("tag %q, want %q", tag, announceTag)
	}
	k, err := r.Uint("kind")
	if err != nil {
		return a, err
	}
	a.Kind = AnnounceKind(k)
	if k < uint64(KindHello) || k > uint64(KindLeaveAck) {
		return a, fmt.Errorf("unknown kind %d", k)
	}
	if a.Member, err = r.String("member", MaxMemberIDBytes); err != nil {
		return a, err
	}
	if a.Entry, err = r.Uint("entry"); err != nil {
		return a, err
	}
	if a.Clock, err = r.Uint("clock"); err != nil {
		return a, err
	}
	if a.Seq, err = r.Uint("seq"); err != nil {
		return a, err
	}
	if a.Round, err = r.Uint("round"); err != nil {
		return a, err
	}
	if a.Addrs, err = r.Strings("addrs", maxAnnounceAddrs, maxAddrBytes); err != nil {
		return a, err
	}
	if a.Site, err = r.String("site", MaxSiteBytes); err != nil {
		return a, err
	}
	if a.Signer, err = r.String("signer", MaxMemberIDBytes); err != nil {
		return a, err
	}
	if a.Sig, err = r.Bytes("sig", MaxSignatureBytes); err != nil {
		return a, err
	}
	if a.CertSigner, err = r.String("cert signer", MaxMemberIDBytes); err != nil {
		return a, err
	}
	if a.CertSig, err = r.Bytes("cert sig", MaxSignatureBytes); err != nil {
		return a, err
	}
	if a.JoinSig, err = r.Bytes("join sig", MaxSignatureBytes); err != nil {
		return a, err
	}
	if err := r.End(); err != nil {
		return a, err
	}
	return a, a.check()
}

// check enforces what each kind may carry.
func (a Announcement) check() error {
	for _, id := range []string{a.Member, a.Signer} {
		if err := CheckMemberID(id); err != nil {
			return err
		}
	}
	if a.CertSigner != "" {
		if err := CheckMemberID(a.CertSigner); err != nil {
			return fmt.Errorf("cert signer: %w", err)
		}
	}
	if a.Round > maxRound {
		return fmt.Errorf("round of %d milliticks is over an hour", a.Round)
	}
	if err := CheckSite(a.Site); err != nil {
		return err
	}
	if a.Kind != KindHello && a.Site != "" {
		return fmt.Errorf("a %s carries no site", a.Kind)
	}
	switch a.Kind {
	case KindHello, KindLeave:
		if a.Signer != a.Member {
			return fmt.Errorf("a %s signed by %s about %s", a.Kind, a.Signer, a.Member)
		}
		if a.Clock < a.Entry {
			return fmt.Errorf("clock %d is below the entry %d", a.Clock, a.Entry)
		}
	case KindAdmit:
		if a.Signer == a.Member {
			return errors.New("a member cannot admit itself")
		}
		if a.Clock != 0 || a.Seq != 0 || a.Round != 0 || len(a.Addrs) != 0 || a.CertSigner != "" {
			return errors.New("an admit carries only member, entry and signer")
		}
	case KindLeaveAck:
		if a.Signer == a.Member {
			return errors.New("a member cannot acknowledge its own leave")
		}
	}
	if a.Kind != KindHello && (a.CertSigner != "" || len(a.CertSig) != 0) {
		return fmt.Errorf("a %s carries no admission", a.Kind)
	}
	if a.Kind != KindAdmit && len(a.JoinSig) != 0 {
		return fmt.Errorf("a %s carries no join signature", a.Kind)
	}
	if a.CertSigner == "" && len(a.CertSig) != 0 {
		return errors.New("an admission signature without its signer")
	}
	return nil
}

// MaxSiteBytes bounds a site label.
const MaxSiteBytes = MaxMemberIDBytes

// CheckSite checks the form of a site label: empty, or at most
// MaxSiteBytes printable bytes.
func CheckSite(site string) error {
	if len(site) > MaxSiteBytes {
		return fmt.Errorf("site label of %d bytes exceeds %d", len(site), MaxSiteBytes)
	}
	for i := 0; i < len(site); i++ {
		if c := site[i]; c <= ' ' || c >= 0x7f {
			return fmt.Errorf("site label %q has a byte 0x%02x", site, c)
		}
	}
	return nil
}

// CheckMemberID checks the form of a member id: non-empty, at most
// MaxMemberIDBytes, printable, and either a bare name or name "/" a
// canonical decimal incarnation.
func CheckMemberID(id string) error {
	if id == "" {
		return errors.New("empty member id")
	}
	if len(id) > MaxMemberIDBytes {
		return fmt.Errorf("member id of %d bytes exceeds %d", len(id), MaxMemberIDBytes)
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c <= ' ' || c >= 0x7f {
			return fmt.Errorf("member id %q has a byte 0x%02x", id, c)
		}
	}
	name, inc, has := strings.Cut(id, "/")
	if name == "" {
		return fmt.Errorf("member id %q has an empty name", id)
	}
	if has {
		v, err := strconv.ParseUint(inc, 10, 64)
		if err != nil || strconv.FormatUint(v, 10) != inc {
			return fmt.Errorf("member id %q: incarnation %q is not a canonical decimal number", id, inc)
		}
	}
	return nil
}

// SplitMember returns the peer name and the incarnation of a member id
// ("peer/7" → "peer", 7); a bare id is incarnation 0.
func SplitMember(id string) (name string, incarnation uint64) {
	name, inc, has := strings.Cut(id, "/")
	if has {
		incarnation, _ = strconv.ParseUint(inc, 10, 64)
	}
	return name, incarnation
}

// AnnouncementSignedBytes returns what an announcement's signature covers
// (before the Authenticator adds its domain and mesh name): the kind and,
// for an admit, the member, entry and signer; for every other kind all
// fields but the signatures and the admission.
func AnnouncementSignedBytes(a Announcement) []byte {
	w := wire.NewWriter()
	if a.Kind == KindAdmit {
		w.Array(4)
		w.Uint(uint64(a.Kind))
		w.String(a.Member)
		w.Uint(a.Entry)
		w.String(a.Signer)
		return w.Bytes()
	}
	w.Array(9)
	writeSigned(w, a)
	return w.Bytes()
}

// writeSigned writes the fields a signature covers, in wire order: kind,
// member, entry, clock, seq, round, addrs, site, signer.
func writeSigned(w *wire.Writer, a Announcement) {
	w.Uint(uint64(a.Kind))
	w.String(a.Member)
	w.Uint(a.Entry)
	w.Uint(a.Clock)
	w.Uint(a.Seq)
	w.Uint(a.Round)
	w.Strings(a.Addrs)
	w.String(a.Site)
	w.String(a.Signer)
}

// Admission is a joiner's certificate: the admitting member's signature
// over (joiner, entry), as its admit announcement carries it, and the
// joiner's request. A joiner puts it in every hello (Config.Admission).
type Admission struct {
	Member string
	Entry  uint64
	Signer string
	Sig    []byte
	// JoinSig is the joiner's signature of JoinSignedBytes(Member, the
	// signer's peer name).
	JoinSig []byte
}

// admitOf is the admit announcement an admission stands for.
func (c Admission) admitOf() Announcement {
	return Announcement{Kind: KindAdmit, Member: c.Member, Entry: c.Entry, Signer: c.Signer, Sig: c.Sig, JoinSig: c.JoinSig}
}

// JoinSignedBytes returns what a joiner signs to ask the member on peer
// donor to admit it as member: bound to the donor, so the request cannot
// be replayed to another member for a second entry.
func JoinSignedBytes(member, donor string) []byte {
	w := wire.NewWriter()
	w.Array(3)
	w.String("join")
	w.String(member)
	w.String(donor)
	return w.Bytes()
}
