package mesh

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	pb "github.com/libp2p/go-libp2p-pubsub/pb"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/sketchmesh/sketchmesh/wire"
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

// part is one msgpack value of an encoding, named as the decoder's error
// must name it when the value is wrong.
type part struct {
	name string
	data []byte
}

func partOf(name string, write func(w *wire.Writer)) part {
	w := wire.NewWriter()
	write(w)
	return part{name, slices.Clone(w.Bytes())}
}

func stringsParts(name string, v []string) []part {
	ps := []part{partOf(name, func(w *wire.Writer) { w.Array(len(v)) })}
	for i, s := range v {
		ps = append(ps, partOf(fmt.Sprintf("%s[%d]", name, i), func(w *wire.Writer) { w.String(s) }))
	}
	return ps
}

func joinParts(ps []part) []byte {
	var out []byte
	for _, p := range ps {
		out = append(out, p.data...)
	}
	return out
}

// replaced returns the encoding of ps with part i's bytes replaced.
func replaced(ps []part, i int, with []byte) []byte {
	return append(append(joinParts(ps[:i]), with...), joinParts(ps[i+1:])...)
}

// set returns the encoding of ps with the part called name written anew.
func set(ps []part, name string, write func(w *wire.Writer)) []byte {
	for i, p := range ps {
		if p.name == name {
			return replaced(ps, i, partOf(name, write).data)
		}
	}
	panic("no part " + name)
}

// mutant is an encoding with one part made wrong, and what the decoder's
// error must say about it.
type mutant struct {
	name, want string
	data       []byte
}

// wrongParts makes each part wrong in turn: of the wrong type, nil, or
// missing (the input ends before it). The error must name the part, but
// for a missing one, where an enclosing array's claim may be what fails.
func wrongParts(ps []part) []mutant {
	var out []mutant
	for i, p := range ps {
		wrongType := []byte{0xc3} // true, which no part but a bool is
		if p.data[0] == 0xc2 || p.data[0] == 0xc3 {
			wrongType = []byte{0xa1, 'x'}
		}
		out = append(out,
			mutant{p.name + " of the wrong type", p.name, replaced(ps, i, wrongType)},
			mutant{p.name + " nil", p.name, replaced(ps, i, []byte{0xc0})},
			mutant{p.name + " missing", "", joinParts(ps[:i])})
	}
	return out
}

// valueLen is the length of the msgpack value data starts with, an array
// counting as its header alone. It knows what wire.Writer writes.
func valueLen(data []byte) int {
	switch c := data[0]; {
	case c <= 0x7f || c >= 0xe0 || c == 0xc0 || c == 0xc2 || c == 0xc3 || (c >= 0x90 && c <= 0x9f):
		return 1
	case c >= 0xa0 && c <= 0xbf:
		return 1 + int(c&0x1f)
	case c == 0xcc || c == 0xd0:
		return 2
	case c == 0xcd || c == 0xd1 || c == 0xdc:
		return 3
	case c == 0xce || c == 0xd2 || c == 0xca || c == 0xdd:
		return 5
	case c == 0xcf || c == 0xd3 || c == 0xcb:
		return 9
	case c == 0xd9 || c == 0xc4:
		return 2 + int(data[1])
	case c == 0xda || c == 0xc5:
		return 3 + int(binary.BigEndian.Uint16(data[1:]))
	case c == 0xdb || c == 0xc6:
		return 5 + int(binary.BigEndian.Uint32(data[1:]))
	}
	panic(fmt.Sprintf("msgpack code %#x", data[0]))
}

// headerLen is the length of the array, str or bin header a value starts
// with, and whether it is an array's; 0 for any other value.
func headerLen(c byte) (n int, array bool) {
	switch {
	case c >= 0x90 && c <= 0x9f:
		return 1, true
	case c == 0xdc:
		return 3, true
	case c == 0xdd:
		return 5, true
	case c >= 0xa0 && c <= 0xbf:
		return 1, false
	case c == 0xd9 || c == 0xc4:
		return 2, false
	case c == 0xda || c == 0xc5:
		return 3, false
	case c == 0xdb || c == 0xc6:
		return 5, false
	}
	return 0, false
}

// hostileHeaders walks a valid encoding and replaces each length-carrying
// header in turn with one that claims 0xffffffff elements or bytes (and,
// for an array, with a map32 header), keeping what followed it.
func hostileHeaders(data []byte) []mutant {
	var out []mutant
	for at := 0; at < len(data); at += valueLen(data[at:]) {
		n, array := headerLen(data[at])
		if n == 0 {
			continue
		}
		heads := map[string][]byte{"str32": {0xdb, 0xff, 0xff, 0xff, 0xff}, "bin32": {0xc6, 0xff, 0xff, 0xff, 0xff}}
		if array {
			heads = map[string][]byte{"array32": {0xdd, 0xff, 0xff, 0xff, 0xff}, "map32": {0xdf, 0xff, 0xff, 0xff, 0xff}}
		}
		for h, head := range heads {
			want := "claims"
			if h == "map32" {
				want = "invalid code"
			}
			bad := append(append(slices.Clone(data[:at]), head...), data[at+n:]...)
			out = append(out, mutant{fmt.Sprintf("%s at byte %d", h, at), want, bad})
		}
	}
	return out
}

// allocated returns the bytes f allocates, the least of three runs so that
// an allocation elsewhere in the process does not count against f.
func allocated(f func()) uint64 {
	best := uint64(math.MaxUint64)
	for range 3 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		f()
		runtime.ReadMemStats(&after)
		best = min(best, after.TotalAlloc-before.TotalAlloc)
	}
	return best
}

// allocLimit is what decoding n bytes may allocate.
func allocLimit(n int) uint64 { return uint64(64*n + 64<<10) }

// checkRefused runs decode on each mutant: it must fail with sentinel, say
// what the mutant wants, and allocate little.
func checkRefused(t *testing.T, ms []mutant, sentinel error, decode func([]byte) error) {
	t.Helper()
	for _, m := range ms {
		err := decode(m.data)
		if err == nil {
			t.Errorf("%s: accepted", m.name)
			continue
		}
		if !errors.Is(err, sentinel) || !strings.Contains(err.Error(), m.want) {
			t.Errorf("%s: error %q, want %v saying %q", m.name, err, sentinel, m.want)
		}
		if a := allocated(func() { _ = decode(m.data) }); a > allocLimit(len(m.data)) {
			t.Errorf("%s: refusing %d bytes allocated %d", m.name, len(m.data), a)
		}
	}
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

func announcementParts(a Announcement) []part {
	ps := []part{
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
	if !bytes.Equal(joinParts(ps), EncodeAnnouncement(a)) {
		t.Fatal("the parts do not add up to the encoding")
	}
	p := fixedPeer(1)
	ms := append(wrongParts(ps),
		mutant{"six fields", "announcement has 6 fields, want 7", replaced(ps, 0, []byte{0x96})},
		mutant{"eight fields", "announcement has 8 fields, want 7", append(replaced(ps, 0, []byte{0x98}), 0x01)},
		mutant{"version 2", "version 2, want 1", set(ps, "version", func(w *wire.Writer) { w.Uint(2) })},
		mutant{"version 0", "version 0, want 1", set(ps, "version", func(w *wire.Writer) { w.Uint(0) })},
		mutant{"negative version", "version is negative", set(ps, "version", func(w *wire.Writer) { w.Int(-1) })},
		mutant{"unknown kind", `unknown kind "join"`, set(ps, "kind", func(w *wire.Writer) { w.String("join") })},
		mutant{"empty kind", `unknown kind ""`, set(ps, "kind", func(w *wire.Writer) { w.String("") })},
		mutant{"long kind", "kind claims 17 bytes", set(ps, "kind", func(w *wire.Writer) { w.String(strings.Repeat("h", 17)) })},
		mutant{"member not a peer id", `member id "node-00"`, set(ps, "member", func(w *wire.Writer) { w.String("node-00") })},
		mutant{"member as a CID", "not in its canonical form", set(ps, "member", func(w *wire.Writer) { w.String(peer.ToCid(p).String() + "/2") })},
		mutant{"member incarnation padded", "not a canonical decimal", set(ps, "member", func(w *wire.Writer) { w.String(p.String() + "/02") })},
		mutant{"long member", "member claims 257 bytes", set(ps, "member", func(w *wire.Writer) { w.String(strings.Repeat("m", 257)) })},
		mutant{"negative entry", "entry is negative", set(ps, "entry", func(w *wire.Writer) { w.Int(-5) })},
		mutant{"clock below entry", "clock 9 is below the entry 10", set(ps, "clock", func(w *wire.Writer) { w.Uint(9) })},
		mutant{"round over an hour", "over an hour", set(ps, "round", func(w *wire.Writer) { w.Uint(uint64(time.Hour/time.Microsecond) + 1) })},
		mutant{"round a float", "round", set(ps, "round", func(w *wire.Writer) { w.Float(1) })},
		mutant{"too many addrs", "addrs has 33 entries, limit 32", set(ps, "addrs", func(w *wire.Writer) { w.Strings(make([]string, 33)) })},
		mutant{"long addr", "addrs[1] claims 513 bytes", set(ps, "addrs[1]", func(w *wire.Writer) { w.String(strings.Repeat("a", 513)) })},
		mutant{"trailing byte", "1 trailing bytes", append(EncodeAnnouncement(a), 0xc0)},
		mutant{"over 16 KiB", "exceeds the 16384-byte limit", append(EncodeAnnouncement(a), make([]byte, 16<<10)...)},
	)
	checkRefused(t, ms, ErrBadAnnouncement, decodeAnnouncementErr)
	for _, a := range testAnnouncements() {
		data := EncodeAnnouncement(a)
		checkRefused(t, hostileHeaders(data), ErrBadAnnouncement, decodeAnnouncementErr)
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
	for _, m := range hostileHeaders(EncodeAnnouncement(testAnnouncements()[0])) {
		f.Add(m.data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		a, err := DecodeAnnouncement(data)
		runtime.ReadMemStats(&after)
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > allocLimit(len(data)) {
			t.Fatalf("decoding %d bytes allocated %d", len(data), alloc)
		}
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
