package mesh

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/libp2p/go-libp2p/core/peer"
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

// Limits on the member records of the join exchange.
const (
	maxAddrs       = 32
	maxAddrBytes   = 512
	maxMemberBytes = 256
)
