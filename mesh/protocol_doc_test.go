package mesh

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/sketchmesh/sketchmesh/node"
)

// docs/protocol.md names every protocol id, the topic and the limits a
// peer written in another language must keep to, with the values the code
// uses.
func TestProtocolDocMatchesCode(t *testing.T) {
	doc, err := os.ReadFile("../docs/protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	thousands := func(n int) string {
		s := fmt.Sprint(n)
		for i := len(s) - 3; i > 0; i -= 3 {
			s = s[:i] + "," + s[i:]
		}
		return s
	}
	// What SignedBytes puts before the two 4-byte lengths, the clock and
	// the digest of empty strings and an empty frame.
	signed := node.SignedBytes("", "", 0, nil)
	domain := string(signed[:len(signed)-4-4-8-32])
	for _, want := range []string{
		string(UpdateProtocol), string(JoinProtocol), TopicName("<mesh>"),
		thousands(node.MaxAnnouncementBytes+1024) + " bytes", // the GossipSub message cap
		fmt.Sprintf("%d MiB", node.MaxEnvelopeBytes>>20),
		fmt.Sprintf("%d MiB", node.MaxSyncBytes>>20),
		fmt.Sprintf("%d KiB", maxJoinRequestBytes>>10),
		fmt.Sprintf("%d GiB", MaxJoinReplyBytes>>30),
		fmt.Sprintf("at most %d addresses of %d bytes", maxAddrs, maxAddrBytes),
		`"` + strings.ReplaceAll(domain, "\n", `\n`) + `"`, fmt.Sprintf("%d bytes, ASCII", len(domain)),
		"agent version `sketchmesh/<version>`",
	} {
		if !strings.Contains(string(doc), want) {
			t.Errorf("docs/protocol.md does not say %s", want)
		}
	}
	for _, r := range node.RejectReasons() {
		if !strings.Contains(string(doc), "`"+string(r)+"`") {
			t.Errorf("docs/protocol.md does not name the rejection reason %s", r)
		}
	}
}
