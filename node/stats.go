package node

// Rejection reasons, as counted in Stats.Rejected and told to a Tracer.
const (
	RejectBadEnvelope RejectReason = "bad_envelope"
	RejectNotMember   RejectReason = "not_member"
	RejectDuplicate   RejectReason = "duplicate"
	RejectBadClock    RejectReason = "bad_clock"
	RejectClockAhead  RejectReason = "clock_ahead"
	RejectBadFrame    RejectReason = "bad_frame"
	RejectBadShape    RejectReason = "bad_shape"
	RejectBadFactors  RejectReason = "bad_factors"
	RejectNorm        RejectReason = "norm"
	// RejectAfterLeave counts updates of a member above the last clock it
	// announced when it left: nobody asks for those, so applying them
	// would make views differ.
	RejectAfterLeave RejectReason = "after_leave"
	// RejectLateGap counts updates for rows already committed that do not
	// continue their origin's contiguous updates: the rows take them only
	// in order (see commit), so they are asked for again once the gap
	// below them closes.
	RejectLateGap RejectReason = "late_gap"
	// RejectLateRelayed counts updates of a live member for rows already
	// committed that another member passed on before the origin itself
	// showed it still keeps them (see catchup.go): they may be updates its
	// origin already answers "gone" for.
	RejectLateRelayed RejectReason = "late_relayed"
	// RejectBadSignature and RejectNaN are defined with the checks that
	// count them (sign.go, robust.go).
)

// RejectReasons lists every reason Stats.Rejected counts, so that a
// monitor can show each at zero before the first rejection.
func RejectReasons() []RejectReason {
	return []RejectReason{RejectBadEnvelope, RejectNotMember, RejectDuplicate, RejectBadClock, RejectClockAhead,
		RejectBadFrame, RejectBadShape, RejectBadFactors, RejectNorm, RejectAfterLeave, RejectBadSignature,
		RejectNaN, RejectBadSync, RejectSyncBudget, RejectMarkedRefused,
		RejectBadAnnouncement, RejectForgedAnnouncement, RejectStaleIncarnation, RejectStaleHello,
		RejectNotAdmitted, RejectReadmit, RejectAdmitLimit, RejectSignFailed, RejectBadGone, RejectLateGap, RejectLateRelayed}
}

// Stats are a node's counters. All byte counts are envelope bytes as handed
// to the driver (without the driver's own framing).
type Stats struct {
	Clock          uint64
	UpdatesApplied uint64 // updates in the view, this node's own included
	UpdatesRelayed uint64 // updates forwarded on behalf of other origins
	MessagesSent   uint64
	BytesSent      uint64
	FrameBytes     uint64 // bytes of this node's own codec frames
	PairsEncoded   uint64 // key/value pairs in this node's own frames
	// Frames of this node's own updates, by form.
	FactorFramesSent uint64
	DeltaFramesSent  uint64
	Rejected         map[RejectReason]uint64
	LastLoss         float64 // mean training loss of the last mini-batch
	// Staleness observed at each read (the start of an iteration).
	StalenessMax uint64
	StalenessSum uint64
	Reads        uint64
	// BudgetCuts counts own updates cut to fit the budget.
	BudgetCuts uint64
}

// Stats returns a copy of the node's counters.
func (n *Node) Stats() Stats {
	s := n.stats
	s.Clock = n.clock
	s.Rejected = make(map[RejectReason]uint64, len(n.stats.Rejected))
	for k, v := range n.stats.Rejected {
		s.Rejected[k] = v
	}
	return s
}
