package sim

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/sketchmesh/sketchmesh/node"
)

// Report is the outcome of a simulated run. Field names are part of the
// JSON interface and stay stable; new fields may be added.
type Report struct {
	Nodes      int    `json:"nodes"`
	Iterations int    `json:"iterations"`
	Seed       uint64 `json:"seed"`
	// Workers is how many workers ran the nodes: with Seed, what the
	// trace depends on.
	Workers  int    `json:"workers"`
	Topology string `json:"topology"`
	// Sites is how many sites the initial nodes' overlay groups them into
	// once their site labels are heard: 1 for the flat overlay and the
	// full mesh (Config.Sites).
	Sites int `json:"sites"`
	// MeanHops is the mean number of hops from an origin to a receiver;
	// Diameter the most (the initial overlay's).
	MeanHops  float64 `json:"mean_hops"`
	Diameter  int     `json:"diameter"`
	Staleness int     `json:"staleness"`
	Network   string  `json:"network"`
	Model     string  `json:"model"`
	Optimizer string  `json:"optimizer"`
	Codec     string  `json:"codec"`
	Dataset   string  `json:"dataset"`
	Scenario  string  `json:"scenario,omitempty"`
	// TraceHash identifies the run's event history (see Run): equal
	// for equal configurations and seeds.
	TraceHash string `json:"trace_hash"`
	Events    uint64 `json:"events"`
	// WallSeconds is the real time Run took, building the nodes and
	// the final evaluation included; SimulatedSeconds is the virtual time
	// at which every live node was done (or the run stopped).
	WallSeconds      float64 `json:"wall_seconds"`
	SimulatedSeconds float64 `json:"simulated_seconds"`
	// NodeIterations counts iterations run, over all nodes. Per second of
	// wall time it is the simulator's speed; per simulated second, the
	// simulated mesh's.
	NodeIterations                   uint64  `json:"node_iterations"`
	NodeIterationsPerSecond          float64 `json:"node_iterations_per_second"`
	SimulatedNodeIterationsPerSecond float64 `json:"simulated_node_iterations_per_second"`
	// HeapBytesPerNode is the live heap the run's state held at its end
	// (after a collection; the data sets, loaded before, excluded) per
	// node started: what one more simulated node costs in memory.
	HeapBytesPerNode float64 `json:"heap_bytes_per_node"`
	// Joined counts the members the scenario added (join).
	Joined int `json:"joined,omitempty"`
	// Rejoined counts the nodes that fell behind the frame history (a
	// partition longer than node.SyncConfig.History) and started again as
	// new incarnations from a snapshot (node/catchup.go).
	Rejoined int `json:"rejoined,omitempty"`
	// LiveNodes are the nodes alive at the end, members that joined
	// included; the test figures are means over them (accuracy absent for
	// regression).
	LiveNodes         int      `json:"live_nodes"`
	FinalTestLoss     float64  `json:"final_test_loss"`
	FinalTestAccuracy *float64 `json:"final_test_accuracy,omitempty"`
	// FinalTestAUC is the mean over live nodes of the test AUC (lr and
	// svm only, and only when the test rows hold both classes).
	FinalTestAUC *float64 `json:"final_test_auc,omitempty"`
	// Staleness of reads, over every exchange start by a node live at the
	// time (a later local step reads the copy its exchange started from).
	StalenessObservedMax  uint64  `json:"staleness_observed_max"`
	StalenessObservedMean float64 `json:"staleness_observed_mean"`
	// Traffic per node-iteration run (nodes × iterations without faults):
	// every message put on a link, sync requests and answers included.
	MessagesPerNodePerIteration float64 `json:"messages_per_node_per_iteration"`
	BytesPerNodePerIteration    float64 `json:"bytes_per_node_per_iteration"`
	// MembershipMessages and MembershipBytes count the membership
	// protocol's messages (hellos, admits, leave notices and their
	// acknowledgements), which the two figures above leave out.
	MembershipMessages uint64 `json:"membership_messages"`
	// MessagesBy splits MessagesPerNodePerIteration by why a message
	// left: own_update (with the sender's own update, the relays and
	// answers held then included), window (a relay window closed), tick
	// (a tick with no window open), at_once (no relay window),
	// stall_sync_requests and anti_entropy_requests (sync requests; their
	// answers leave in the envelopes above) and membership_change (on a
	// join, rejoin or leave). Per node-iteration, like the total.
	MessagesBy map[string]float64 `json:"messages_by"`
	// SyncRequestsServed counts the sync requests the cores answered.
	SyncRequestsServed uint64 `json:"sync_requests_served"`
	MembershipBytes    uint64 `json:"membership_bytes"`
	MessagesTotal      uint64 `json:"messages_total"`
	BytesTotal         uint64 `json:"bytes_total"`
	// SyncRequests and SyncRequestBytes are the requests alone; resent
	// updates travel in ordinary envelopes and are counted in UpdatesResent.
	SyncRequests uint64 `json:"sync_requests"`
	// StallSyncs counts the times a node asked because it had waited at its
	// gate (node/asking.go; the rest of the requests are anti-entropy).
	StallSyncs       uint64 `json:"stall_syncs"`
	SyncRequestBytes uint64 `json:"sync_request_bytes"`
	UpdatesResent    uint64 `json:"updates_resent"`
	// BlockedSecondsPerNode is the mean over live nodes of the virtual time
	// spent with iterations left and the gate closed.
	BlockedSecondsPerNode float64 `json:"blocked_seconds_per_node"`
	// Dropped counts messages lost on links ("loss"), cut by a partition
	// ("partition"), addressed to a dead node or queued by one that
	// stopped ("dead"), or past a link's queue bound ("queue", see
	// Config.SendQueueBytes); Duplicated counts
	// extra copies delivered; Rejected the cores' rejections by reason, as
	// their Tracer counted them (cores a rejoin replaced included).
	Dropped    map[string]uint64 `json:"dropped"`
	Duplicated uint64            `json:"duplicated"`
	// EnvelopesReused counts the envelopes the cores wrote into the buffer
	// of one delivered before (node.QueuePool.Recycle).
	EnvelopesReused uint64                       `json:"envelopes_reused"`
	Rejected        map[node.RejectReason]uint64 `json:"rejected"`
	// RetainedFramesPerNode is the mean number of frames a node keeps for
	// retransmission at the end.
	RetainedFramesPerNode float64 `json:"retained_frames_per_node"`
	// ViewDigestsCompared counts the view digests the cores compared in
	// anti-entropy (node/digest.go); Divergences lists the first
	// MaxDivergencesListed of those that differed (their count is
	// Invariants.ViewDivergence).
	ViewDigestsCompared uint64            `json:"view_digests_compared"`
	Divergences         []Divergence      `json:"divergences,omitempty"`
	Invariants          Invariants        `json:"invariants"`
	Assertions          []AssertionResult `json:"assertions,omitempty"`
}

// Invariants are the properties every run must have, checked at the end.
type Invariants struct {
	// AppliedTwice is how many more updates the cores applied (on top of
	// those a joiner's snapshot held, node.Node.Ledger) than the distinct
	// updates they hold: must be 0.
	AppliedTwice uint64 `json:"applied_twice"`
	// MaxReadStaleness is the largest staleness of any read (in iterations,
	// against the members the reader counted live): must be at most s.
	MaxReadStaleness uint64 `json:"max_read_staleness"`
	// UndeliveredAfterHeal counts updates that some live node holds and
	// another lacks at the end: must be 0.
	UndeliveredAfterHeal uint64 `json:"undelivered_after_heal"`
	// FinishedBeforeLeaverUpdates counts, over the nodes up at the end,
	// the members that left whose updates up to their announced last clock
	// a node lacks although its failure detector never declared them dead:
	// must be 0.
	FinishedBeforeLeaverUpdates uint64 `json:"finished_before_leaver_updates"`
	// ViewDivergence counts the view digests that differed from the
	// answerer's own of the same row (node.SyncStats.ViewDivergence). It
	// is reported, not part of OK: it is 0 whenever the members agreed on
	// who was live while they committed the rows, but committed rows
	// legitimately differ between members whose membership views differed
	// at the time. A side of a partition that counts the other out (or a
	// member that no longer waits for a leaver, or for one it declared
	// dead) commits rows without the others' updates; when they arrive
	// later they are added to its rows after the rows that followed, so
	// its committed view at those rows differs from the view of a member
	// that had them in time, and its bits differ from then on. In the
	// membership scenario (testdata/scenarios/membership.txt, seed 1, s=0)
	// the side 5-7 of the split trains to the last clock without the other
	// side and receives the other side's updates only after the heal; at
	// row 24 it differs from the other side, and both differ from a member
	// that committed rows without a leaver's last updates. A nonzero count
	// in a run without such faults means replicas drifted apart: a bug.
	ViewDivergence uint64 `json:"view_divergence"`
	// Stalled says the run stopped because nobody could make progress.
	Stalled bool `json:"stalled"`
	OK      bool `json:"ok"`
}

// Divergence is one view divergence a core reported: Node found that
// Member's digest of row Row differs from its own.
type Divergence struct {
	SimulatedSeconds float64 `json:"simulated_seconds"`
	Node             string  `json:"node"`
	Member           string  `json:"member"`
	Row              uint64  `json:"row"`
}

// MaxDivergencesListed bounds Report.Divergences.
const MaxDivergencesListed = 20

// AssertionResult is the outcome of a scenario's assert step.
type AssertionResult struct {
	Line int    `json:"line"`
	Step string `json:"step"`
	// Iteration is the slowest live node's clock when it was evaluated.
	Iteration        uint64  `json:"iteration"`
	SimulatedSeconds float64 `json:"simulated_seconds"`
	Value            float64 `json:"value"`
	Passed           bool    `json:"passed"`
}

// envelopesReused sums the workers' node.QueuePool.Reused.
func (s *sim) envelopesReused() uint64 {
	var n uint64
	for _, w := range s.workers {
		n += w.queues.Reused()
	}
	return n
}

func (s *sim) report(wall time.Duration) *Report {
	cfg := s.cfg
	t := s.total()
	slices.SortStableFunc(t.divergences, func(a, b Divergence) int { return cmp.Compare(a.SimulatedSeconds, b.SimulatedSeconds) })
	end := s.now
	if s.allDoneAt >= 0 {
		end = s.allDoneAt
	}
	r := &Report{
		Nodes:                cfg.Nodes,
		Iterations:           cfg.Iterations,
		Seed:                 cfg.Seed,
		Workers:              cfg.Workers,
		Topology:             cfg.Topology,
		MeanHops:             s.hops,
		Diameter:             s.diameter,
		Sites:                s.sites,
		Staleness:            cfg.Staleness,
		Network:              cfg.WAN.String(),
		Model:                string(cfg.Model),
		Optimizer:            string(cfg.Optimizer),
		Codec:                s.cdcName,
		Dataset:              cfg.Train.Name,
		TraceHash:            fmt.Sprintf("%016x", s.traceHash()),
		Events:               t.events,
		WallSeconds:          wall.Seconds(),
		SimulatedSeconds:     float64(end) / 1e9,
		NodeIterations:       t.nodeIters,
		StalenessObservedMax: t.staleMax,
		MessagesTotal:        t.msgs,
		BytesTotal:           t.bytes,
		SyncRequests:         t.syncMsgs,
		StallSyncs:           s.retiredStats.StallAsks,
		SyncRequestBytes:     t.syncBytes,
		Dropped:              t.dropped,
		Duplicated:           t.dups,
		EnvelopesReused:      s.envelopesReused(),
		Rejected:             t.rejected.Counts(),
		Assertions:           s.assertions,
		Joined:               s.joined,
		Rejoined:             s.rejoins,
		ViewDigestsCompared:  s.retiredStats.DigestsCompared,
		UpdatesResent:        s.retiredStats.UpdatesResent,
		SyncRequestsServed:   s.retiredStats.RequestsServed,
		Divergences:          t.divergences[:min(len(t.divergences), MaxDivergencesListed)],
	}
	if cfg.Faults != nil {
		r.Scenario = cfg.Faults.Name
	}
	if wall > 0 {
		r.NodeIterationsPerSecond = float64(t.nodeIters) / wall.Seconds()
	}
	if end > 0 {
		r.SimulatedNodeIterationsPerSecond = float64(t.nodeIters) / r.SimulatedSeconds
	}
	if t.reads > 0 {
		r.StalenessObservedMean = float64(t.staleSum) / float64(t.reads)
	}
	if t.nodeIters > 0 {
		r.MessagesPerNodePerIteration = float64(t.msgs) / float64(t.nodeIters)
		r.MembershipMessages, r.MembershipBytes = t.memberMsgs, t.memberBytes
		r.BytesPerNodePerIteration = float64(t.bytes) / float64(t.nodeIters)
		r.MessagesBy = map[string]float64{}
		for c, k := range t.sentBy {
			r.MessagesBy[causeNames[c]] = float64(k) / float64(t.nodeIters)
		}
	}
	var lossSum, accSum, aucSum, blocked float64
	retained := s.retiredStats.Retained
	hasAcc := true
	for _, n := range s.nodes {
		if n.core == nil {
			continue
		}
		ss := n.core.SyncStats()
		r.UpdatesResent += ss.UpdatesResent
		r.SyncRequestsServed += ss.RequestsServed
		r.ViewDigestsCompared += ss.DigestsCompared
		r.StallSyncs += ss.StallAsks
		retained += ss.Retained
		if !n.member() {
			continue
		}
		r.LiveNodes++
		met := n.core.Evaluate(s.test)
		lossSum += met.Loss
		accSum += met.Accuracy
		aucSum += met.AUC
		hasAcc = hasAcc && !math.IsNaN(met.Accuracy)
		blocked += float64(n.blocked)
	}
	live := float64(r.LiveNodes)
	r.FinalTestLoss = finite(lossSum / live)
	if hasAcc {
		r.FinalTestAccuracy = optional(accSum / live)
	}
	r.FinalTestAUC = optional(aucSum / live)
	r.BlockedSecondsPerNode = blocked / live / 1e9
	r.RetainedFramesPerNode = float64(retained) / float64(len(s.nodes))
	r.Invariants = Invariants{
		AppliedTwice:                s.appliedTwice(),
		MaxReadStaleness:            t.staleMax,
		UndeliveredAfterHeal:        s.undelivered(),
		Stalled:                     s.stalled,
		FinishedBeforeLeaverUpdates: s.finishedShort(),
		ViewDivergence:              uint64(len(t.divergences)),
	}
	inv := &r.Invariants
	inv.OK = inv.AppliedTwice == 0 && inv.MaxReadStaleness <= uint64(cfg.Staleness) && inv.UndeliveredAfterHeal == 0 && !inv.Stalled &&
		inv.FinishedBeforeLeaverUpdates == 0
	return r
}

// optional maps NaN (no such figure) to an absent JSON field.
func optional(v float64) *float64 {
	if math.IsNaN(v) {
		return nil
	}
	return &v
}
