package mesh

import (
	"bytes"
	"testing"

	"github.com/sketchmesh/sketchmesh/node"
)

// Announcements leave before the update traffic queued ahead of them, in
// their own order; only update traffic counts against the bound and is
// dropped for it.
func TestSendQueueAnnouncementsFirst(t *testing.T) {
	hello := func(seq uint64) []byte {
		return node.EncodeAnnouncement(node.Announcement{Kind: node.KindHello, Member: "m", Seq: seq})
	}
	update := func(i byte) []byte { return append(bytes.Repeat([]byte{0xdc}, 999), i) }
	var q sendQueue
	for i := range byte(3) {
		if n := q.push(update(i), 3000); n != 0 {
			t.Fatalf("update %d dropped %d", i, n)
		}
	}
	q.push(hello(1), 3000)
	q.push(hello(2), 3000)
	// A fourth update pushes the first out: 4,000 bytes over 3,000.
	if n := q.push(update(3), 3000); n != 1 {
		t.Fatalf("dropped %d for the bound, want 1", n)
	}
	var got [][]byte
	for {
		m, ok := q.pop()
		if !ok {
			break
		}
		got = append(got, m)
	}
	want := [][]byte{hello(1), hello(2), update(1), update(2), update(3)}
	if len(got) != len(want) {
		t.Fatalf("popped %d messages, want %d", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("message %d popped out of order", i)
		}
	}
	if !q.empty() || q.dataBytes != 0 {
		t.Fatalf("drained queue: empty %v, %d bytes", q.empty(), q.dataBytes)
	}
	for i := range uint64(maxUrgentQueued + 5) {
		q.push(hello(i), 3000)
	}
	if m, _ := q.pop(); !bytes.Equal(m, hello(5)) || len(q.urgent) != maxUrgentQueued-1 {
		t.Fatalf("past %d announcements the oldest go", maxUrgentQueued)
	}
}
