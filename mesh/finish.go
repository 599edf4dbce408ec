package mesh

import (
	"context"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// finish ends the run: a final evaluation and checkpoint, the leave notice
// to every live member, resent until each acknowledges it or LeaveTimeout
// passes, then the last sends within what remains of it.
func (a *Daemon) finish(ctx context.Context, start time.Time, stopped bool) (Result, error) {
	finished := time.Now()
	a.joins.Stop(a, "this member is leaving")
	a.evaluate()
	a.checkpoint()
	a.n.StartLeave()
	_, waiting := a.n.LeaveStatus()
	liveAtLeave := len(waiting)
	a.handleReady()
	a.metrics()
	// One deadline for the acknowledgements and the last sends: a stop
	// takes effect within LeaveTimeout whatever the peers do.
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.cfg.LeaveTimeout)
	defer cancel()
	tick := time.NewTicker(a.cfg.Tick)
	defer tick.Stop()
	inbox := a.net.Inbox()
wait:
	for {
		if a.n.LeaveAcknowledged() {
			break
		}
		select {
		case m := <-inbox:
			a.receive(m)
		case data := <-a.heard:
			a.n.Receive("", data)
		case <-tick.C:
			a.n.Tick()
		case <-fctx.Done():
			break wait
		}
		a.handleReady()
	}
	acked, waiting := a.n.LeaveStatus()
	if len(waiting) > 0 {
		short := make([]string, len(waiting))
		for i, m := range waiting {
			short[i] = shortMember(m)
		}
		a.log.Warn("leave not acknowledged by every live member", "acknowledged", len(acked), "waiting", short, "timeout", a.cfg.LeaveTimeout)
	}
	if err := a.net.Flush(fctx); err != nil {
		a.log.Warn("last sends not all out before leaving", "err", err)
	}
	res := a.result(start, stopped)
	res.LeaveAcknowledgedBy, res.MembersLiveAtLeave = acked, liveAtLeave
	if !stopped {
		res.Finished = finished
	}
	a.log.Info("left the mesh", "clock", res.Clock, "test_accuracy", Sig4(res.Accuracy), "applied_twice", res.AppliedTwice,
		"leave_acknowledged_by", len(acked), "members_live_at_leave", liveAtLeave)
	return res, nil
}

func (a *Daemon) result(start time.Time, stopped bool) Result {
	fromSnap, applied, held := a.n.Ledger()
	st := a.n.Stats()
	twice := uint64(0)
	if fromSnap+applied > held {
		twice = fromSnap + applied - held
	}
	direct, relayed, unreachable := a.linkCounts(time.Now())
	return Result{
		Member: a.self, Clock: a.n.Clock(), Steps: a.n.Steps(), Accuracy: a.lastEval.accuracy, Loss: a.lastEval.loss,
		Incarnations: len(a.n.Members()), Members: countPeers(a.n.Members()), Live: len(a.n.Live()),
		Trained:      !a.lastTrain.IsZero(),
		FromSnapshot: fromSnap, Applied: applied, Held: held, AppliedTwice: twice,
		Rejected: st.Rejected, Blocked: a.blocked, Wall: time.Since(start), Left: stopped,
		ViewDivergence: a.n.SyncStats().ViewDivergence,
		DirectPeers:    direct, RelayedPeers: relayed, UnreachableLinks: unreachable,
	}
}

// countPeers counts the distinct peers that ran the members.
func countPeers(members []string) int {
	peers := map[peer.ID]bool{}
	for _, m := range members {
		if p, err := PeerOf(m); err == nil {
			peers[p] = true
		}
	}
	return len(peers)
}
