package mesh

import (
	"math"
	"slices"
	"sync"
	"time"

	"github.com/sketchmesh/sketchmesh/halton"
	"github.com/sketchmesh/sketchmesh/liveview"
	"github.com/sketchmesh/sketchmesh/model"
	"github.com/sketchmesh/sketchmesh/node"
)

// CoreView is what the live view shows of one core, copied out on the
// goroutine that owns the core (ObserveCore), so that the web server never
// touches a core.
type CoreView struct {
	ID    string
	Clock uint64
	// Members are the core's members, States their states as it sees them
	// (liveview.StateLive, ...), and Held what it holds of each: the
	// largest c such that it has all of the member's updates up to c.
	Members []string
	States  []string
	Held    []uint64
	// WaitingFor are the live members the gate waits for before the next
	// iteration.
	WaitingFor    []string
	StalenessMax  uint64
	StalenessMean float64
	// CompressionRatio is 12 bytes per pair over the bytes of the core's
	// own frames.
	CompressionRatio float64
	TrainLoss        float64
	Rejected         map[node.RejectReason]uint64
}

// ObserveCore copies what the live view needs out of n. It must run on the
// goroutine that owns n; it costs O(members).
func ObserveCore(n *node.Node) CoreView {
	st := n.Stats()
	members := n.Members()
	live := map[string]bool{}
	for _, m := range n.Live() {
		live[m] = true
	}
	v := CoreView{
		ID: n.ID(), Clock: n.Clock(), Members: members,
		States: make([]string, len(members)), Held: make([]uint64, len(members)),
		StalenessMax: st.StalenessMax, TrainLoss: st.LastLoss, Rejected: st.Rejected,
	}
	if st.Reads > 0 {
		v.StalenessMean = float64(st.StalenessSum) / float64(st.Reads)
	}
	if st.FrameBytes > 0 {
		v.CompressionRatio = 12 * float64(st.PairsEncoded) / float64(st.FrameBytes)
	}
	vc := n.VectorClock()
	need := int64(n.Clock()) - int64(n.Config().Staleness)
	for i, m := range members {
		v.Held[i] = vc.Get(m)
		isLive := live[m]
		v.States[i] = memberState(n, m, isLive)
		if m == n.ID() {
			v.Held[i] = max(v.Held[i], n.Clock())
		} else if isLive && need > 0 && int64(v.Held[i]) < need {
			v.WaitingFor = append(v.WaitingFor, m)
		}
	}
	return v
}

// memberState is member m's state as core n sees it.
func memberState(n *node.Node, m string, isLive bool) string {
	switch {
	case m == n.ID() || (isLive && !n.Left(m)):
		return liveview.StateLive
	case n.Left(m):
		return liveview.StateLeft
	case n.Suspected(m):
		return liveview.StateSuspected
	}
	return liveview.StateDead
}

// liveMember fills what a member row holds from its own core.
func (v CoreView) liveMember(m *liveview.Member) {
	m.Observed = true
	m.Clock = v.Clock
	m.StalenessMax, m.StalenessMean = v.StalenessMax, v.StalenessMean
	m.CompressionRatio, m.TrainLoss = v.CompressionRatio, v.TrainLoss
	m.WaitingFor = v.WaitingFor
}

// NewLiveMember returns a member row for id, its peer and incarnation
// split out.
func NewLiveMember(id, name, state string) liveview.Member {
	peer, inc := node.SplitMember(id)
	return liveview.Member{ID: id, Name: name, Peer: peer, Incarnation: inc, State: state}
}

// FillLiveMember fills a member row from the member's own core and host.
func FillLiveMember(m *liveview.Member, v CoreView, t TrafficStats) {
	v.liveMember(m)
	m.BytesSent, m.BytesReceived = t.BytesSent, t.BytesReceived
}

// LivePoint is a point of the learning curve from an evaluation.
func LivePoint(clock uint64, elapsed time.Duration, bytesSent uint64, trainLoss float64, met model.Metrics) liveview.Point {
	return liveview.Point{
		Iteration: clock, WallSeconds: elapsed.Seconds(), BytesSent: bytesSent, TrainLoss: trainLoss, TestLoss: met.Loss,
		TestAccuracy: optionalFigure(met.Accuracy), TestAUC: optionalFigure(met.AUC),
	}
}

// optionalFigure maps NaN (the model has no such figure) to absent.
func optionalFigure(v float64) *float64 {
	if math.IsNaN(v) {
		return nil
	}
	return &v
}

// LiveBoard is the live view of a long-running node (liveview.Source):
// the daemon copies its core's state and what its members announce into
// it on its loop, at every heartbeat, and adds a curve point at every
// evaluation.
type LiveBoard struct {
	mu    sync.Mutex
	st    liveview.State
	start time.Time
	// The overlay of the last live set, kept while it does not change;
	// only the daemon's loop touches them.
	overlayOf []string
	overlay   *halton.Overlay
}

// NewLiveBoard returns an empty board.
func NewLiveBoard() *LiveBoard {
	return &LiveBoard{st: liveview.State{Mode: "run"}, start: time.Now()}
}

// LiveState implements liveview.Source.
func (b *LiveBoard) LiveState() liveview.State {
	b.mu.Lock()
	defer b.mu.Unlock()
	st := b.st
	if !st.Done {
		st.ElapsedSeconds = time.Since(b.start).Seconds()
	}
	st.Curve = slices.Clip(st.Curve)
	return st
}

// observe runs on the daemon's loop.
func (b *LiveBoard) observe(a *Daemon) {
	v := ObserveCore(a.n)
	traffic := a.net.PeerTraffic()
	st := liveview.State{
		Mode: "run", Self: a.self, Iterations: a.cfg.Settings.Iterations, Staleness: a.cfg.Settings.Staleness,
		Rejected:    reasonCounts(v.Rejected),
		VectorClock: liveview.VectorClock{Origins: v.Members, Rows: []liveview.ClockRow{{Holder: v.ID, Clock: v.Clock, Clocks: v.Held}}},
	}
	for i, m := range v.Members {
		row := NewLiveMember(m, shortMember(m), v.States[i])
		if m == a.self {
			FillLiveMember(&row, v, a.net.Traffic())
			row.BlockedSeconds = a.blocked.Seconds()
		} else {
			row.Clock = a.n.AnnouncedClock(m)
			if p, err := a.peerOf(m); err == nil {
				row.Path = a.net.PathTo(p)
			}
		}
		st.Members = append(st.Members, row)
	}
	st.Links = b.links(a, v, traffic)
	b.mu.Lock()
	st.Curve, st.Seq = b.st.Curve, b.st.Seq+1
	b.st = st
	b.mu.Unlock()
}

// links are the overlay's links over the live members: this node's with
// their traffic and path, the others' as PathUnknown.
func (b *LiveBoard) links(a *Daemon, v CoreView, traffic map[string]PeerTraffic) []liveview.Link {
	live := a.n.Live()
	slices.Sort(live)
	var out []liveview.Link
	seen := map[string]bool{}
	add := func(from, to string) {
		l := liveview.Link{From: from, To: to, Path: liveview.PathUnknown}
		if from == a.self {
			p, _ := a.peerOf(to)
			t := traffic[p.String()]
			l.Path, l.BytesSent, l.BytesReceived = a.net.PathTo(p), t.BytesSent, t.BytesReceived
			l.MessagesSent, l.MessagesReceived, l.CompressionRatio = t.MessagesSent, t.MessagesReceived, v.CompressionRatio
			seen[to] = true
		}
		out = append(out, l)
	}
	if a.cfg.Topology == "full" {
		for _, m := range live {
			if m != a.self {
				add(a.self, m)
			}
		}
	} else {
		if b.overlay == nil || !slices.Equal(live, b.overlayOf) {
			b.overlay, b.overlayOf = halton.Build(live), live
		}
		for _, m := range live {
			for _, to := range b.overlay.Out(m) {
				add(m, to)
			}
		}
	}
	// Members this node trades updates with off the overlay (answers to
	// sync requests, a member on its way out).
	for _, m := range v.Members {
		if p, err := a.peerOf(m); err == nil && m != a.self && !seen[m] && traffic[p.String()].MessagesSent+traffic[p.String()].MessagesReceived > 0 {
			add(a.self, m)
		}
	}
	return out
}

// point adds a curve point; it runs on the daemon's loop.
func (b *LiveBoard) point(p liveview.Point) {
	b.mu.Lock()
	b.st.Curve = append(b.st.Curve, p)
	b.st.Seq++
	b.mu.Unlock()
}

// reasonCounts is a count by rejection reason keyed by the reasons' names,
// as the live view's state holds them.
func reasonCounts(counts map[node.RejectReason]uint64) map[string]uint64 {
	named := make(map[string]uint64, len(counts))
	for reason, n := range counts {
		named[string(reason)] += n
	}
	return named
}
