package node

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
)

// The cache gives what DecodeAnnouncement gives, malformed bytes included,
// decodes a message once however many nodes read it, and keeps at most its
// limit of messages.
func TestDecodeCacheAnnouncements(t *testing.T) {
	c := NewDecodeCache(4)
	hello := EncodeAnnouncement(Announcement{Kind: KindHello, Member: "n1/1", Signer: "n1/1", Clock: 3, Seq: 2, Addrs: []string{"/ip4/127.0.0.1/tcp/1"}})
	want, err := DecodeAnnouncement(hello)
	if err != nil {
		t.Fatal(err)
	}
	first, err1 := c.announcement(hello)
	second, err2 := c.announcement(append([]byte(nil), hello...))
	if err1 != nil || err2 != nil || !reflect.DeepEqual(first, want) || !reflect.DeepEqual(second, want) {
		t.Fatalf("cached hello: %+v (%v), %+v (%v); want %+v", first, err1, second, err2, want)
	}
	if &first.Addrs[0] != &second.Addrs[0] {
		t.Error("a second read of the same bytes decoded them again")
	}
	bad := hello[:len(hello)-1]
	if _, err := c.announcement(bad); !errors.Is(err, ErrBadAnnouncement) {
		t.Errorf("truncated hello: %v, want ErrBadAnnouncement", err)
	}
	if _, err := c.announcement(bad); !errors.Is(err, ErrBadAnnouncement) {
		t.Errorf("truncated hello read again: %v, want ErrBadAnnouncement", err)
	}
	for i := range 10 {
		if _, err := c.announcement(EncodeAnnouncement(Announcement{Kind: KindHello, Member: fmt.Sprintf("n%d/1", i), Signer: fmt.Sprintf("n%d/1", i), Seq: 1})); err != nil {
			t.Fatal(err)
		}
	}
	if len(c.announcements) != 4 || len(c.announcementFIFO) != 4 {
		t.Errorf("cache holds %d messages (%d in order), want its limit of 4", len(c.announcements), len(c.announcementFIFO))
	}
}

// Frames are found by their bytes, wherever they lie: a copy finds the
// entry, a frame that differs in one byte or in length does not, and the
// cache keeps at most its limit of frames, dropping the oldest.
func TestDecodeCacheFrames(t *testing.T) {
	c := NewDecodeCache(3)
	frame := []byte("a frame of some bytes")
	first := c.put(c.key(frame), frame, decoded{reason: RejectBadShape})
	if got := c.get(append([]byte(nil), frame...)); got != first {
		t.Fatalf("a copy of the frame found %p, want %p", got, first)
	}
	if &first.frame[0] == &frame[0] {
		t.Error("the cache keeps the caller's array, not a copy")
	}
	other := append([]byte(nil), frame...)
	other[3] ^= 1
	for _, f := range [][]byte{other, frame[:len(frame)-1], append(append([]byte(nil), frame...), 0), nil} {
		if got := c.get(f); got != nil {
			t.Fatalf("frame %q found the entry of %q", f, frame)
		}
	}
	for i := range 3 {
		f := fmt.Appendf(nil, "frame %d", i)
		c.put(c.key(f), f, decoded{})
	}
	if c.get(frame) != nil || len(c.entries) != 3 || len(c.fifo) != 3 {
		t.Fatalf("after three more frames: the first found %v, %d entries, %d in order; want it gone and 3", c.get(frame) != nil, len(c.entries), len(c.fifo))
	}
}

// A frame is found among its origin's recent frames by slot and clock, and
// only when its bytes are the ones remembered there: another frame at the
// same slot and clock, as a member that sends different updates for one
// clock makes, is looked for in the map and decoded on its own.
func TestDecodeCacheFindsRecentFramesBySlotAndClock(t *testing.T) {
	c := NewDecodeCache(8)
	a, b := []byte("frame a"), []byte("frame b")
	if d, _ := c.lookupAt(a, 3, 7); d != nil {
		t.Fatal("an empty cache found a frame")
	}
	key := c.key(a)
	da := c.put(key, a, decoded{reason: "a"})
	c.remember(3, 7, key, da)
	for _, q := range []struct {
		frame []byte
		slot  int
		clock uint64
		want  *decoded
	}{
		{slices.Clone(a), 3, 7, da},
		{b, 3, 7, nil},
		{a, 3, 11, da}, // the same way of slot 3, another clock: the map
		{a, -1, 7, da},
		{a, 40, 7, da},
	} {
		if d, k := c.lookupAt(q.frame, q.slot, q.clock); d != q.want || k != c.key(q.frame) {
			t.Errorf("lookupAt(%q, %d, %d) = %p, want %p", q.frame, q.slot, q.clock, d, q.want)
		}
	}
	if r := c.recent[3][7%recentWays]; r.d != da || r.clock != 11 {
		t.Errorf("slot 3 remembers clock %d (%p), want the last found, clock 11", r.clock, r.d)
	}
}
