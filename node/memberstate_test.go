package node

import (
	"testing"
	"unsafe"
)

// Cores on one slot table share a member's card while they took the same
// hello, and a core that takes a newer one changes its own card only: the
// other cores still read the old hello's sequence, round and site, and the
// old card is dropped once no core holds it.
func TestSharedCardsCopiedOnChange(t *testing.T) {
	table := NewSlotTable(4)
	cl := newClusterWith(t, 3, 1, 5, "raw", 1, func(c *Config) { c.Slots = table })
	a, b := cl.nodes["node-00"], cl.nodes["node-01"]
	hello := func(seq, round uint64, site string) []byte {
		return EncodeAnnouncement(Announcement{Kind: KindHello, Member: "node-02", Signer: "node-02", Seq: seq, Round: round, Site: site})
	}
	card := func(n *Node) memberCard { return n.cardOf(n.info("node-02")) }

	first := hello(1, 4000, "eu")
	a.Receive("node-02", first)
	b.Receive("node-02", first)
	want := memberCard{seq: 1, round: 4000, site: "eu"}
	if card(a) != want || card(b) != want {
		t.Fatalf("after the first hello: %+v and %+v, want %+v", card(a), card(b), want)
	}
	if a.info("node-02").card&cardMask != b.info("node-02").card&cardMask {
		t.Fatal("two cores that took the same hello hold two cards")
	}
	old := a.info("node-02").card & cardMask

	a.Receive("node-02", hello(2, 9000, "us"))
	if got := (memberCard{seq: 2, round: 9000, site: "us"}); card(a) != got {
		t.Fatalf("the core that took the second hello reads %+v, want %+v", card(a), got)
	}
	if card(b) != want || b.info("node-02").card&cardMask != old {
		t.Fatalf("a change by one core reached another: it reads %+v, want %+v", card(b), want)
	}
	if a.siteOf("node-02") != "us" || b.siteOf("node-02") != "eu" {
		t.Fatalf("sites %q and %q, want us and eu", a.siteOf("node-02"), b.siteOf("node-02"))
	}
	// A hello older than the core's card is stale for it, not for a core
	// that has not taken the newer one.
	if r := a.step(Announcement{Kind: KindHello, Member: "node-02", Signer: "node-02", Seq: 1, Round: 4000, Site: "eu"}); r != RejectStaleHello {
		t.Fatalf("an older hello: %q, want %q", r, RejectStaleHello)
	}

	b.Receive("node-02", hello(2, 9000, "us"))
	if a.info("node-02").card&cardMask != b.info("node-02").card&cardMask {
		t.Fatal("the cores took the same second hello but hold two cards")
	}
	if _, ok := table.cards.index[want]; ok {
		t.Fatal("the first hello's card is kept after no core holds it")
	}
}

// The card table counts who holds a card: a card is found by content, kept
// while some record holds it, and its index reused once none does; the
// zero card is never stored.
func TestCardTable(t *testing.T) {
	var ct cardTable
	c1, c2 := memberCard{seq: 1, site: "x"}, memberCard{seq: 2}
	i := ct.swap(0, c1)
	j := ct.swap(0, c1)
	if i == 0 || i != j || ct.cards[i].refs != 2 {
		t.Fatalf("one card twice: %d and %d, %d refs", i, j, ct.cards[i].refs)
	}
	k := ct.swap(i, c2)
	if ct.card(k) != c2 || ct.card(j) != c1 || ct.cards[i].refs != 1 {
		t.Fatalf("after one holder moved: %+v and %+v, %d refs", ct.card(k), ct.card(j), ct.cards[i].refs)
	}
	if z := ct.swap(j, memberCard{}); z != 0 || ct.card(z) != (memberCard{}) {
		t.Fatalf("the zero card is %d", z)
	}
	if _, ok := ct.index[c1]; ok || len(ct.free) != 1 {
		t.Fatalf("a card no record holds is kept (%d free)", len(ct.free))
	}
	if r := ct.swap(0, memberCard{seq: 3}); r != i {
		t.Fatalf("a new card took index %d, not the free %d", r, i)
	}
}

// Cores that start on one slot table with the same members share the
// peers' incarnations; one that admits a newer incarnation copies them
// first, and the others still read the old.
func TestSharedPeersCopiedOnChange(t *testing.T) {
	table := NewSlotTable(4)
	cl := newClusterWith(t, 3, 1, 5, "raw", 1, func(c *Config) { c.Slots = table })
	a, b := cl.nodes["node-00"], cl.nodes["node-01"]
	if &a.proto.peers[0] != &b.proto.peers[0] || !a.proto.peersShared {
		t.Fatal("two cores that started alike keep two copies of the peers")
	}
	a.setPeerInc("node-02", 5)
	if inc, _ := a.peerInc("node-02"); inc != 5 {
		t.Fatalf("the core that changed it reads %d, want 5", inc)
	}
	if inc, ok := b.peerInc("node-02"); !ok || inc != 0 || &b.proto.peers[0] != &table.peers[0] {
		t.Fatalf("a change by one core reached another: %d, %v", inc, ok)
	}
}

// A member's record stays 24 bytes: a simulated core holds one per member.
func TestMemberStateSize(t *testing.T) {
	if size := unsafe.Sizeof(memberState{}); size != 24 {
		t.Fatalf("memberState is %d bytes, want 24", size)
	}
}

// The gate-holding marks keep 32 bits and read right across the wrap.
func TestGateMarksSerialArithmetic(t *testing.T) {
	for _, c := range []struct {
		tick  uint64
		since uint32
		want  uint64
	}{
		{10, 4, 6},
		{1<<32 + 3, 1<<32 - 2, 5},
		{7<<32 + 9, 9, 0},
	} {
		if got := ticksSince(c.tick, c.since); got != c.want {
			t.Errorf("ticksSince(%d, %d) = %d, want %d", c.tick, c.since, got, c.want)
		}
	}
	for _, c := range []struct {
		entry    uint64
		withheld uint32
		want     bool
	}{
		{5, 4, true},
		{4, 4, false},
		{3, 4, false},
		{1 << 32, 1<<32 - 1, true},
		{1<<32 - 1, 0, false}, // an entry withdrawn below the mark
		{3<<32 + 2, 1, true},
	} {
		if got := entryPast(c.entry, c.withheld); got != c.want {
			t.Errorf("entryPast(%d, %d) = %v, want %v", c.entry, c.withheld, got, c.want)
		}
	}
}

// The tick a member was last heard keeps 32 bits and reads right across
// the wrap; the record's flags and its card index do not disturb each
// other.
func TestMemberRecordPacking(t *testing.T) {
	const wrap = uint64(1) << 32
	for _, c := range []struct{ heard, now uint64 }{{0, 0}, {5, 9}, {wrap - 3, wrap + 4}, {7*wrap + 1, 7*wrap + 1}} {
		var i memberState
		i.hear(c.heard)
		if got := i.silentAt(c.now); got != c.now-c.heard {
			t.Fatalf("heard at %d, silent at %d: %d ticks, want %d", c.heard, c.now, got, c.now-c.heard)
		}
		if got := i.heardAt(c.now); got != c.heard {
			t.Fatalf("heard at %d, read at %d: %d", c.heard, c.now, got)
		}
		if !i.spoke() || i.tracked() || i.withholding() {
			t.Fatalf("hear set flags %x", i.card&^cardMask)
		}
	}
	i := memberState{card: cardMask}
	i.set(flagTracked, true)
	i.set(flagWithholding, true)
	i.set(flagWithholding, false)
	if i.card&cardMask != cardMask || !i.tracked() || i.withholding() || i.spoke() {
		t.Fatalf("card %x: index %d, tracked %v, withholding %v, spoke %v", i.card, i.card&cardMask, i.tracked(), i.withholding(), i.spoke())
	}
}
