package mesh

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	pb "github.com/libp2p/go-libp2p-pubsub/pb"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/sketchmesh/sketchmesh/wire"
	"github.com/sketchmesh/sketchmesh/wire/wiretest"
)

// fixedPeer returns the peer id of an Ed25519 key made from seed.
func fixedPeer(seed byte) peer.ID {
	key, _, err := crypto.GenerateEd25519Key(bytes.NewReader(bytes.Repeat([]byte{seed}, 64)))
	if err != nil {
		panic(err)
	}
	id, err := peer.IDFromPrivateKey(key)
	if err != nil {
		panic(err)
	}
	return id
}

// partOf is the part called name that write writes.
func partOf(name string, write func(w *wire.Writer)) wiretest.Part {
	w := wire.NewWriter()
	write(w)
	return wiretest.Part{Name: name, Data: slices.Clone(w.Bytes())}
}

func stringsParts(name string, v []string) []wiretest.Part {
	ps := []wiretest.Part{partOf(name, func(w *wire.Writer) { w.Array(len(v)) })}
	for i, s := range v {
		ps = append(ps, partOf(fmt.Sprintf("%s[%d]", name, i), func(w *wire.Writer) { w.String(s) }))
	}
	return ps
}

// set returns the encoding of ps with the part called name written anew.
func set(ps []wiretest.Part, name string, write func(w *wire.Writer)) []byte {
	return wiretest.Set(ps, name, partOf(name, write).Data)
}

func TestMemberIDs(t *testing.T) {
	p := fixedPeer(1)
	id := MemberID(p, 3)
	if id != p.String()+"/3" {
		t.Fatalf("MemberID = %q", id)
	}
	for _, m := range []string{id, p.String(), MemberID(p, 0), MemberID(p, math.MaxUint64)} {
		if got, err := PeerOf(m); err != nil || got != p {
			t.Errorf("PeerOf(%q) = %s, %v", m, got, err)
		}
		if err := checkMember(m); err != nil {
			t.Errorf("checkMember(%q): %v", m, err)
		}
	}
	if _, err := PeerOf("node-00"); err == nil || !strings.Contains(err.Error(), `"node-00"`) {
		t.Errorf("PeerOf(node-00) = %v", err)
	}
	// Other spellings of a member id name it a second time: refused.
	for _, m := range []string{
		"node-00", "", "/3", p.String() + "/", p.String() + "/03", p.String() + "/+3", p.String() + "/x",
		p.String() + "/3/4", p.String() + "/18446744073709551616", peer.ToCid(p).String(), peer.ToCid(p).String() + "/3",
	} {
		if err := checkMember(m); err == nil || !strings.Contains(err.Error(), "member") {
			t.Errorf("checkMember(%q) = %v", m, err)
		}
	}
}

func testAnnouncements() []Announcement {
	p, q := fixedPeer(1), fixedPeer(2)
	return []Announcement{
		{Kind: AnnounceHello, Member: MemberID(p, 2), Entry: 10, Clock: 17, Round: 1500 * time.Microsecond,
			Addrs: []string{"/ip4/127.0.0.1/tcp/4001", "/ip6/::1/udp/4001/quic-v1"}},
		{Kind: AnnounceAdmit, Member: MemberID(q, 0), Entry: 40, Clock: 40, Addrs: []string{"/ip4/10.0.0.2/tcp/9000"}},
		{Kind: AnnounceLeave, Member: p.String(), Entry: 0, Clock: math.MaxUint64, Round: time.Hour, Addrs: []string{}},
	}
}

func TestAnnouncementRoundTrip(t *testing.T) {
	for _, a := range testAnnouncements() {
		data := EncodeAnnouncement(a)
		got, err := DecodeAnnouncement(data)
		if err != nil {
			t.Fatalf("%s: %v", a.Kind, err)
		}
		if !reflect.DeepEqual(got, a) {
			t.Fatalf("%s: read %+v, want %+v", a.Kind, got, a)
		}
		if !bytes.Equal(EncodeAnnouncement(got), data) {
			t.Fatalf("%s: the announcement re-encodes differently", a.Kind)
		}
	}
	// A round is carried in whole microseconds, and a negative one as 0.
	a := testAnnouncements()[0]
	a.Round = 1500*time.Microsecond + 999
	if got, err := DecodeAnnouncement(EncodeAnnouncement(a)); err != nil || got.Round != 1500*time.Microsecond {
		t.Fatalf("round read as %v, %v", got.Round, err)
	}
	a.Round = -time.Second
	if got, err := DecodeAnnouncement(EncodeAnnouncement(a)); err != nil || got.Round != 0 {
		t.Fatalf("negative round read as %v, %v", got.Round, err)
	}
	a.Addrs = nil
	if got, err := DecodeAnnouncement(EncodeAnnouncement(a)); err != nil || len(got.Addrs) != 0 {
		t.Fatalf("no addresses read as %q, %v", got.Addrs, err)
	}
}

func announcementParts(a Announcement) []wiretest.Part {
	ps := []wiretest.Part{
		partOf("announcement", func(w *wire.Writer) { w.Array(7) }),
		partOf("version", func(w *wire.Writer) { w.Uint(announceVersion) }),
		partOf("kind", func(w *wire.Writer) { w.String(a.Kind) }),
		partOf("member", func(w *wire.Writer) { w.String(a.Member) }),
		partOf("entry", func(w *wire.Writer) { w.Uint(a.Entry) }),
		partOf("clock", func(w *wire.Writer) { w.Uint(a.Clock) }),
		partOf("round", func(w *wire.Writer) { w.Uint(uint64(a.Round / time.Microsecond)) }),
	}
	return append(ps, stringsParts("addrs", a.Addrs)...)
}

func decodeAnnouncementErr(data []byte) error { _, err := DecodeAnnouncement(data); return err }

func TestAnnouncementWrongFields(t *testing.T) {
	a := testAnnouncements()[0]
	ps := announcementParts(a)
	if !bytes.Equal(wiretest.Join(ps), EncodeAnnouncement(a)) {
		t.Fatal("the parts do not add up to the encoding")
	}
	p := fixedPeer(1)
	ms := append(wiretest.WrongParts(ps), []wiretest.Mutant{
		{Name: "six fields", Want: "announcement has 6 fields, want 7", Data: wiretest.Replaced(ps, 0, []byte{0x96})},
		{Name: "eight fields", Want: "announcement has 8 fields, want 7", Data: append(wiretest.Replaced(ps, 0, []byte{0x98}), 0x01)},
		{Name: "version 2", Want: "version 2, want 1", Data: set(ps, "version", func(w *wire.Writer) { w.Uint(2) })},
		{Name: "version 0", Want: "version 0, want 1", Data: set(ps, "version", func(w *wire.Writer) { w.Uint(0) })},
		{Name: "negative version", Want: "version is negative", Data: set(ps, "version", func(w *wire.Writer) { w.Int(-1) })},
		{Name: "unknown kind", Want: `unknown kind "join"`, Data: set(ps, "kind", func(w *wire.Writer) { w.String("join") })},
		{Name: "empty kind", Want: `unknown kind ""`, Data: set(ps, "kind", func(w *wire.Writer) { w.String("") })},
		{Name: "long kind", Want: "kind claims 17 bytes", Data: set(ps, "kind", func(w *wire.Writer) { w.String(strings.Repeat("h", 17)) })},
		{Name: "member not a peer id", Want: `member id "node-00"`, Data: set(ps, "member", func(w *wire.Writer) { w.String("node-00") })},
		{Name: "member as a CID", Want: "not in its canonical form", Data: set(ps, "member", func(w *wire.Writer) { w.String(peer.ToCid(p).String() + "/2") })},
		{Name: "member incarnation padded", Want: "not a canonical decimal", Data: set(ps, "member", func(w *wire.Writer) { w.String(p.String() + "/02") })},
		{Name: "long member", Want: "member claims 257 bytes", Data: set(ps, "member", func(w *wire.Writer) { w.String(strings.Repeat("m", 257)) })},
		{Name: "negative entry", Want: "entry is negative", Data: set(ps, "entry", func(w *wire.Writer) { w.Int(-5) })},
		{Name: "clock below entry", Want: "clock 9 is below the entry 10", Data: set(ps, "clock", func(w *wire.Writer) { w.Uint(9) })},
		{Name: "round over an hour", Want: "over an hour", Data: set(ps, "round", func(w *wire.Writer) { w.Uint(uint64(time.Hour/time.Microsecond) + 1) })},
		{Name: "round a float", Want: "round", Data: set(ps, "round", func(w *wire.Writer) { w.Float(1) })},
		{Name: "too many addrs", Want: "addrs has 33 entries, limit 32", Data: set(ps, "addrs", func(w *wire.Writer) { w.Strings(make([]string, 33)) })},
		{Name: "long addr", Want: "addrs[1] claims 513 bytes", Data: set(ps, "addrs[1]", func(w *wire.Writer) { w.String(strings.Repeat("a", 513)) })},
		{Name: "trailing byte", Want: "1 trailing bytes", Data: append(EncodeAnnouncement(a), 0xc0)},
		{Name: "over 16 KiB", Want: "exceeds the 16384-byte limit", Data: append(EncodeAnnouncement(a), make([]byte, 16<<10)...)},
	}...)
	wiretest.CheckRefused(t, ms, ErrBadAnnouncement, decodeAnnouncementErr)
	for _, a := range testAnnouncements() {
		data := EncodeAnnouncement(a)
		wiretest.CheckRefused(t, wiretest.HostileHeaders(data), ErrBadAnnouncement, decodeAnnouncementErr)
		for i := range data {
			if _, err := DecodeAnnouncement(data[:i]); err == nil {
				t.Errorf("%s: a %d-byte prefix accepted", a.Kind, i)
			}
		}
	}
	// The checks that read the msgpack also wrap wire.ErrMalformed.
	if err := decodeAnnouncementErr([]byte{0xdd, 0xff, 0xff, 0xff, 0xff}); !errors.Is(err, wire.ErrMalformed) {
		t.Errorf("array32 claim: %v", err)
	}
}

func FuzzDecodeAnnouncement(f *testing.F) {
	for _, a := range testAnnouncements() {
		f.Add(EncodeAnnouncement(a))
	}
	for _, m := range wiretest.HostileHeaders(EncodeAnnouncement(testAnnouncements()[0])) {
		f.Add(m.Data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		a, err := wiretest.DecodeOnce(t, len(data), func() (Announcement, error) { return DecodeAnnouncement(data) })
		if err != nil {
			if !errors.Is(err, ErrBadAnnouncement) {
				t.Fatalf("error %v does not wrap ErrBadAnnouncement", err)
			}
			return
		}
		switch a.Kind {
		case AnnounceHello, AnnounceAdmit, AnnounceLeave:
		default:
			t.Fatalf("kind %q accepted", a.Kind)
		}
		if err := checkMember(a.Member); err != nil {
			t.Fatalf("member %q accepted: %v", a.Member, err)
		}
		if a.Clock < a.Entry || a.Round < 0 || a.Round > time.Hour || len(a.Addrs) > maxAddrs {
			t.Fatalf("out of bounds announcement accepted: %+v", a)
		}
		enc := EncodeAnnouncement(a)
		again, err := DecodeAnnouncement(enc)
		if err != nil {
			t.Fatalf("re-encoded announcement does not decode: %v", err)
		}
		if !reflect.DeepEqual(again, a) || !bytes.Equal(EncodeAnnouncement(again), enc) {
			t.Fatalf("announcement changed in a round trip: %+v, then %+v", a, again)
		}
	})
}

// The membership validator rejects what is malformed or spoken for someone
// else, and ignores a hello older than one already seen.
func TestAnnouncementValidator(t *testing.T) {
	self, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := peer.IDFromPrivateKey(self)
	other, _, _ := crypto.GenerateEd25519Key(nil)
	q, _ := peer.IDFromPrivateKey(other)
	member := MemberID(p, 7)
	msg := func(from peer.ID, a Announcement) *pubsub.Message {
		f := []byte(from)
		return &pubsub.Message{Message: &pb.Message{From: f, Data: EncodeAnnouncement(a)}}
	}
	var f freshness
	cases := []struct {
		name string
		m    *pubsub.Message
		want pubsub.ValidationResult
	}{
		{"hello", msg(p, Announcement{Kind: AnnounceHello, Member: member, Clock: 5}), pubsub.ValidationAccept},
		{"older hello", msg(p, Announcement{Kind: AnnounceHello, Member: member, Clock: 4}), pubsub.ValidationIgnore},
		{"same hello", msg(p, Announcement{Kind: AnnounceHello, Member: member, Clock: 5}), pubsub.ValidationAccept},
		{"hello for another peer", msg(q, Announcement{Kind: AnnounceHello, Member: member, Clock: 9}), pubsub.ValidationReject},
		{"leave", msg(p, Announcement{Kind: AnnounceLeave, Member: member, Clock: 6}), pubsub.ValidationAccept},
		{"admit by another member", msg(q, Announcement{Kind: AnnounceAdmit, Member: member}), pubsub.ValidationAccept},
		{"garbage", &pubsub.Message{Message: &pb.Message{From: []byte(p), Data: []byte{0x93, 1}}}, pubsub.ValidationReject},
	}
	for _, c := range cases {
		if got := f.validate(context.Background(), q, c.m); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
