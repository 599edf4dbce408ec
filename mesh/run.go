package mesh

import (
	"context"
	"fmt"
	"time"

	"github.com/sketchmesh/sketchmesh/node"
)

// Options tune the loop. AfterTrain lets a caller observe a running node
// without owning it: it runs on the loop goroutine, between events, so it may
// read the core freely but must return quickly.
type Options struct {
	// RelayWindow is how long the loop keeps collecting arrivals once it has
	// something to forward, so that a relay combines what several neighbours
	// sent into one message per next hop. 0 forwards at once.
	RelayWindow time.Duration
	// Tick is the length of the core's tick (node.Node.Tick). Default
	// 100 ms.
	Tick time.Duration
	// SyncAfter, when set, is how long the node waits at its gate before
	// it asks the members holding it back for their updates (and runs
	// anti-entropy), again every SyncAfter while it waits. 0 never asks:
	// on links that lose nothing (a testnet on loopback) every update
	// arrives, and a resend would only be a duplicate.
	SyncAfter time.Duration
	// AfterTrain runs after every local iteration; took is how long the
	// iteration's computation ran. A testnet uses it to report progress and
	// to emulate slower nodes.
	AfterTrain func(n *node.Node, took time.Duration)
}

// RunStats describe one run of the loop.
type RunStats struct {
	// Blocked is the time spent with the staleness gate closed, waiting for
	// peers' updates.
	Blocked time.Duration
	// Wall is the time from start to return.
	Wall time.Duration
}

// Run drives n over t, a mesh whose members are known from the start (a
// testnet), until n is done (all iterations run and every live member's
// updates in), the context ends, or training fails. It runs the core's
// whole protocol: ticks, hellos and failure detection, retransmission;
// broadcasts travel the overlay, as there is no membership topic.
// Arrivals are handled before each iteration so relays forward promptly.
func Run(ctx context.Context, n *node.Node, t Transport, opts Options) (RunStats, error) {
	start := time.Now()
	var st RunStats
	if opts.Tick <= 0 {
		opts.Tick = 100 * time.Millisecond
	}
	tick := time.NewTicker(opts.Tick)
	defer tick.Stop()
	inbox := t.Inbox()
	var window *time.Timer
	if opts.RelayWindow > 0 {
		window = time.NewTimer(opts.RelayWindow)
		defer window.Stop()
	}
	// Broadcasts (hellos, admits) travel the overlay as updates do, down
	// the sender's broadcast tree: each node forwards the ones it accepted
	// (a duplicate or a forgery goes no further), so a hello costs one
	// message per member, not P per member, and links stay O(log P).
	out := func(rd node.Ready) {
		for _, m := range rd.Messages {
			t.Send(m.To, m.Data)
		}
		for _, b := range rd.Broadcast {
			for _, hop := range n.Relays(n.ID()) {
				t.Send(hop, b)
			}
		}
	}
	receive := func(m Inbound) {
		before := n.Rejections()
		n.Receive(m.From, m.Data)
		if !node.IsAnnouncement(m.Data) || n.Rejections() != before {
			return
		}
		if a, err := node.DecodeAnnouncement(m.Data); err == nil && (a.Kind == node.KindHello || a.Kind == node.KindAdmit) && a.Signer != n.ID() {
			for _, hop := range n.Relays(a.Signer) {
				if hop != m.From {
					t.Send(hop, m.Data)
				}
			}
		}
	}
	send := func() {
		if window != nil && n.HasReady() {
			// Keep collecting until the window closes, then send it all.
			window.Reset(opts.RelayWindow)
		collect:
			for {
				select {
				case m := <-inbox:
					receive(m)
				case <-window.C:
					break collect
				case <-ctx.Done():
					break collect
				}
			}
		}
		out(n.Ready())
	}
	var blockedTicks int
	for {
		for drained := false; !drained; {
			select {
			case m := <-inbox:
				receive(m)
			case <-tick.C:
				n.Tick()
			default:
				drained = true
			}
		}
		send()
		if n.Done() {
			err := t.Flush(ctx)
			st.Wall = time.Since(start)
			return st, err
		}
		if n.CanTrain() {
			blockedTicks = 0
			trainStart := time.Now()
			if err := n.Train(); err != nil {
				st.Wall = time.Since(start)
				return st, fmt.Errorf("train: %w", err)
			}
			if opts.AfterTrain != nil {
				opts.AfterTrain(n, time.Since(trainStart))
			}
			continue
		}
		waitStart := time.Now()
		select {
		case m := <-inbox:
			receive(m)
		case <-tick.C:
			n.Tick()
			blockedTicks++
			if every := int(opts.SyncAfter / opts.Tick); opts.SyncAfter > 0 && blockedTicks%max(every, 1) == 0 {
				out(node.Ready{Messages: n.SyncRequest()})
				out(node.Ready{Messages: n.AntiEntropy()})
			}
		case <-ctx.Done():
			st.Wall = time.Since(start)
			return st, fmt.Errorf("node %s at clock %d: %w", n.ID(), n.Clock(), ctx.Err())
		}
		if n.Steps() < n.Config().Iterations {
			st.Blocked += time.Since(waitStart)
		}
	}
}
