package node

// Read-only accessors for drivers that show the core's state (the live
// view): they copy nothing the core keeps, and change nothing.

// Left reports whether member id announced its departure (whether or not
// its last updates have all arrived yet).
func (n *Node) Left(id string) bool {
	_, ok := n.left[id]
	return ok
}

// AnnouncedClock returns the highest clock member announced in its hellos
// or its leave notice, or made an update of that this node applied (0
// before the first).
func (n *Node) AnnouncedClock(member string) uint64 {
	if i := n.info(member); i != nil {
		return i.clock
	}
	return 0
}
