package testnet

import (
	"math"
	"sync"
	"time"

	"github.com/sketchmesh/sketchmesh/codec"
	"github.com/sketchmesh/sketchmesh/mesh"
	"github.com/sketchmesh/sketchmesh/netmodel"
	"github.com/sketchmesh/sketchmesh/node"
)

// Report is the outcome of a run. Field names are part of the JSON interface
// and stay stable; new fields may be added.
type Report struct {
	Nodes        int     `json:"nodes"`
	Model        string  `json:"model"`
	Optimizer    string  `json:"optimizer"`
	Codec        string  `json:"codec"`
	Dataset      string  `json:"dataset"`
	TestDataset  string  `json:"test_dataset"`
	Iterations   int     `json:"iterations"`
	BatchPerNode int     `json:"batch_per_node"`
	Staleness    int     `json:"staleness"`
	WallSeconds  float64 `json:"wall_seconds"`
	// FinalTestLoss and FinalTestAccuracy are the means over nodes.
	FinalTestLoss     float64  `json:"final_test_loss"`
	FinalTestAccuracy *float64 `json:"final_test_accuracy,omitempty"`
	// FinalTestAUC is the mean over nodes of the test AUC (lr and svm, when
	// the test rows hold both classes).
	FinalTestAUC *float64 `json:"final_test_auc,omitempty"`
	// Bytes are counted on the update streams, length prefixes included,
	// without the membership announcements, which are counted apart.
	BytesSentTotal               uint64  `json:"bytes_sent_total"`
	BytesSentPerNodePerIteration float64 `json:"bytes_sent_per_node_per_iteration"`
	MessagesSentTotal            uint64  `json:"messages_sent_total"`
	MembershipMessagesTotal      uint64  `json:"membership_messages_total"`
	MembershipBytesTotal         uint64  `json:"membership_bytes_total"`
	// CompressionRatio is 12 bytes per pair (int32 key, float64 value) over
	// the bytes of the codec frames actually produced.
	CompressionRatio float64 `json:"compression_ratio"`
	// Frames of the nodes' own updates, by form: sufficient factors or the
	// (sparse) matrix delta.
	SFBFramesSent   uint64 `json:"sfb_frames_sent"`
	DeltaFramesSent uint64 `json:"delta_frames_sent"`
	// ViewsIdentical says whether all nodes ended with bit-identical views.
	ViewsIdentical bool `json:"views_identical"`
	// Topology is the overlay; LinksPerNode the mean number of peers a node
	// holds a connection to; MeanUpdateHops the mean hops from origin to
	// receiver along the overlay's broadcast trees.
	Topology string `json:"topology"`
	// Sites is how many sites the overlay groups nodes into: 1 for the
	// flat Halton overlay and the full mesh (see Config.Sites).
	Sites                       int     `json:"sites"`
	LinksPerNode                float64 `json:"links_per_node"`
	MessagesPerNodePerIteration float64 `json:"messages_per_node_per_iteration"`
	MeanUpdateHops              float64 `json:"mean_update_hops"`
	// WAN names the link profile; Stragglers and Slowdown the slow nodes.
	WAN        string  `json:"wan"`
	Stragglers int     `json:"stragglers"`
	Slowdown   float64 `json:"slowdown"`
	// IterationsPerSecond is iterations over wall time: the pace of the mesh.
	IterationsPerSecond float64 `json:"iterations_per_second"`
	// BlockedSecondsPerNode is the mean time a node waited at its staleness
	// gate for peers' updates.
	BlockedSecondsPerNode float64 `json:"blocked_seconds_per_node"`
	// LocalSteps is the optimizer steps a node took between two exchanges.
	LocalSteps int `json:"local_steps"`
	// BudgetBytes bounds one update's frame (0: no bound).
	BudgetBytes int `json:"budget_bytes"`
	// BudgetMeasured says each node's budget followed the throughput it
	// measured on its links (Config.BudgetFromLinks); BudgetBytesFinal
	// are their budgets at the end, in node order.
	BudgetMeasured   bool  `json:"budget_measured,omitempty"`
	BudgetBytesFinal []int `json:"budget_bytes_final,omitempty"`
	// Staleness of reads, in iterations: t − 1 − min over live q of V[q]
	// when a node starts iteration t.
	StalenessObservedMax  uint64                       `json:"staleness_observed_max"`
	StalenessObservedMean float64                      `json:"staleness_observed_mean"`
	Rejected              map[node.RejectReason]uint64 `json:"rejected"`
	PerNode               []NodeReport                 `json:"per_node"`
	// Curve is node 0's test loss and accuracy against iterations and time.
	Curve []CurvePoint `json:"curve"`
	// Interrupted is set when the run was stopped before its iterations
	// were done; the report then holds what the nodes had reached.
	Interrupted bool `json:"interrupted,omitempty"`
	// Stalled is set when no node's clock moved for Config.StallTimeout and
	// the run was ended without its iterations.
	Stalled bool `json:"stalled,omitempty"`
	// Attack is what a hostile peer did (Config.Attack), absent otherwise.
	Attack *AttackReport `json:"attack,omitempty"`
	// FinalView is node 0's parameter view at the end of the run, the model
	// its per-node figures were measured on; it is not part of the JSON.
	FinalView []float64 `json:"-"`
}

// NodeReport is one node's outcome.
type NodeReport struct {
	ID             string   `json:"id"`
	TrainRows      int      `json:"train_rows"`
	Clock          uint64   `json:"clock"`
	TestLoss       float64  `json:"test_loss"`
	TestAccuracy   *float64 `json:"test_accuracy,omitempty"`
	TestAUC        *float64 `json:"test_auc,omitempty"`
	BytesSent      uint64   `json:"bytes_sent"`
	MessagesSent   uint64   `json:"messages_sent"`
	UpdatesApplied uint64   `json:"updates_applied"`
	UpdatesRelayed uint64   `json:"updates_relayed"`
	BlockedSeconds float64  `json:"blocked_seconds"`
}

// CurvePoint is one progress report.
type CurvePoint struct {
	Iteration    uint64   `json:"iteration"`
	WallSeconds  float64  `json:"wall_seconds"`
	TrainLoss    float64  `json:"train_loss"`
	TestLoss     float64  `json:"test_loss"`
	TestAccuracy *float64 `json:"test_accuracy,omitempty"`
	TestAUC      *float64 `json:"test_auc,omitempty"`
	BytesSent    uint64   `json:"bytes_sent"`
}

func curvePoint(p Progress) CurvePoint {
	return CurvePoint{
		Iteration:    p.Iteration,
		WallSeconds:  p.Elapsed.Seconds(),
		TrainLoss:    p.TrainLoss,
		TestLoss:     p.TestLoss,
		TestAccuracy: optional(p.TestAccuracy),
		TestAUC:      optional(p.TestAUC),
		BytesSent:    p.BytesSent,
	}
}

// optional maps NaN (no such figure) to an absent JSON field.
func optional(v float64) *float64 {
	if math.IsNaN(v) {
		return nil
	}
	return &v
}

func buildReport(cfg Config, cdc codec.Codec, router netmodel.Router, members []*member, rejected map[node.RejectReason]uint64, curve []CurvePoint, wall time.Duration) *Report {
	r := &Report{
		Nodes:          cfg.Nodes,
		Model:          string(cfg.Model),
		Optimizer:      string(cfg.Optimizer),
		Codec:          cdc.Name(),
		Dataset:        cfg.Train.Name,
		TestDataset:    cfg.Test.Name,
		Iterations:     cfg.Iterations,
		BatchPerNode:   members[0].core.Config().BatchSize,
		Staleness:      cfg.Staleness,
		LocalSteps:     max(cfg.Exchange.LocalSteps, 1),
		BudgetBytes:    cfg.Exchange.BudgetBytes,
		BudgetMeasured: cfg.BudgetFromLinks,
		WAN:            cfg.WAN.Name,
		Topology:       cfg.Topology,
		MeanUpdateHops: router.MeanHops(),
		Sites:          netmodel.SiteCount(router),
		Stragglers:     cfg.Stragglers,
		Slowdown:       cfg.Slowdown,
		WallSeconds:    wall.Seconds(),
		Rejected:       rejected,
		Curve:          curve,
	}
	var lossSum, accSum, aucSum float64
	var frameBytes, pairs, staleSum, reads uint64
	var blocked, links float64
	hasAcc := true
	for _, m := range members {
		met := m.core.Evaluate(cfg.Test.Rows)
		st := m.core.Stats()
		if cfg.BudgetFromLinks {
			r.BudgetBytesFinal = append(r.BudgetBytesFinal, m.core.Budget())
		}
		tr := updateTraffic(m.net.Traffic())
		r.PerNode = append(r.PerNode, NodeReport{
			ID:             m.core.ID(),
			TrainRows:      m.trainRows(),
			Clock:          st.Clock,
			TestLoss:       met.Loss,
			TestAccuracy:   optional(met.Accuracy),
			TestAUC:        optional(met.AUC),
			BytesSent:      tr.BytesSent,
			MessagesSent:   tr.MessagesSent,
			UpdatesApplied: st.UpdatesApplied,
			UpdatesRelayed: st.UpdatesRelayed,
			BlockedSeconds: m.run.Blocked.Seconds(),
		})
		lossSum += met.Loss
		accSum += met.Accuracy
		aucSum += met.AUC
		hasAcc = hasAcc && !math.IsNaN(met.Accuracy)
		r.BytesSentTotal += tr.BytesSent
		r.MessagesSentTotal += tr.MessagesSent
		r.MembershipMessagesTotal += tr.MembershipMessagesSent
		r.MembershipBytesTotal += tr.MembershipBytesSent
		frameBytes += st.FrameBytes
		r.SFBFramesSent += st.FactorFramesSent
		r.DeltaFramesSent += st.DeltaFramesSent
		pairs += st.PairsEncoded
		r.StalenessObservedMax = max(r.StalenessObservedMax, st.StalenessMax)
		staleSum += st.StalenessSum
		reads += st.Reads
		blocked += m.run.Blocked.Seconds()
		if m.links > 0 {
			links += float64(m.links)
		} else {
			links += float64(len(m.host.Libp2p().Network().Peers()))
		}
	}
	n := float64(len(members))
	r.FinalTestLoss = lossSum / n
	if hasAcc {
		r.FinalTestAccuracy = optional(accSum / n)
	}
	r.FinalTestAUC = optional(aucSum / n)
	r.BytesSentPerNodePerIteration = float64(r.BytesSentTotal) / n / float64(cfg.Iterations)
	if frameBytes > 0 {
		r.CompressionRatio = 12 * float64(pairs) / float64(frameBytes)
	}
	r.ViewsIdentical = viewsIdentical(members)
	r.BlockedSecondsPerNode = blocked / n
	r.LinksPerNode = links / n
	r.MessagesPerNodePerIteration = float64(r.MessagesSentTotal) / n / float64(cfg.Iterations)
	if reads > 0 {
		r.StalenessObservedMean = float64(staleSum) / float64(reads)
	}
	r.IterationsPerSecond = float64(cfg.Iterations) / wall.Seconds()
	return r
}

// updateTraffic is a host's traffic with the membership announcements taken
// out of the totals (they stay in the Membership fields): the update
// figures are what the codec and the overlay are judged by.
func updateTraffic(tr mesh.TrafficStats) mesh.TrafficStats {
	tr.BytesSent -= tr.MembershipBytesSent
	tr.MessagesSent -= tr.MembershipMessagesSent
	return tr
}

// rejectTally is the Tracer of every member core: the one tally of their
// refusals that the report and the attack report read. The cores run on
// goroutines of their own, so it locks.
type rejectTally struct {
	mu    sync.Mutex
	tally node.RejectTally
}

func (*rejectTally) Apply(string, uint64) {}

func (t *rejectTally) Reject(reason node.RejectReason) {
	t.mu.Lock()
	t.tally.Reject(reason)
	t.mu.Unlock()
}

func (t *rejectTally) counts() map[node.RejectReason]uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.tally.Counts()
}
