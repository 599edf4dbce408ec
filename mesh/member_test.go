package mesh

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	pb "github.com/libp2p/go-libp2p-pubsub/pb"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/sketchmesh/sketchmesh/node"
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

func TestAnnouncementValidator(t *testing.T) {
	good := node.EncodeAnnouncement(node.Announcement{Kind: node.KindHello, Member: MemberID(fixedPeer(1), 7), Seq: 1, Signer: MemberID(fixedPeer(1), 7)})
	for _, c := range []struct {
		name string
		data []byte
		want pubsub.ValidationResult
	}{
		{"hello", good, pubsub.ValidationAccept},
		{"garbage", []byte{0x93, 1}, pubsub.ValidationReject},
		{"truncated", good[:len(good)-1], pubsub.ValidationReject},
	} {
		m := &pubsub.Message{Message: &pb.Message{From: []byte(fixedPeer(2)), Data: c.data}}
		if got := validateAnnouncement(context.Background(), fixedPeer(2), m); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
