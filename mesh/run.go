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

// Run drives n over t until n is done (all iterations run and every live
// member's updates in), the context ends, or training fails. Arrivals are
// handled before each iteration so relays forward promptly.
func Run(ctx context.Context, n *node.Node, t Transport, opts Options) (RunStats, error) {
	start := time.Now()
	var st RunStats
	inbox := t.Inbox()
	var window *time.Timer
	if opts.RelayWindow > 0 {
		window = time.NewTimer(opts.RelayWindow)
		defer window.Stop()
	}
	send := func() {
		if window != nil && n.HasReady() {
			// Keep collecting until the window closes, then send it all.
			window.Reset(opts.RelayWindow)
		collect:
			for {
				select {
				case m := <-inbox:
					n.Receive(m.From, m.Data)
				case <-window.C:
					break collect
				}
			}
		}
		for _, m := range n.Ready().Messages {
			t.Send(m.To, m.Data)
		}
	}
	for {
		for drained := false; !drained; {
			select {
			case m := <-inbox:
				n.Receive(m.From, m.Data)
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
			n.Receive(m.From, m.Data)
		case <-ctx.Done():
			st.Wall = time.Since(start)
			return st, fmt.Errorf("node %s at clock %d: %w", n.ID(), n.Clock(), ctx.Err())
		}
		if n.Clock() < n.Config().Iterations {
			st.Blocked += time.Since(waitStart)
		}
	}
}
