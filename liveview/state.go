package liveview

// State is what the page draws and /api/state serves. Field names are part
// of the JSON interface and stay stable; new fields may be added.
type State struct {
	// Mode is "testnet" (every node's own view) or "run" (this node's view
	// of the mesh plus what its members announce).
	Mode string `json:"mode"`
	// Self is the member whose view this is (run); empty for a testnet.
	Self string `json:"self,omitempty"`
	// Iterations is where the run stops (0: it trains until stopped);
	// Staleness the SSP bound.
	Iterations uint64 `json:"iterations"`
	Staleness  int    `json:"staleness"`
	// ElapsedSeconds is the wall time since training started.
	ElapsedSeconds float64 `json:"elapsed_seconds"`
	// Done is set once the run is over; the state no longer changes.
	Done bool `json:"done"`
	// Seq counts the changes the producer made; the server sends a state
	// only when its encoding changed.
	Seq     uint64   `json:"seq"`
	Members []Member `json:"members"`
	Links   []Link   `json:"links"`
	// VectorClock is who holds whom up to which clock.
	VectorClock VectorClock `json:"vector_clock"`
	// Curve is the learning curve so far: the testnet's node 0, or this
	// node in a run.
	Curve []Point `json:"curve"`
	// Rejected counts refused frames and messages by reason, over the
	// nodes shown.
	Rejected map[string]uint64 `json:"rejected"`
}

// Member states.
const (
	StateLive      = "live"
	StateSuspected = "suspected"
	StateDead      = "dead"
	StateLeft      = "left"
)

// Member is one member as the view holds it.
type Member struct {
	ID string `json:"id"`
	// Name is what the page labels the member with: "node 3" in a
	// testnet, the end of its peer id in a run.
	Name string `json:"name"`
	// Peer and Incarnation split ID: a restarted node is the same peer and
	// a new incarnation.
	Peer        string `json:"peer"`
	Incarnation uint64 `json:"incarnation"`
	// State is live, suspected, dead or left.
	State string `json:"state"`
	// Clock is the member's own clock (testnet), or the clock it last
	// announced (run; this node's own for itself).
	Clock uint64 `json:"clock"`
	// Path is how this node reaches the member in a run: direct, relayed
	// or unreachable ("" for itself, and in a testnet, where links carry
	// their paths).
	Path string `json:"path,omitempty"`
	// Observed is set when the figures below were read from the member's
	// own core (every node of a testnet; only the node itself in a run).
	Observed bool `json:"observed"`
	// Staleness of the member's reads so far, in iterations.
	StalenessMax  uint64  `json:"staleness_max"`
	StalenessMean float64 `json:"staleness_mean"`
	// BlockedSeconds is time spent at the staleness gate, when known.
	BlockedSeconds float64 `json:"blocked_seconds"`
	// Bytes on the member's update streams, length prefixes included.
	BytesSent     uint64 `json:"bytes_sent"`
	BytesReceived uint64 `json:"bytes_received"`
	// CompressionRatio is 12 bytes per key/value pair over the bytes of the
	// member's own codec frames (0 before its first frame).
	CompressionRatio float64 `json:"compression_ratio"`
	// WaitingFor lists the live members whose updates the member's gate
	// waits for at its next iteration.
	WaitingFor []string `json:"waiting_for,omitempty"`
	// TrainLoss is the mean loss of the member's last mini-batch.
	TrainLoss float64 `json:"train_loss"`
}

// Path kinds of a link.
const (
	PathDirect      = "direct"
	PathRelayed     = "relayed"
	PathUnreachable = "unreachable"
	// PathUnknown is an overlay link between two other members of a run:
	// this node cannot see how it runs.
	PathUnknown = "unknown"
)

// Link is one overlay link, From's side of it.
type Link struct {
	From string `json:"from"`
	To   string `json:"to"`
	// Path is direct, relayed, unreachable, or unknown (see PathUnknown);
	// "" while no update stream ran on it yet.
	Path string `json:"path"`
	// Bytes and messages From sent to To and received from To on update
	// streams, length prefixes included.
	BytesSent        uint64 `json:"bytes_sent"`
	BytesReceived    uint64 `json:"bytes_received"`
	MessagesSent     uint64 `json:"messages_sent"`
	MessagesReceived uint64 `json:"messages_received"`
	// CompressionRatio is the ratio of From's own frames (relays forward
	// other origins' frames byte for byte, at their origins' ratio).
	CompressionRatio float64 `json:"compression_ratio"`
}

// VectorClock is the vector-clock matrix: Rows[i].Clocks[j] is the largest
// c such that holder Rows[i].Holder has every update of Origins[j] up to c.
type VectorClock struct {
	Origins []string   `json:"origins"`
	Rows    []ClockRow `json:"rows"`
}

// ClockRow is one holder's vector clock, in the order of Origins.
type ClockRow struct {
	Holder string   `json:"holder"`
	Clock  uint64   `json:"clock"`
	Clocks []uint64 `json:"clocks"`
}

// Point is one point of the learning curve. Accuracy and AUC are absent
// where the model has none.
type Point struct {
	Iteration    uint64   `json:"iteration"`
	WallSeconds  float64  `json:"wall_seconds"`
	BytesSent    uint64   `json:"bytes_sent"`
	TrainLoss    float64  `json:"train_loss"`
	TestLoss     float64  `json:"test_loss"`
	TestAccuracy *float64 `json:"test_accuracy,omitempty"`
	TestAUC      *float64 `json:"test_auc,omitempty"`
}

// Source offers the state to draw. LiveState is called by the server's
// one polling goroutine, at most Options.Rate times a second; it must not
// touch a node core, only a copy made on the core's goroutine.
type Source interface {
	LiveState() State
}
