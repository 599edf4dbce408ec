package node

import (
	"bytes"
	"errors"
	"hash/maphash"
	"slices"

	"github.com/sketchmesh/sketchmesh/codec"
	"github.com/sketchmesh/sketchmesh/dataset"
	"github.com/sketchmesh/sketchmesh/model"
)

// Router decides the overlay: to which next hops a node forwards an update.
// Forward(origin, origin) lists where the origin sends its own update.
type Router interface {
	Forward(origin, at string) []string
}

// ForwardAppender is a Router that can append the next hops to a slice
// instead: a node routes every update it takes, and a slice made for each
// was one allocation per member and update.
type ForwardAppender interface {
	AppendForward(dst []string, origin, at string) []string
}

// FullMesh is the Router in which every origin sends its update to every
// other member directly and nobody relays.
type FullMesh struct{ members []string }

// NewFullMesh returns the full-mesh router over members.
func NewFullMesh(members []string) FullMesh {
	m := slices.Clone(members)
	slices.Sort(m)
	return FullMesh{members: slices.Compact(m)}
}

// Forward implements Router.
func (f FullMesh) Forward(origin, at string) []string {
	if origin != at {
		return nil
	}
	return f.AppendForward(make([]string, 0, len(f.members)), origin, at)
}

// AppendForward implements ForwardAppender.
func (f FullMesh) AppendForward(dst []string, origin, at string) []string {
	if origin != at {
		return dst
	}
	for _, m := range f.members {
		if m != at {
			dst = append(dst, m)
		}
	}
	return dst
}

// Config configures one node core.
type Config struct {
	// ID is this node's member id (a libp2p peer id in a real mesh).
	ID string
	// Members is every member of the mesh, this node included.
	Members []string
	// Model, Optimizer and Codec define what is trained and how updates
	// are encoded. Every member must use the same Model configuration.
	Model     *model.Model
	Optimizer model.Optimizer
	Codec     codec.Codec
	// Tracer, when set, is told of every update the view takes and every
	// input the node refuses, as it happens (see Tracer).
	Tracer Tracer
	// ErrorFeedback carries what the codec lost into the next update.
	ErrorFeedback bool
	// Staleness is the SSP bound s; 0 is bulk-synchronous.
	Staleness int
	// Iterations is how many optimizer steps this node takes.
	Iterations uint64
	// LocalSteps is H, the optimizer steps the node takes on its own data
	// between two exchanges (see localsteps.go); 0 means 1. The clock counts
	// exchanges.
	LocalSteps int
	// Outer is the outer step applied to an exchange's accumulated change
	// (OuterSGD when empty; the command line defaults to OuterAdaptive) and
	// OuterRate its rate (0 means 1).
	Outer     OuterKind
	OuterRate float64
	// BudgetBytes bounds the frame of one update; a larger one is cut to
	// its keys of highest Priority (see priority.go). 0 is no bound.
	BudgetBytes int
	Priority    PriorityMode
	// BatchSize is the number of rows in one mini-batch.
	BatchSize int
	// Seed makes mini-batch sampling reproducible.
	Seed uint64
	// Shard is this node's training data.
	Shard []dataset.Row
	// Batches, when set, gives the mini-batches instead of sampling Shard
	// (data larger than memory, such as a dataset.Stream); Shard may then
	// be empty. It must be deterministic for runs to replay.
	Batches BatchSource
	// Router decides relaying; nil means a full mesh over Members.
	Router Router
	// Factors selects sufficient factor broadcasting (package sfb) for
	// softmax models: FactorsOff sends the matrix delta, FactorsAlways the
	// factors, FactorsAuto whichever encodes smaller, frame by frame.
	Factors FactorMode
	// MaxUpdateNorm bounds the norm of an incoming factor update (Σ‖b‖·‖c‖);
	// 0 means no bound. Updates above it are rejected.
	MaxUpdateNorm float64
	// DecodeCache, when set, shares decoded frames between nodes driven by
	// one goroutine, such as a simulator's: every receiver decodes the same
	// bytes to the same update, so P receivers need one decode, not P.
	DecodeCache *DecodeCache
	// SharedRows, when set, holds the committed view of the nodes driven
	// by one goroutine, such as a simulator's: nodes that committed the
	// same updates share one copy of it, computed once (see RowStore).
	// Nil in production.
	SharedRows *RowStore
	// Scratch, when set, is the gradient's scratch (model.Scratch), which
	// nodes driven by one goroutine may share: a node is done with it when
	// its training step returns. Nil gives the node its own.
	Scratch *model.Scratch
	// Slots, when set, gives origins their vector clock slots for the
	// nodes driven by one goroutine, such as a simulator's (see
	// SlotTable). Nil gives the node its own.
	Slots *SlotTable
	// Queues, when set, holds the emptied outbox queues of the nodes
	// driven by one goroutine, such as a simulator's (see QueuePool). Nil
	// gives the node its own.
	Queues *QueuePool
	// Start, when set, starts the node from a member's snapshot instead of
	// a zero view at clock 0 (see Snapshot); Members may then be empty.
	Start *Snapshot
	// Auth, when set, signs this node's updates and verifies every other
	// update before its frame is decoded (see Authenticator); nil is an
	// unsigned mesh.
	Auth Authenticator
	// Robust screens incoming updates for poisoned values (see Robust);
	// nil gets the defaults on first use. It holds state: one per node.
	Robust *Robust
	// Admission is a joiner's signed admission, which its hellos carry
	// (see Node.Admit); nil for a founding member.
	Admission *Admission
	// Sync tunes retransmission and the membership protocol's timing
	// (see SyncConfig); zero values take the defaults.
	Sync SyncConfig
	// Overlay, when set, builds the router over the live members after
	// the membership protocol changed them or a member announced another
	// site label (see Node.SetSite), from the labels the members announced
	// in their hellos (Node.Sites): once per change that the node routes
	// after, when it next routes. It must be a pure function of its
	// inputs, such as halton.BuildSites, so that members with the same view
	// of the membership relay along the same trees, and a late build
	// builds the same router.
	Overlay func(live []string, site map[string]string) Router
	// OverlayByKey, when set, is asked for the router before Overlay is,
	// with digests of the overlay's input (see OverlayKey) kept up to date
	// as the membership changes, in O(1) for a label. A driver whose cores
	// share overlays (the simulator) returns the router it built for an
	// equal input, or nil to have Overlay build it. Nil in production.
	OverlayByKey func(key OverlayKey) Router
	// OverlayBuilt, when set, is told each router Overlay built, with its
	// key.
	OverlayBuilt func(key OverlayKey, r Router)
}

// OverlayKey digests what Config.Overlay builds from: the live members
// that are not leaving (Members), the same with each one's label
// (Labelled), and how many of them have none (Unlabelled). A builder that
// reads no labels unless every member has one (halton.BuildSites) builds
// the same router for the same Members while Unlabelled > 0, as a mesh
// starting does until each member's first hello is in.
type OverlayKey struct {
	Members, Labelled uint64
	Unlabelled        int
}

// DecodeCache remembers what recent frames and membership messages decode
// to. Decoding is a pure function of the bytes and of the model's shape,
// so a cache may be shared by nodes with the same Model and MaxUpdateNorm.
// It is not safe for concurrent use, and what it returns is shared: nodes
// only read it.
//
// Frames are found by a 128-bit hash of their bytes under seeds of the
// cache's own (frameKey), not by the bytes: every node of a simulated
// mesh looks up every frame, P² lookups an iteration that nearly all hit,
// and comparing each frame with the cached copy was most of the cache's
// cost. Two distinct frames in one cache share a key with a chance of about
// n²/2¹²⁹ for n frames, far below anything a run can observe; the cache
// is for cores that trust each other's frames alike (one simulator), not
// for a node facing peers.
type DecodeCache struct {
	entries map[frameKey]*decoded
	fifo    []frameKey
	seeds   [2]maphash.Seed
	limit   int
	// announcements hold what recent membership messages decode to: a
	// member's hello goes to every other node, and at a thousand members
	// decoding each copy was a twentieth of a simulation's time.
	announcements    map[string]decodedAnnouncement
	announcementFIFO []string
	// recent[q] holds the entries of the latest frames of the origin of
	// slot q, by clock: lookupAt finds a frame there before the map.
	recent [][recentWays]recentFrame
}

// recentFrame is one entry of DecodeCache.recent: a frame of clock, its
// key and what it decodes to.
type recentFrame struct {
	clock uint64
	key   frameKey
	d     *decoded
}

// recentWays is how many clocks of one origin DecodeCache.recent holds:
// the few a staleness bound lets run ahead at once.
const recentWays = 4

// decodedAnnouncement is what one membership message decodes to. Its
// slices are shared by every node that reads it: nodes copy what they
// keep (memberInfo.addrs) and write none of them.
type decodedAnnouncement struct {
	a   Announcement
	err error
}

type decoded struct {
	u      *codec.Sparse
	reason RejectReason
	// norm is u's L2 norm, which every node's screen reads (Robust.check).
	norm float64
	// frame is a copy of the frame that the nodes keeping it for
	// retransmission share, instead of a copy each (Node.keep), and kept
	// their entries for it, each made by the first to keep it: one per
	// origin, clock and signature the frame came with. Members that train
	// on the same rows send the same frame at the same clock (a simulated
	// mesh larger than its data set), and with one entry per frame every
	// core made one of its own for every such update but the first.
	frame []byte
	kept  []*keptUpdate
}

// maxKeptPerFrame bounds decoded.kept: past it, entries are made for
// each node that keeps the update, as without a cache.
const maxKeptPerFrame = 8

// NewDecodeCache returns a cache of the last limit distinct frames.
func NewDecodeCache(limit int) *DecodeCache {
	return &DecodeCache{entries: make(map[frameKey]*decoded, limit), limit: max(limit, 1),
		seeds: [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}}
}

// frameKey is what a DecodeCache finds a frame by: its length and two
// 64-bit hashes of its bytes.
type frameKey struct {
	len  int
	hash [2]uint64
}

func (c *DecodeCache) key(frame []byte) frameKey {
	return frameKey{len(frame), [2]uint64{maphash.Bytes(c.seeds[0], frame), maphash.Bytes(c.seeds[1], frame)}}
}

func (c *DecodeCache) get(frame []byte) *decoded { return c.entries[c.key(frame)] }

// lookupAt is get, which also returns frame's key for put on a miss, for
// the frame of the update of clock from the origin of slot q (-1 for
// none): the entry is first looked for among that
// origin's recent frames, an index and one comparison of keys, where the
// map's probe missed the processor's caches (at P = 10,000 it was a tenth
// of a simulator's time, for every update every core received). Only the
// key decides, there as in the map: a frame equal in key is the same frame
// (DecodeCache.key), whatever the slot's table.
func (c *DecodeCache) lookupAt(frame []byte, q int, clock uint64) (*decoded, frameKey) {
	key := c.key(frame)
	if q >= 0 && q < len(c.recent) {
		if r := &c.recent[q][clock%recentWays]; r.d != nil && r.clock == clock && r.key == key {
			return r.d, key
		}
	}
	d := c.entries[key]
	if d != nil {
		c.remember(q, clock, key, d)
	}
	return d, key
}

// remember records d, of key, as the frame of clock of the origin of slot
// q (none for q < 0).
func (c *DecodeCache) remember(q int, clock uint64, key frameKey, d *decoded) {
	if q < 0 {
		return
	}
	c.recent = reach(c.recent, q)
	c.recent[q][clock%recentWays] = recentFrame{clock: clock, key: key, d: d}
}

// announcement returns DecodeAnnouncement(data), decoding data only when
// the cache does not hold it.
func (c *DecodeCache) announcement(data []byte) (Announcement, error) {
	if d, ok := c.announcements[string(data)]; ok {
		return d.a, d.err
	}
	a, err := DecodeAnnouncement(data)
	if c.announcements == nil {
		c.announcements = make(map[string]decodedAnnouncement, c.limit)
	}
	key := string(data)
	c.announcementFIFO = remember(c.announcements, c.announcementFIFO, c.limit, key)
	c.announcements[key] = decodedAnnouncement{a, err}
	return a, err
}

// remember appends key to fifo, the keys of entries in the order they
// came, first forgetting the oldest entry when fifo holds limit keys.
func remember[K comparable, V any](entries map[K]V, fifo []K, limit int, key K) []K {
	if len(fifo) >= limit {
		delete(entries, fifo[0])
		fifo = fifo[1:]
	}
	return append(fifo, key)
}

// kept returns the entry the nodes keep for u, or nil when the cache does
// not hold u's frame.
func (c *DecodeCache) kept(u Update) *keptUpdate {
	if d := c.get(u.Frame); d != nil {
		return d.keep(u)
	}
	return nil
}

// keep returns the entry the nodes keep for u, whose frame is d's.
func (d *decoded) keep(u Update) *keptUpdate {
	for _, k := range d.kept {
		if k.clock == u.Clock && k.origin == u.Origin && bytes.Equal(k.sig, u.Sig) {
			return k
		}
	}
	k := &keptUpdate{origin: u.Origin, clock: u.Clock, frame: d.frame, sig: slices.Clone(u.Sig)}
	if len(d.kept) < maxKeptPerFrame {
		d.kept = append(d.kept, k)
	}
	return k
}

// put adds d as what frame, of key key, decodes to and returns the
// cache's entry.
func (c *DecodeCache) put(key frameKey, frame []byte, d decoded) *decoded {
	c.fifo = remember(c.entries, c.fifo, c.limit, key)
	d.frame = slices.Clone(frame)
	e := &d
	c.entries[key] = e
	return e
}

// FactorMode selects how a softmax node sends its updates.
type FactorMode string

// The factor modes.
const (
	FactorsOff    FactorMode = "off"
	FactorsAuto   FactorMode = "auto"
	FactorsAlways FactorMode = "always"
)

// ErrFactorConfig is returned by New for a factor mode the model or the
// optimizer cannot honour.
var ErrFactorConfig = errors.New("sufficient factors need softmax, plain SGD, no L2 and no error feedback")

// Config returns the node's configuration.
func (n *Node) Config() Config { return n.cfg }
