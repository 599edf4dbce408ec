package node

import "slices"

// What a core keeps of each member for the membership protocol.
//
// A simulated core holds a record for every member, P² records in all,
// and they were the largest share of its heap that grows with P (88 bytes
// a member and core, each a heap object the collector scanned). The
// record is split by how it changes:
//
//   - memberState, what moves with the core's own time (when it last heard
//     the member, the highest clock it knows of it): written on every
//     update the core applies, so it stays the core's own, kept dense by
//     slot and without pointers (24 bytes);
//   - memberCard, what the member's last hello said (its sequence number,
//     round and site label): the same in every core that took the same
//     hello, so the cores on one slot table share one copy of each card
//     (SlotTable.cards), found by content when a hello changes it, and a
//     core holds only its index;
//   - memberExtra, what few members have (who admitted a joiner, its
//     admit, the addresses a member announced): the core's own, in a
//     list sorted by slot.
//
// A core that has its own slot table (a daemon's) has its own cards; the
// protocol reads and writes the same values either way.

// memberState is what the protocol knows of one member that changes with
// the core's own time.
type memberState struct {
	clock uint64 // last announced clock
	// heard is the tick the member was last heard (heardAt, silentAt).
	// blockedSince is the tick since which the member has held the gate
	// with its entry at withheld (see detectWithholding), 0 for none: set
	// for most members at the end of a run, when a map of them cost more
	// than a field. All three keep the low 32 bits only, compared in
	// serial arithmetic (ticksSince, entryPast), which holds the record to
	// 24 bytes, P² of them in a simulator: a member silent for 2³² ticks
	// (13 years of 100 ms ticks) is long declared dead, blockedSince is at
	// most a death timeout old when read, and withheld is compared with an
	// entry that moves a few clocks a tick.
	heard, blockedSince, withheld uint32
	// card is the index of the member's card in the slot table's cards
	// (cardMask), with the record's flags in its top bits.
	card uint32
}

// The flags of a member record, in the top bits of its card field.
const (
	// flagTracked is set for a member the core keeps a record of.
	flagTracked = 1 << 31
	// flagSpoke is set once the member itself was heard (a hello or a
	// direct message).
	flagSpoke = 1 << 30
	// flagWithholding is set once the member is suspected for holding the
	// gate back, until its entry passes withheld.
	flagWithholding = 1 << 29
	cardMask        = flagWithholding - 1
)

func (i *memberState) tracked() bool     { return i.card&flagTracked != 0 }
func (i *memberState) spoke() bool       { return i.card&flagSpoke != 0 }
func (i *memberState) withholding() bool { return i.card&flagWithholding != 0 }

// set sets or clears flag.
func (i *memberState) set(flag uint32, on bool) {
	if on {
		i.card |= flag
	} else {
		i.card &^= flag
	}
}

// hear records that the member was heard at tick and spoke itself.
func (i *memberState) hear(tick uint64) {
	i.heard = uint32(tick)
	i.card |= flagSpoke
}

// silentAt is how many ticks the member has been silent at tick.
func (i *memberState) silentAt(tick uint64) uint64 { return ticksSince(tick, i.heard) }

// heardAt is the tick the member was last heard, read at tick.
func (i *memberState) heardAt(tick uint64) uint64 { return tick - i.silentAt(tick) }

// ticksSince is how many ticks lie between since, the low 32 bits of a
// tick, and tick, which is less than 2³² ticks later.
func ticksSince(tick uint64, since uint32) uint64 { return uint64(uint32(tick) - since) }

// entryPast reports whether entry is past withheld, the low 32 bits of an
// entry less than 2³¹ clocks from it.
func entryPast(entry uint64, withheld uint32) bool { return int32(uint32(entry)-withheld) > 0 }

// memberCard is what a member's last hello said.
type memberCard struct {
	seq   uint64 // last hello sequence number
	round uint64 // milliticks per iteration
	site  string // last announced site label
}

// sharedCard is a card of a slot table and how many member records of its
// cores hold it.
type sharedCard struct {
	memberCard
	refs int
}

// cardTable holds the distinct cards the cores on one slot table hold:
// card 0 is the zero card, every record's at its start, and is never
// dropped; any other is dropped when no record holds it any more, so a
// long run keeps the cards of the last hellos, not of all of them.
type cardTable struct {
	cards []sharedCard
	index map[memberCard]uint32
	free  []uint32
}

// card returns card i.
func (t *cardTable) card(i uint32) memberCard {
	if i == 0 {
		return memberCard{}
	}
	return t.cards[i].memberCard
}

// swap returns the index of card c for a record that held card old, which
// it no longer holds: c's card when some record holds it already, a new
// one otherwise.
func (t *cardTable) swap(old uint32, c memberCard) uint32 {
	if old != 0 {
		if t.cards[old].memberCard == c {
			return old
		}
		if t.cards[old].refs--; t.cards[old].refs == 0 {
			delete(t.index, t.cards[old].memberCard)
			t.cards[old] = sharedCard{}
			t.free = append(t.free, old)
		}
	}
	if c == (memberCard{}) {
		return 0
	}
	if i, ok := t.index[c]; ok {
		t.cards[i].refs++
		return i
	}
	if t.index == nil {
		t.index = map[memberCard]uint32{}
		t.cards = append(t.cards, sharedCard{}) // card 0, never stored here
	}
	var i uint32
	if k := len(t.free); k > 0 {
		i, t.free = t.free[k-1], t.free[:k-1]
	} else {
		i = uint32(len(t.cards))
		t.cards = append(t.cards, sharedCard{})
	}
	t.cards[i] = sharedCard{memberCard: c, refs: 1}
	t.index[c] = i
	return i
}

// slotExtra is the extra record of the member of vector clock slot slot.
type slotExtra struct {
	slot  int
	extra *memberExtra
}

// trackMember records a member the core now has in its list.
func (n *Node) trackMember(m string) {
	n.trackSlot(n.vc.intern(m))
	name, inc := SplitMember(m)
	if cur, ok := n.peerInc(name); !ok || inc > cur {
		n.setPeerInc(name, inc)
	}
}

// trackSlot makes the record of the member of vector clock slot q, which
// trackMember completes with its peer's incarnation.
func (n *Node) trackSlot(q int) {
	n.proto.states = reach(n.proto.states, q)
	if s := &n.proto.states[q]; !s.tracked() {
		*s = memberState{heard: uint32(n.proto.tick), card: flagTracked}
	}
}

// info returns member m's record, or nil when m is not tracked. The
// pointer is valid until the next member is tracked.
func (n *Node) info(m string) *memberState { return n.infoAt(n.vc.slot(m)) }

// infoAt is info by vector clock slot.
func (n *Node) infoAt(q int) *memberState {
	if q >= 0 && q < len(n.proto.states) && n.proto.states[q].tracked() {
		return &n.proto.states[q]
	}
	return nil
}

// cardOf returns the card of record i.
func (n *Node) cardOf(i *memberState) memberCard { return n.vc.table.cards.card(i.card & cardMask) }

// setCard makes c record i's card.
func (n *Node) setCard(i *memberState, c memberCard) {
	i.card = n.vc.table.cards.swap(i.card&cardMask, c) | i.card&^cardMask
}

// extraAt returns the extra record of the member of slot q, or nil.
func (n *Node) extraAt(q int) *memberExtra {
	if j, ok := n.extraIndex(q); ok {
		return n.proto.extras[j].extra
	}
	return nil
}

// extraOf is extraAt by member id.
func (n *Node) extraOf(m string) *memberExtra { return n.extraAt(n.vc.slot(m)) }

// moreAt returns the extra record of the member of slot q, made on first
// use.
func (n *Node) moreAt(q int) *memberExtra {
	j, ok := n.extraIndex(q)
	if !ok {
		n.proto.extras = slices.Insert(n.proto.extras, j, slotExtra{slot: q, extra: new(memberExtra)})
	}
	return n.proto.extras[j].extra
}

// extraIndex finds slot q in the extra records.
func (n *Node) extraIndex(q int) (int, bool) {
	return slices.BinarySearchFunc(n.proto.extras, q, func(e slotExtra, q int) int { return e.slot - q })
}

// admittedBy is who admitted member m ("" for one this node started with,
// or does not know).
func (n *Node) admittedBy(m string) string {
	if x := n.extraOf(m); x != nil {
		return x.admittedBy
	}
	return ""
}
