package mesh

import (
	"bytes"
	"errors"
	"io"
	"math"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/sketchmesh/sketchmesh/model"
	"github.com/sketchmesh/sketchmesh/node"
	"github.com/sketchmesh/sketchmesh/wire"
	"github.com/sketchmesh/sketchmesh/wire/wiretest"
)

func testJoinSettings() node.Settings {
	return node.Settings{
		Model: model.Softmax, MaxFeature: 123, Classes: []float64{0, 1, 2}, L2: 1e-4,
		Optimizer: model.SGD, LearningRate: 0.5, Staleness: 2, Codec: "raw",
		ErrorFeedback: true, Factors: node.FactorsAlways, Iterations: 100,
	}
}

func testJoinRequest() JoinRequest {
	return JoinRequest{
		Mesh:     "mesh-a",
		Member:   MemberID(fixedPeer(3), 1),
		Settings: testJoinSettings(),
		Explicit: []string{node.SettingModel, node.SettingLearningRate},
		Addrs:    []string{"/ip4/127.0.0.1/tcp/4003", "/ip4/192.168.1.3/udp/4003/quic-v1"},
		Sig:      bytes.Repeat([]byte{7}, 64),
	}
}

func testJoinReply() *JoinReply {
	a, b := MemberID(fixedPeer(1), 0), MemberID(fixedPeer(2), 5)
	return &JoinReply{
		Settings: testJoinSettings(),
		Members: []PeerRecord{
			{Member: a, Addrs: []string{"/ip4/127.0.0.1/tcp/4001"}},
			{Member: b, Addrs: []string{}},
		},
		Snapshot: &node.Snapshot{
			Clock: 9,
			View:  []float64{0.5, -1, 0, 3},
			Members: []node.MemberEntry{
				{ID: a, Live: true, High: 9},
				{ID: b, Live: true, High: 7, Ahead: []uint64{9}},
			},
			Pending: []node.Update{{Origin: b, Clock: 10, Frame: []byte{1, 2}, Sig: bytes.Repeat([]byte{5}, 64)}},
		},
		Admission: node.Admission{Member: MemberID(fixedPeer(3), 2), Entry: 9, Signer: a, Sig: bytes.Repeat([]byte{6}, 64), JoinSig: bytes.Repeat([]byte{8}, 64)},
	}
}

func encodeSnapshot(s *node.Snapshot) []byte {
	w := wire.NewWriter()
	s.WriteTo(w)
	return w.Bytes()
}

func TestJoinRequestRoundTrip(t *testing.T) {
	q := testJoinRequest()
	data := encodeJoinRequest(q)
	got, err := decodeJoinRequest(data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, q) {
		t.Fatalf("read %+v, want %+v", got, q)
	}
	if !bytes.Equal(encodeJoinRequest(got), data) {
		t.Fatal("the request re-encodes differently")
	}
	// A bare peer id is a member id; empty lists read back empty.
	q = JoinRequest{Member: fixedPeer(4).String()}
	got, err = decodeJoinRequest(encodeJoinRequest(q))
	if err != nil {
		t.Fatal(err)
	}
	if got.Member != q.Member || got.Mesh != "" || len(got.Explicit) != 0 || len(got.Addrs) != 0 || !reflect.DeepEqual(got.Settings, node.Settings{}) {
		t.Fatalf("read %+v", got)
	}
}

func TestJoinReplyRoundTrip(t *testing.T) {
	p := testJoinReply()
	data := encodeJoinReply(p, "")
	got, err := decodeJoinReply(data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Settings, p.Settings) || !reflect.DeepEqual(got.Members, p.Members) {
		t.Fatalf("read %+v and %+v, want %+v and %+v", got.Settings, got.Members, p.Settings, p.Members)
	}
	s := got.Snapshot
	if s.Clock != 9 || len(s.View) != 4 || s.View[1] != -1 || len(s.Members) != 2 || s.Members[1].ID != p.Members[1].Member ||
		s.Members[1].High != 7 || len(s.Members[1].Ahead) != 1 || s.Members[1].Ahead[0] != 9 ||
		len(s.Pending) != 1 || s.Pending[0].Clock != 10 || !bytes.Equal(s.Pending[0].Frame, []byte{1, 2}) || len(s.Pending[0].Sig) != 64 {
		t.Fatalf("snapshot read as %+v", s)
	}
	if !bytes.Equal(encodeJoinReply(got, ""), data) {
		t.Fatal("the reply re-encodes differently")
	}

	for _, reason := range []string{"setting lr differs: this node was given 0.1, the mesh trains with 0.5", "x", strings.Repeat("r", 4096)} {
		got, err := decodeJoinReply(encodeJoinReply(nil, reason))
		if got != nil || !errors.Is(err, ErrRefused) || err.Error() != ErrRefused.Error()+": "+reason {
			t.Fatalf("refusal read as %v, %v", got, err)
		}
		if errors.Is(err, wire.ErrMalformed) {
			t.Fatalf("a well-formed refusal reads as malformed: %v", err)
		}
	}
}

func joinRequestParts(q JoinRequest) []wiretest.Part {
	w := wire.NewWriter()
	q.Settings.WriteTo(w)
	ps := []wiretest.Part{
		partOf("join request", func(w *wire.Writer) { w.Array(8) }),
		partOf("version", func(w *wire.Writer) { w.Uint(joinVersion) }),
		partOf("kind", func(w *wire.Writer) { w.String("join") }),
		partOf("mesh", func(w *wire.Writer) { w.String(q.Mesh) }),
		partOf("member", func(w *wire.Writer) { w.String(q.Member) }),
		{Name: "settings", Data: w.Bytes()},
	}
	ps = append(ps, stringsParts("explicit settings", q.Explicit)...)
	ps = append(ps, stringsParts("addrs", q.Addrs)...)
	return append(ps, partOf("signature", func(w *wire.Writer) { w.Bin(q.Sig) }))
}

func welcomeParts(p *JoinReply) []wiretest.Part {
	w := wire.NewWriter()
	p.Settings.WriteTo(w)
	ps := []wiretest.Part{
		partOf("join reply", func(w *wire.Writer) { w.Array(6) }),
		partOf("version", func(w *wire.Writer) { w.Uint(joinVersion) }),
		partOf("kind", func(w *wire.Writer) { w.String("welcome") }),
		{Name: "settings", Data: w.Bytes()},
		partOf("members", func(w *wire.Writer) { w.Array(len(p.Members)) }),
	}
	for _, m := range p.Members {
		ps = append(ps,
			partOf("member", func(w *wire.Writer) { w.Array(2) }),
			partOf("member", func(w *wire.Writer) { w.String(m.Member) }))
		ps = append(ps, stringsParts("addrs", m.Addrs)...)
	}
	a := p.Admission
	return append(ps, wiretest.Part{Name: "snapshot", Data: encodeSnapshot(p.Snapshot)},
		partOf("admission", func(w *wire.Writer) { w.Array(5) }),
		partOf("admitted member", func(w *wire.Writer) { w.String(a.Member) }),
		partOf("admission entry", func(w *wire.Writer) { w.Uint(a.Entry) }),
		partOf("admission signer", func(w *wire.Writer) { w.String(a.Signer) }),
		partOf("admission signature", func(w *wire.Writer) { w.Bin(a.Sig) }),
		partOf("join signature", func(w *wire.Writer) { w.Bin(a.JoinSig) }))
}

func refusalParts(reason string) []wiretest.Part {
	return []wiretest.Part{
		partOf("join reply", func(w *wire.Writer) { w.Array(3) }),
		partOf("version", func(w *wire.Writer) { w.Uint(joinVersion) }),
		partOf("kind", func(w *wire.Writer) { w.String("refused") }),
		partOf("reason", func(w *wire.Writer) { w.String(reason) }),
	}
}

func decodeJoinRequestErr(data []byte) error { _, err := decodeJoinRequest(data); return err }

// decodeJoinReplyErr returns the reply's error, but for a refusal, which
// is a reply well formed.
func decodeJoinReplyErr(data []byte) error {
	_, err := decodeJoinReply(data)
	if errors.Is(err, ErrRefused) {
		return nil
	}
	return err
}

func TestJoinRequestWrongFields(t *testing.T) {
	q := testJoinRequest()
	ps := joinRequestParts(q)
	if !bytes.Equal(wiretest.Join(ps), encodeJoinRequest(q)) {
		t.Fatal("the parts do not add up to the encoding")
	}
	p := fixedPeer(3)
	ms := append(wiretest.WrongParts(ps), []wiretest.Mutant{
		{Name: "seven fields", Want: "join request has 7 fields, want 8", Data: wiretest.Replaced(ps, 0, []byte{0x97})},
		{Name: "nine fields", Want: "join request has 9 fields, want 8", Data: append(wiretest.Replaced(ps, 0, []byte{0x99}), 0x90)},
		{Name: "long signature", Want: "signature claims 1025 bytes", Data: set(ps, "signature", func(w *wire.Writer) { w.Bin(make([]byte, 1025)) })},
		{Name: "version 1", Want: "version 1, want 3", Data: set(ps, "version", func(w *wire.Writer) { w.Uint(1) })},
		{Name: "negative version", Want: "version is negative", Data: set(ps, "version", func(w *wire.Writer) { w.Int(-1) })},
		{Name: "kind welcome", Want: `kind "welcome", want "join"`, Data: set(ps, "kind", func(w *wire.Writer) { w.String("welcome") })},
		{Name: "long kind", Want: "kind claims 17 bytes", Data: set(ps, "kind", func(w *wire.Writer) { w.String(strings.Repeat("j", 17)) })},
		{Name: "long mesh", Want: "mesh claims 257 bytes", Data: set(ps, "mesh", func(w *wire.Writer) { w.String(strings.Repeat("m", 257)) })},
		{Name: "member not a peer id", Want: `member id "node-00"`, Data: set(ps, "member", func(w *wire.Writer) { w.String("node-00") })},
		{Name: "member as a CID", Want: "not in its canonical form", Data: set(ps, "member", func(w *wire.Writer) { w.String(peer.ToCid(p).String() + "/1") })},
		{Name: "member incarnation not a number", Want: "not a canonical decimal", Data: set(ps, "member", func(w *wire.Writer) { w.String(p.String() + "/one") })},
		{Name: "long member", Want: "member claims 257 bytes", Data: set(ps, "member", func(w *wire.Writer) { w.String(strings.Repeat("m", 257)) })},
		{Name: "settings l2 NaN", Want: "l2 is NaN", Data: set(ps, "settings", func(w *wire.Writer) {
			s := q.Settings
			s.L2 = math.NaN()
			s.WriteTo(w)
		})},
		{Name: "settings with ten fields", Want: "settings have 10 fields", Data: set(ps, "settings", func(w *wire.Writer) {
			q.Settings.WriteTo(w)
			w.Bytes()[0] = 0x9a
		})},
		{Name: "too many explicit settings", Want: "explicit settings has 33 entries, limit 32", Data: set(ps, "explicit settings", func(w *wire.Writer) { w.Strings(make([]string, 33)) })},
		{Name: "long explicit setting", Want: "explicit settings[1] claims 33 bytes", Data: set(ps, "explicit settings[1]", func(w *wire.Writer) { w.String(strings.Repeat("s", 33)) })},
		{Name: "too many addrs", Want: "addrs has 33 entries, limit 32", Data: set(ps, "addrs", func(w *wire.Writer) { w.Strings(make([]string, 33)) })},
		{Name: "long addr", Want: "addrs[0] claims 513 bytes", Data: set(ps, "addrs[0]", func(w *wire.Writer) { w.String(strings.Repeat("a", 513)) })},
		{Name: "trailing byte", Want: "1 trailing bytes", Data: append(encodeJoinRequest(q), 0x00)},
	}...)
	wiretest.CheckRefused(t, ms, wire.ErrMalformed, decodeJoinRequestErr)
	data := encodeJoinRequest(q)
	wiretest.CheckRefused(t, wiretest.HostileHeaders(data), wire.ErrMalformed, decodeJoinRequestErr)
	for i := range data {
		if err := decodeJoinRequestErr(data[:i]); err == nil {
			t.Errorf("a %d-byte prefix accepted", i)
		}
	}
}

func TestJoinReplyWrongFields(t *testing.T) {
	p := testJoinReply()
	ps := welcomeParts(p)
	if !bytes.Equal(wiretest.Join(ps), encodeJoinReply(p, "")) {
		t.Fatal("the parts do not add up to the encoding")
	}
	ms := append(wiretest.WrongParts(ps), []wiretest.Mutant{
		{Name: "five fields", Want: "join reply has 5 fields, want 3 or 6", Data: wiretest.Replaced(ps, 0, []byte{0x95})},
		{Name: "seven fields", Want: "join reply has 7 fields, want 3 or 6", Data: append(wiretest.Replaced(ps, 0, []byte{0x97}), 0x00)},
		{Name: "version 0", Want: "version 0, want 3", Data: set(ps, "version", func(w *wire.Writer) { w.Uint(0) })},
		{Name: "admission at another clock", Want: "admission at entry 8, the snapshot is at 9", Data: set(ps, "admission entry", func(w *wire.Writer) { w.Uint(8) })},
		{Name: "long admission signature", Want: "admission signature claims 1025 bytes", Data: set(ps, "admission signature", func(w *wire.Writer) { w.Bin(make([]byte, 1025)) })},
		{Name: "kind refused in a welcome", Want: `kind "refused", want "welcome"`, Data: set(ps, "kind", func(w *wire.Writer) { w.String("refused") })},
		{Name: "settings NaN", Want: "learning rate is NaN", Data: set(ps, "settings", func(w *wire.Writer) {
			s := p.Settings
			s.LearningRate = math.NaN()
			s.WriteTo(w)
		})},
		{Name: "member with three fields", Want: "member has 3 fields, want 2", Data: wiretest.Replaced(ps, 5, []byte{0x93})},
		{Name: "member not a peer id", Want: `member id "node-01"`, Data: wiretest.Replaced(ps, 6, partOf("", func(w *wire.Writer) { w.String("node-01") }).Data)},
		{Name: "member as a CID", Want: "not in its canonical form", Data: wiretest.Replaced(ps, 6, partOf("", func(w *wire.Writer) { w.String(peer.ToCid(fixedPeer(1)).String()) }).Data)},
		{Name: "member too many addrs", Want: "addrs has 33 entries, limit 32", Data: wiretest.Replaced(ps, 7, partOf("", func(w *wire.Writer) { w.Strings(make([]string, 33)) }).Data)},
		{Name: "snapshot clock negative", Want: "snapshot clock is negative", Data: set(ps, "snapshot", func(w *wire.Writer) {
			w.Array(6)
			w.Uint(2) // snapshot version
			w.Int(-1)
			w.Floats(nil)
			w.Array(0)
			w.Bin(node.EncodeEnvelope(nil))
			w.Array(0)
		})},
		{Name: "snapshot view NaN", Want: "snapshot view[0] is NaN", Data: set(ps, "snapshot", func(w *wire.Writer) {
			s := *p.Snapshot
			s.View = []float64{math.NaN()}
			s.WriteTo(w)
		})},
		{Name: "trailing byte", Want: "1 trailing bytes", Data: append(encodeJoinReply(p, ""), 0x00)},
	}...)
	wiretest.CheckRefused(t, ms, wire.ErrMalformed, decodeJoinReplyErr)
	data := encodeJoinReply(p, "")
	wiretest.CheckRefused(t, wiretest.HostileHeaders(data), wire.ErrMalformed, decodeJoinReplyErr)
	for i := range data {
		if err := decodeJoinReplyErr(data[:i]); err == nil {
			t.Errorf("a %d-byte prefix accepted", i)
		}
	}

	// A refusal's fields, wrong in turn.
	rs := refusalParts("no")
	if !bytes.Equal(wiretest.Join(rs), encodeJoinReply(nil, "no")) {
		t.Fatal("the refusal's parts do not add up to its encoding")
	}
	ms = append(wiretest.WrongParts(rs), []wiretest.Mutant{
		{Name: "version 1", Want: "version 1, want 3", Data: set(rs, "version", func(w *wire.Writer) { w.Uint(1) })},
		{Name: "kind welcome in a refusal", Want: `kind "welcome", want "refused"`, Data: set(rs, "kind", func(w *wire.Writer) { w.String("welcome") })},
		{Name: "long reason", Want: "reason claims 4097 bytes", Data: set(rs, "reason", func(w *wire.Writer) { w.String(strings.Repeat("r", 4097)) })},
		{Name: "trailing byte", Want: "1 trailing bytes", Data: append(encodeJoinReply(nil, "no"), 0x00)},
	}...)
	wiretest.CheckRefused(t, ms, wire.ErrMalformed, decodeJoinReplyErr)
	data = encodeJoinReply(nil, "no")
	wiretest.CheckRefused(t, wiretest.HostileHeaders(data), wire.ErrMalformed, decodeJoinReplyErr)
	for i := range data {
		if err := decodeJoinReplyErr(data[:i]); err == nil {
			t.Errorf("a %d-byte refusal prefix accepted", i)
		}
	}
}

// A member list over the limit is refused when its header is read.
func TestJoinReplyOverLimits(t *testing.T) {
	w := wire.NewWriter()
	w.Array(6)
	w.Uint(joinVersion)
	w.String("welcome")
	testJoinSettings().WriteTo(w)
	w.Array(node.MaxMembers + 1)
	data := append(w.Bytes(), make([]byte, 3*(node.MaxMembers+1))...)
	_, err := decodeJoinReply(data)
	if !errors.Is(err, wire.ErrMalformed) || !strings.Contains(err.Error(), "65537 members, limit 65536") {
		t.Fatalf("error %v, want the member limit", err)
	}
	if a := wiretest.Allocated(func() { _, _ = decodeJoinReply(data) }); a > 64<<10 {
		t.Fatalf("refusing the member list allocated %d bytes", a)
	}
}

func TestReadLimited(t *testing.T) {
	var buf bytes.Buffer
	msg := bytes.Repeat([]byte{0x5a}, 200<<10)
	for _, m := range [][]byte{msg, {}, {1}} {
		if err := writeMessage(&buf, m); err != nil {
			t.Fatal(err)
		}
	}
	// Read a byte at a time, so the buffer grows as the bytes arrive.
	r := iotest.OneByteReader(&buf)
	for _, want := range [][]byte{msg, {}, {1}} {
		got, err := readLimited(r, len(msg))
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("read %d bytes, %v; want %d", len(got), err, len(want))
		}
	}
	if _, err := readLimited(r, 10); err != io.EOF {
		t.Fatalf("read at the end: %v, want io.EOF", err)
	}

	for name, c := range map[string]struct {
		data  []byte
		limit int
		want  error
	}{
		"over the limit":   {[]byte{0, 0, 0, 11}, 10, errTooLarge},
		"huge claim":       {[]byte{0xff, 0xff, 0xff, 0xff}, MaxJoinReplyBytes, errTooLarge},
		"truncated header": {[]byte{0, 0}, 10, io.ErrUnexpectedEOF},
		"truncated body":   {[]byte{0, 0, 0, 5, 1, 2}, 10, io.ErrUnexpectedEOF},
		// A reply may be a GiB long: one that claims so and sends a few
		// bytes must not cost a GiB.
		"claims a GiB, sends 8 bytes": {append([]byte{0x40, 0, 0, 0}, make([]byte, 8)...), MaxJoinReplyBytes, io.ErrUnexpectedEOF},
	} {
		_, err := readLimited(bytes.NewReader(c.data), c.limit)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: error %v, want %v", name, err, c.want)
		}
		if a := wiretest.Allocated(func() { _, _ = readLimited(bytes.NewReader(c.data), c.limit) }); a > 2*wiretest.AllocLimit(0) {
			t.Errorf("%s: allocated %d bytes", name, a)
		}
	}
}

func FuzzDecodeJoinRequest(f *testing.F) {
	f.Add(encodeJoinRequest(testJoinRequest()))
	f.Add(encodeJoinRequest(JoinRequest{Member: fixedPeer(4).String()}))
	for _, m := range wiretest.HostileHeaders(encodeJoinRequest(testJoinRequest())) {
		f.Add(m.Data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		q, err := wiretest.DecodeOnce(t, len(data), func() (JoinRequest, error) { return decodeJoinRequest(data) })
		if err != nil {
			if !errors.Is(err, wire.ErrMalformed) {
				t.Fatalf("error %v does not wrap wire.ErrMalformed", err)
			}
			return
		}
		if err := checkMember(q.Member); err != nil {
			t.Fatalf("member %q accepted: %v", q.Member, err)
		}
		if len(q.Explicit) > 32 || len(q.Addrs) > maxAddrs {
			t.Fatalf("%d explicit settings and %d addresses accepted", len(q.Explicit), len(q.Addrs))
		}
		enc := encodeJoinRequest(q)
		again, err := decodeJoinRequest(enc)
		if err != nil {
			t.Fatalf("re-encoded request does not decode: %v", err)
		}
		if !reflect.DeepEqual(again, q) || !bytes.Equal(encodeJoinRequest(again), enc) {
			t.Fatalf("request changed in a round trip: %+v, then %+v", q, again)
		}
	})
}

func FuzzDecodeJoinReply(f *testing.F) {
	f.Add(encodeJoinReply(testJoinReply(), ""))
	f.Add(encodeJoinReply(&JoinReply{Snapshot: &node.Snapshot{}}, ""))
	f.Add(encodeJoinReply(testJoinReply(), ""))
	f.Add(encodeJoinReply(nil, "setting lr differs"))
	for _, m := range wiretest.HostileHeaders(encodeJoinReply(testJoinReply(), "")) {
		f.Add(m.Data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := wiretest.DecodeOnce(t, len(data), func() (*JoinReply, error) { return decodeJoinReply(data) })
		if errors.Is(err, ErrRefused) {
			if p != nil || errors.Is(err, wire.ErrMalformed) {
				t.Fatalf("refusal read as %v, %v", p, err)
			}
			reason := strings.TrimPrefix(err.Error(), ErrRefused.Error()+": ")
			if reason == "" {
				// The encoder writes a welcome for an empty reason.
				return
			}
			if _, again := decodeJoinReply(encodeJoinReply(nil, reason)); again == nil || again.Error() != err.Error() {
				t.Fatalf("refusal changed in a round trip: %v, then %v", err, again)
			}
			return
		}
		if err != nil {
			if !errors.Is(err, wire.ErrMalformed) && !errors.Is(err, node.ErrBadEnvelope) {
				t.Fatalf("error %v wraps neither wire.ErrMalformed nor node.ErrBadEnvelope", err)
			}
			return
		}
		if len(p.Members) > node.MaxMembers || p.Snapshot == nil {
			t.Fatalf("reply accepted with %d members, snapshot %v", len(p.Members), p.Snapshot)
		}
		for _, m := range p.Members {
			if err := checkMember(m.Member); err != nil {
				t.Fatalf("member %q accepted: %v", m.Member, err)
			}
		}
		enc := encodeJoinReply(p, "")
		again, err := decodeJoinReply(enc)
		if err != nil {
			t.Fatalf("re-encoded reply does not decode: %v", err)
		}
		if !reflect.DeepEqual(again.Settings, p.Settings) || !reflect.DeepEqual(again.Members, p.Members) || !bytes.Equal(encodeJoinReply(again, ""), enc) {
			t.Fatalf("reply changed in a round trip: %+v, then %+v", p, again)
		}
	})
}
