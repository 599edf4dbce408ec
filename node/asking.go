package node

// When a node asks for what it lacks.
//
// Two requests recover what the links lose (sync.go): SyncRequest, from a
// node that has waited at its gate, and AntiEntropy, now and then. When to
// send them is a protocol decision, so it is taken here, at Tick, in
// ticks: the simulator's cores run the code the daemon's run, and what
// differs between them is two numbers each driver gives
// (SyncConfig.StallTicks, EntropyTicks) and one it may (AskPeriods).
//
// A node stalled (it cannot train and is not done) asks once it has been
// for max(StallTicks, AskPeriods iteration periods), and again every such
// wait while it stays stalled; the iteration period is the mean of the
// ticks between its Trains, waits included (the daemon's measure before
// the rule moved here), so a wait in periods grows with the mesh's pace,
// as a queue on a slow link does. It is capped at SuspectTicks (or
// StallTicks, if larger): whatever the pace, a node asks at least as often
// as it would suspect a silent member.
// Every EntropyTicks a node sends an anti-entropy request. A floor of 0
// leaves that request to the driver, which calls SyncRequest or
// AntiEntropy itself (a driver whose links lose nothing asks neither).
//
// The daemon asks after 200 ms or three iteration periods, and every four
// heartbeats; the simulator after its links' latency allows an answer
// (Config.SyncTimeout), and every SyncInterval. On a saturated link no
// setting of these timers kept the simulator's run from collapsing, and a
// retransmission timer's backoff left the join and leave scenarios with
// updates undelivered; what holds it is the pace of the answers
// (payReplies below, README, status).

// askWhenDue queues, at a tick, the requests whose time has come.
func (n *Node) askWhenDue() {
	p := &n.proto
	if n.sc.StallTicks > 0 {
		n.askWhenStalled()
	}
	if e := n.sc.EntropyTicks; e > 0 && p.tick-p.lastEntropy >= uint64(e) {
		p.lastEntropy = p.tick
		p.direct = append(p.direct, n.AntiEntropy()...)
	}
}

// askWhenStalled asks the members holding the node back, once it has been
// unable to train (and not done) for the wait, and again every wait.
func (n *Node) askWhenStalled() {
	p := &n.proto
	if n.CanTrain() || n.Done() {
		p.stalled = false
		return
	}
	if !p.stalled {
		p.stalled, p.stalledAt = true, p.tick
	}
	wait := n.stallWait()
	if p.tick-p.stalledAt < wait || p.tick-p.lastStallAsk < wait {
		return
	}
	p.lastStallAsk = p.tick
	out := n.SyncRequest()
	if len(out) > 0 {
		n.syncStats.StallAsks++
	}
	p.direct = append(p.direct, out...)
}

// stallWait is the ticks a stalled node waits before it asks, and between
// asks (see above).
func (n *Node) stallWait() uint64 {
	floor := uint64(n.sc.StallTicks)
	paced := (uint64(n.sc.AskPeriods)*n.proto.period + 999) / 1000
	return min(max(floor, paced), max(floor, uint64(n.sc.SuspectTicks)))
}

// payReplies renews, at a tick, what each requester may be answered (see
// SyncConfig.ReplyRate): MaxReplyBytes a tick, or the debt of its answers
// paid back at ReplyRate.
//
// On a link slower than the answers a request may pull, a stalled node's
// asks for updates still queued are answered again behind them: on
// 2 Mbit/s links carrying raw frames, 1 MiB a tick let each simulated
// requester pull a hundred times what its link carries, the members
// resent each update tens of times and kept their links full long after
// training ended, and their hellos, behind answers of a megabyte, came too
// late: members took each other for dead (README, status). Paced at the
// link's bandwidth, and with no more answered at once than the link
// carries in a suspicion timeout (replyBudget), the same run holds, and
// so do runs on links of 100 kbit/s.
func (n *Node) payReplies() {
	rate := n.sc.ReplyRate
	if rate == 0 {
		clear(n.replied)
		return
	}
	for from, debt := range n.replied {
		if debt <= rate {
			delete(n.replied, from)
			continue
		}
		n.replied[from] = debt - rate
	}
}

// replyBudget is what one requester may be answered at once: MaxReplyBytes,
// and with a reply rate no more than the link carries in a suspicion
// timeout. Answers queued past that hold the link's other traffic back
// for longer than the members wait before they suspect each other.
func (n *Node) replyBudget() int {
	if n.sc.ReplyRate == 0 {
		return n.sc.MaxReplyBytes
	}
	return min(n.sc.MaxReplyBytes, max(n.sc.ReplyRate*n.sc.SuspectTicks, 1))
}

// SetReplyRate sets SyncConfig.ReplyRate, in bytes per tick, for a driver
// that knows its links' bandwidth; 0 takes the bound back to
// MaxReplyBytes every tick.
func (n *Node) SetReplyRate(bytesPerTick int) { n.sc.ReplyRate = max(bytesPerTick, 0) }

// SetAskTiming sets the core's request timers in ticks (see
// SyncConfig.StallTicks, EntropyTicks and AskPeriods), for a driver that
// knows its tick's length; a floor of zero turns that request's timer off.
func (n *Node) SetAskTiming(stall, entropy, periods int) {
	n.sc.StallTicks, n.sc.EntropyTicks, n.sc.AskPeriods = max(stall, 0), max(entropy, 0), max(periods, 0)
}
