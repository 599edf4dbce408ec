package testnet

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/sketchmesh/sketchmesh/liveview"
	"github.com/sketchmesh/sketchmesh/mesh"
	"github.com/sketchmesh/sketchmesh/netmodel"
	"github.com/sketchmesh/sketchmesh/node"
)

// LiveView is the live view of a testnet (liveview.Source): every node's
// loop copies its core's state into it (mesh.DaemonConfig.Observe, after an
// iteration or a tick, at most every 100 ms), node 0 adds the curve's
// points, and the web server reads the assembled state at most a few times
// a second. Give it to Config.Live; a later Run with the same LiveView
// starts it afresh.
type LiveView struct {
	mu         sync.Mutex
	iterations uint64
	staleness  int
	ids        []string
	out        [][]string // each node's overlay links
	hosts      []*mesh.Host
	cores      []mesh.CoreView
	copied     []time.Time // when each node's core was last copied
	blocked    []time.Duration
	curve      []liveview.Point
	start      time.Time
	elapsed    time.Duration
	seq        uint64
	done       bool
	// links and traffic are frozen when the run ends, before its hosts
	// close.
	links   []liveview.Link
	traffic []mesh.TrafficStats
}

// NewLiveView returns an empty live view; it shows no member until a Run
// starts.
func NewLiveView() *LiveView { return &LiveView{} }

// begin resets the view for a run of these members.
func (v *LiveView) begin(cfg Config, members []*member, router netmodel.Router) {
	n := len(members)
	ids, out, hosts := make([]string, n), make([][]string, n), make([]*mesh.Host, n)
	for i, m := range members {
		ids[i], hosts[i] = m.host.ID(), m.host
		out[i] = router.Linked(m.host.ID())
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.iterations, v.staleness = uint64(cfg.Iterations), cfg.Staleness
	v.ids, v.out, v.hosts = ids, out, hosts
	v.cores, v.blocked, v.copied = make([]mesh.CoreView, n), make([]time.Duration, n), make([]time.Time, n)
	v.curve, v.links, v.traffic = nil, nil, nil
	v.start, v.elapsed, v.done = time.Now(), 0, false
	v.seq++
}

// observeEvery spaces the copies of one node's core: the server reads the
// view at most a few times a second, so copying after every iteration of a
// fast mesh would be work nobody sees.
const observeEvery = 100 * time.Millisecond

// observe stores node i's state, at most every observeEvery unless forced;
// it runs on node i's loop.
func (v *LiveView) observe(i int, n *node.Node, blocked time.Duration, force bool) {
	now := time.Now()
	v.mu.Lock()
	due := force || now.Sub(v.copied[i]) >= observeEvery
	v.mu.Unlock()
	if !due {
		return
	}
	c := mesh.ObserveCore(n)
	v.mu.Lock()
	v.cores[i], v.blocked[i], v.copied[i] = c, blocked, now
	v.seq++
	v.mu.Unlock()
}

// point adds a point of node 0's curve.
func (v *LiveView) point(p Progress) {
	v.mu.Lock()
	v.curve = append(v.curve, liveview.Point{
		Iteration: p.Iteration, WallSeconds: p.Elapsed.Seconds(), BytesSent: p.BytesSent,
		TrainLoss: p.TrainLoss, TestLoss: p.TestLoss,
		TestAccuracy: optional(p.TestAccuracy), TestAUC: optional(p.TestAUC),
	})
	v.seq++
	v.mu.Unlock()
}

// finish takes every node's final state (the loops have stopped, so the
// cores are read here) and freezes the view.
func (v *LiveView) finish(members []*member, wall time.Duration) {
	for i, m := range members {
		v.observe(i, m.core, m.run.Blocked, true)
	}
	links, traffic := v.readLinks()
	v.mu.Lock()
	v.links, v.traffic, v.elapsed, v.done = links, traffic, wall, true
	v.seq++
	v.mu.Unlock()
}

// readLinks reads the hosts' per-peer traffic (safe from any goroutine).
func (v *LiveView) readLinks() ([]liveview.Link, []mesh.TrafficStats) {
	v.mu.Lock()
	hosts, out := v.hosts, v.out
	ratios := make([]float64, len(v.cores))
	for i, c := range v.cores {
		ratios[i] = c.CompressionRatio
	}
	v.mu.Unlock()
	var links []liveview.Link
	traffic := make([]mesh.TrafficStats, len(hosts))
	for i, h := range hosts {
		traffic[i] = updateTraffic(h.Traffic())
		peers := h.PeerTraffic()
		for _, to := range out[i] {
			t := peers[to] // zero, and path "", until an update stream ran
			links = append(links, liveview.Link{
				From: hosts[i].ID(), To: to, Path: t.Path,
				BytesSent: t.BytesSent, BytesReceived: t.BytesReceived,
				MessagesSent: t.MessagesSent, MessagesReceived: t.MessagesReceived,
				CompressionRatio: ratios[i],
			})
		}
	}
	return links, traffic
}

// severity orders member states, to break ties (see stateOf).
var severity = map[string]int{liveview.StateLive: 0, liveview.StateSuspected: 1, liveview.StateDead: 2, liveview.StateLeft: 3}

// stateOf is the state most of the other nodes hold of a member, the more
// severe on a tie: one node starved of CPU that suspects everyone does not
// paint the whole mesh suspected, and a member half the mesh suspects
// shows so.
func stateOf(votes map[string]int, fallback string) string {
	best, n := fallback, 0
	for state, c := range votes {
		if c > n || (c == n && severity[state] > severity[best]) {
			best, n = state, c
		}
	}
	return best
}

// LiveState implements liveview.Source.
func (v *LiveView) LiveState() liveview.State {
	v.mu.Lock()
	done, links, traffic := v.done, v.links, v.traffic
	v.mu.Unlock()
	if !done {
		links, traffic = v.readLinks()
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	st := liveview.State{
		Mode: "testnet", Iterations: v.iterations, Staleness: v.staleness, Done: v.done, Seq: v.seq,
		Links: links, Curve: slices.Clip(v.curve), Rejected: map[string]uint64{},
	}
	st.ElapsedSeconds = v.elapsed.Seconds()
	if !v.done && !v.start.IsZero() {
		st.ElapsedSeconds = time.Since(v.start).Seconds()
	}
	// Members: the testnet's nodes in order, then any other member some
	// node knows (a hostile member under --attack).
	index := map[string]int{}
	votes := map[int]map[string]int{}
	for i, id := range v.ids {
		index[id] = i
		st.Members = append(st.Members, mesh.NewLiveMember(id, fmt.Sprintf("node %d", i), liveview.StateLive))
	}
	for _, c := range v.cores {
		for j, m := range c.Members {
			k, ok := index[m]
			if !ok {
				k = len(st.Members)
				index[m] = k
				st.Members = append(st.Members, mesh.NewLiveMember(m, "member "+shortPeer(m), c.States[j]))
			}
			if m != c.ID {
				if votes[k] == nil {
					votes[k] = map[string]int{}
				}
				votes[k][c.States[j]]++
			}
			if k >= len(v.ids) {
				st.Members[k].Clock = max(st.Members[k].Clock, c.Held[j])
			}
		}
		for r, n := range c.Rejected {
			st.Rejected[string(r)] += n
		}
	}
	for k := range st.Members {
		st.Members[k].State = stateOf(votes[k], st.Members[k].State)
	}
	origins := make([]string, len(st.Members))
	for k, m := range st.Members {
		origins[k] = m.ID
	}
	st.VectorClock.Origins = origins
	for i, c := range v.cores {
		if c.ID == "" {
			continue // not observed yet
		}
		// The links were read outside the lock: a run that began since
		// has more cores than they have entries.
		var t mesh.TrafficStats
		if i < len(traffic) {
			t = traffic[i]
		}
		mesh.FillLiveMember(&st.Members[i], c, t)
		st.Members[i].BlockedSeconds = v.blocked[i].Seconds()
		held := make([]uint64, len(origins))
		for j, m := range c.Members {
			held[index[m]] = c.Held[j]
		}
		st.VectorClock.Rows = append(st.VectorClock.Rows, liveview.ClockRow{Holder: c.ID, Clock: c.Clock, Clocks: held})
	}
	return st
}

func shortPeer(id string) string {
	if len(id) > 8 {
		return "…" + id[len(id)-6:]
	}
	return id
}
