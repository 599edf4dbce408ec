package testnet

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/sketchmesh/sketchmesh/codec"
	"github.com/sketchmesh/sketchmesh/mesh"
	"github.com/sketchmesh/sketchmesh/node"
)

// The hostile peer.
//
// With Config.Attack set, a hand-written hostile peer attacks the testnet
// while it trains: a real libp2p host speaking the update protocol, with no
// node core, that sends what the kind names. For every kind but nopsk and
// notallowed it is a member of the mesh (on the allow list, holding the
// PSK, with a signing key of its own), the strongest position short of
// stealing an honest member's key: it sits on the overlay as a leaf, so every
// honest origin sends it its updates, and it owes the mesh one update per
// clock like any member. Each node's update of clock c that reaches it
// triggers its own update of clock c to that node, plus the attack.
//
//	garbage     random bytes: as messages, and as raw stream bytes
//	oversized   a length prefix above the limit, a message cut short, and
//	            its own updates with truncated frames
//	headers     envelopes with hostile msgpack headers (array32, map32,
//	            str32, bin32 lengths of 0xffffffff, lengths past the end)
//	forged      other members' updates moved to another clock, altered,
//	            stripped of their signature, or signed with its own key
//	replay      old updates of every origin that the victim holds,
//	            resent in reverse order
//	nan         its own updates hold NaN
//	norm        its own updates are honest updates scaled by −1000 (odd
//	            clocks) and by −5, within the norm bound (even clocks)
//	flood       well-formed signed envelopes as fast as the network takes
//	            them, on extra streams: clocks far ahead, and replays
//	nopsk       an outsider without the PSK keeps trying to connect
//	notallowed  an outsider with the PSK, not on the allow list, keeps
//	            trying to connect and send
//
// An attack run is a hardened mesh: signed updates, a PSK and an allow list
// of the members.

// quietMember is the baseline of the member kinds: a member that sends its
// empty update of every clock and nothing else. A member, hostile or not,
// changes the mesh (every node scales its update by 1/P), so the effect of
// an attack is measured against the same mesh with a quiet member.
const quietMember = "quiet"

// AttackKinds lists the hostile peer's kinds.
var AttackKinds = append([]string{"garbage", "oversized", "headers", "forged", "replay", "nan", "norm", "flood", "nopsk", "notallowed"}, membershipKinds...)

// memberAttack reports whether kind's attacker is a member of the mesh.
func memberAttack(kind string) bool { return kind != "" && kind != "nopsk" && kind != "notallowed" }

// AttackReport is what an attack did. Field names are part of the JSON
// interface.
type AttackReport struct {
	Kind string `json:"kind"`
	// Member says whether the attacker was a member of the mesh.
	Member bool `json:"member"`
	// Tried counts hostile messages, streams or connection attempts, each
	// once per honest node it was aimed at.
	Tried uint64 `json:"tried"`
	// Rejected counts, by reason, what honest nodes refused (node reasons,
	// and the host's oversized and truncated), and for an outsider the
	// attempts that failed (no_psk, not_allowed).
	Rejected map[string]uint64 `json:"rejected"`
	// AppliedInvalid counts hostile updates that honest nodes applied; it
	// must be 0.
	AppliedInvalid uint64 `json:"applied_invalid"`
	// AppliedValid counts the attacker's valid updates honest nodes applied
	// (a member owes one update per clock; norm's within-bound updates
	// count here), out of ValidSent.
	AppliedValid uint64 `json:"applied_valid"`
	ValidSent    uint64 `json:"valid_sent"`
	// GaterRefusals counts the honest hosts' allow-list refusals (one
	// attempt may be refused more than once: the dial and the handshake).
	GaterRefusals uint64 `json:"gater_refusals"`
	// Throttled counts messages the per-peer rate limit held back.
	Throttled uint64 `json:"throttled"`
	// Panics counts recovered panics in honest hosts' stream handlers.
	Panics uint64 `json:"panics"`
	// Clipped counts updates honest nodes' centered clipping changed.
	Clipped uint64 `json:"clipped"`
	// HonestAccuracy is the honest nodes' mean final test accuracy;
	// BaselineAccuracy that of the baseline run (see Baseline), when
	// measured; AccuracyDeltaPoints the difference in percentage points.
	HonestAccuracy      *float64 `json:"honest_accuracy,omitempty"`
	BaselineAccuracy    *float64 `json:"baseline_accuracy,omitempty"`
	AccuracyDeltaPoints *float64 `json:"accuracy_delta_points,omitempty"`
	// PeakHeapBytes is the process's peak heap in use during the run,
	// sampled every 20 ms; MemoryBoundBytes is 2 × the baseline's peak +
	// 64 MiB, when a baseline ran.
	PeakHeapBytes         uint64 `json:"peak_heap_bytes"`
	BaselinePeakHeapBytes uint64 `json:"baseline_peak_heap_bytes,omitempty"`
	MemoryBoundBytes      uint64 `json:"memory_bound_bytes,omitempty"`
	WithinMemoryBound     bool   `json:"within_memory_bound"`
	// Stalled is true when some honest node did not reach its last clock
	// (no node's clock moved for the testnet's stall timeout).
	Stalled bool `json:"stalled"`
	// ForgedMembers counts, over the honest nodes, members no rule lets
	// the attacker add (it must be 0); MadeUpAdmitted the joiners it made
	// up that honest nodes admitted (a member may admit, at most
	// node.MaxSilentAdmits that never speak).
	ForgedMembers  uint64 `json:"forged_members"`
	MadeUpAdmitted uint64 `json:"made_up_admitted"`
}

// RunAttack runs the testnet twice with the same seed, first with the
// baseline of cfg.Attack (Baseline), then with the hostile peer, and
// returns the attacked run's report with the comparison filled in.
func RunAttack(ctx context.Context, cfg Config) (*Report, error) {
	if !slices.Contains(AttackKinds, cfg.Attack) {
		return nil, fmt.Errorf("unknown attack %q (want one of %v)", cfg.Attack, AttackKinds)
	}
	baseRep, basePeak, err := runSampled(ctx, Baseline(cfg))
	if err != nil {
		return nil, fmt.Errorf("run without the attacker: %w", err)
	}
	return RunAttackAgainst(ctx, cfg, baseRep, basePeak)
}

// Baseline returns the run an attack is compared with: the same hardened
// mesh with a quiet member in the attacker's place when the attacker is a
// member, and without it otherwise.
func Baseline(cfg Config) Config {
	base := cfg
	base.Attack = ""
	if memberAttack(cfg.Attack) {
		base.Attack = quietMember
	}
	base.Progress = nil
	base.JoinAt = cfg.joinAt()
	hardenForAttack(&base)
	return base
}

// RunAttackAgainst runs the attack of cfg and compares it with a baseline
// report (and its peak heap, 0 if unknown) of the same hardened run
// without the attacker.
func RunAttackAgainst(ctx context.Context, cfg Config, baseline *Report, baselinePeak uint64) (*Report, error) {
	rep, peak, err := runSampled(ctx, cfg)
	if err != nil {
		return nil, err
	}
	a := rep.Attack
	a.PeakHeapBytes = peak
	a.WithinMemoryBound = true
	if baselinePeak > 0 {
		a.BaselinePeakHeapBytes = baselinePeak
		a.MemoryBoundBytes = 2*baselinePeak + 64<<20
		a.WithinMemoryBound = peak <= a.MemoryBoundBytes
	}
	a.HonestAccuracy = rep.FinalTestAccuracy
	if baseline != nil && baseline.FinalTestAccuracy != nil && rep.FinalTestAccuracy != nil {
		b := *baseline.FinalTestAccuracy
		d := 100 * (*rep.FinalTestAccuracy - b)
		a.BaselineAccuracy, a.AccuracyDeltaPoints = &b, &d
	}
	return rep, nil
}

// runSampled runs cfg while sampling the process's heap.
func runSampled(ctx context.Context, cfg Config) (*Report, uint64, error) {
	runtime.GC()
	var peak atomic.Uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peak.Load() {
				peak.Store(ms.HeapInuse)
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	rep, err := Run(ctx, cfg)
	close(done)
	wg.Wait()
	return rep, peak.Load(), err
}

// hardenForAttack turns on what an attack run tests: signed updates, a PSK
// and an allow list.
func hardenForAttack(c *Config) {
	c.Sign = true
	c.AllowList = true
	if c.PSK == nil {
		// Derived from the seed, so runs stay reproducible.
		var seed [32]byte
		binary.LittleEndian.PutUint64(seed[:], c.Seed)
		copy(seed[8:], "sketchmesh-testnet-psk")
		psk := make([]byte, 32)
		_, _ = rand.NewChaCha8(seed).Read(psk)
		c.PSK = psk
	}
}

// attackerKey is the hostile peer's identity, derived from the seed apart
// from every node's.
func attackerKey(seed uint64) (crypto.PrivKey, error) { return nodeKey(seed, 1<<20) }

// allIDs returns the member ids a run's hosts will have (and the
// attacker's, when it is a member), derived from the seed.
func (c *Config) allIDs() ([]peer.ID, error) {
	ids := make([]peer.ID, 0, c.Nodes+1)
	for i := 0; i < c.Nodes; i++ {
		key, err := nodeKey(c.Seed, i)
		if err != nil {
			return nil, err
		}
		id, err := peer.IDFromPrivateKey(key)
		if err != nil {
			return nil, fmt.Errorf("node %d: %w", i, err)
		}
		ids = append(ids, id)
	}
	if c.joinAt() > 0 {
		key, err := c.joinerKey()
		if err != nil {
			return nil, err
		}
		id, err := peer.IDFromPrivateKey(key)
		if err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	if memberAttack(c.Attack) {
		key, err := attackerKey(c.Seed)
		if err != nil {
			return nil, err
		}
		id, err := peer.IDFromPrivateKey(key)
		if err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// secureHost sets the PSK and the allow list of a node's host config.
func (c *Config) secureHost(hc *mesh.HostConfig) error {
	hc.PSK = c.PSK
	if !c.AllowList {
		return nil
	}
	ids, err := c.allIDs()
	if err != nil {
		return err
	}
	hc.Allow = mesh.NewAllowList(ids...)
	return nil
}

// nodeSecurity returns node i's authenticator (nil unless Sign) and screen.
func (c *Config) nodeSecurity(i int, id string) (node.Authenticator, *node.Robust, error) {
	robust, err := node.NewRobust(c.Robust)
	if err != nil {
		return nil, nil, err
	}
	if !c.Sign {
		return nil, robust, nil
	}
	key, err := nodeKey(c.Seed, i)
	if err != nil {
		return nil, nil, err
	}
	auth, err := mesh.NewKeyAuthenticator(c.meshName(), id, key)
	if err != nil {
		return nil, nil, fmt.Errorf("node %d: %w", i, err)
	}
	return auth, robust, nil
}

func (c *Config) meshName() string {
	if c.MeshName == "" {
		return "testnet"
	}
	return c.MeshName
}

// leafRouter is an overlay with one extra member as a leaf: every origin
// sends it its own update directly, nobody relays through it, and what it
// sends it sends to everyone itself.
type leafRouter struct {
	Router
	leaf string
}

func (l leafRouter) Forward(origin, at string) []string {
	if origin == l.leaf {
		return nil
	}
	hops := l.Router.Forward(origin, at)
	if origin == at {
		hops = append(slices.Clone(hops), l.leaf)
	}
	return hops
}

// attacker is the hostile peer.
type attacker struct {
	kind      string
	member    bool
	staleness uint64
	id        string
	host      *mesh.Host
	auth      *mesh.KeyAuthenticator
	victims   []*member
	log       *slog.Logger

	mu        sync.Mutex
	rng       *rand.Rand
	tried     uint64
	local     map[string]uint64 // refusals the attacker sees itself
	validSent map[string]uint64 // per victim
	sentClock map[string]uint64 // per victim: the last clock it sent it
	seen      map[string]map[uint64]node.Update
	keepalive map[string]node.Update // per victim: its last valid update
	// Membership kinds: the made-up identities, the victims' hellos.
	meshName     string
	made         map[int]madeUp
	hellos       map[string][][]byte
	reincarnated atomic.Bool
	// donor-lie: the model's size and the mesh's settings; the joiner's
	// peer id, when the run has one.
	params   int
	settings node.Settings
	joiner   string

	stopped chan struct{}
	wg      sync.WaitGroup
}

// startAttacker starts the hostile host of cfg.Attack (nil when none).
func startAttacker(ctx context.Context, cfg Config, victims []*member) (*attacker, error) {
	if cfg.Attack == "" {
		return nil, nil
	}
	key, err := attackerKey(cfg.Seed)
	if err != nil {
		return nil, err
	}
	hc := mesh.HostConfig{ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"}, Key: key, Logger: cfg.Logger}
	if cfg.Attack != "nopsk" {
		hc.PSK = cfg.PSK
	}
	h, err := mesh.NewHost(hc)
	if err != nil {
		return nil, fmt.Errorf("attacker: %w", err)
	}
	a := &attacker{
		kind: cfg.Attack, member: memberAttack(cfg.Attack), staleness: uint64(cfg.Staleness), id: h.ID(), host: h, victims: victims,
		log: cfg.Logger.With("attacker", cfg.Attack), rng: rand.New(rand.NewPCG(cfg.Seed, 0xa77ac)),
		local: map[string]uint64{}, validSent: map[string]uint64{}, sentClock: map[string]uint64{},
		seen: map[string]map[uint64]node.Update{}, keepalive: map[string]node.Update{},
		meshName: cfg.meshName(), made: map[int]madeUp{}, hellos: map[string][][]byte{},
		stopped: make(chan struct{}),
	}
	if cfg.joinAt() > 0 {
		key, err := cfg.joinerKey()
		if err != nil {
			_ = h.Close()
			return nil, err
		}
		p, err := peer.IDFromPrivateKey(key)
		if err != nil {
			_ = h.Close()
			return nil, err
		}
		a.joiner = p.String()
	}
	if a.kind == donorLie {
		mdl, err := NewModel(cfg.Model, cfg.L2, cfg.Train)
		if err != nil {
			_ = h.Close()
			return nil, err
		}
		a.params, a.settings = mdl.NumParams(), cfg.settings(mdl)
	}
	if a.member {
		if a.auth, err = mesh.NewKeyAuthenticator(cfg.meshName(), a.id, key); err != nil {
			_ = h.Close()
			return nil, err
		}
		for _, v := range victims {
			if err := h.Connect(ctx, addrInfo(v)); err != nil {
				_ = h.Close()
				return nil, fmt.Errorf("attacker: %w", err)
			}
		}
	}
	return a, nil
}

func addrInfo(m *member) peer.AddrInfo {
	return peer.AddrInfo{ID: m.host.Libp2p().ID(), Addrs: m.host.Libp2p().Addrs()}
}

// members returns the mesh's member ids: the nodes', and the attacker's
// when it is a member.
func (a *attacker) members(ids []string) []string {
	if a == nil || !a.member {
		return ids
	}
	return append(slices.Clone(ids), a.id)
}

// router puts a member attacker on the overlay as a leaf.
func (a *attacker) router(r Router) Router {
	if a == nil || !a.member {
		return r
	}
	return leafRouter{Router: r, leaf: a.id}
}

// start launches the attack; it runs until stop.
func (a *attacker) start(ctx context.Context) {
	if a == nil {
		return
	}
	run := func(f func(context.Context)) {
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			f(ctx)
		}()
	}
	switch {
	case a.kind == "nopsk" || a.kind == "notallowed":
		run(a.outsider)
	default:
		run(a.memberLoop)
		run(a.heartbeat)
		if a.kind == donorLie {
			a.serveLies(ctx)
		}
		if a.kind == "flood" {
			for _, v := range a.victims {
				run(func(ctx context.Context) { a.flood(ctx, v) })
			}
		}
	}
}

// stop ends the attack and closes the hostile host.
func (a *attacker) stop() {
	if a == nil {
		return
	}
	close(a.stopped)
	_ = a.host.Close()
	a.wg.Wait()
}

func (a *attacker) done(ctx context.Context) bool {
	select {
	case <-a.stopped:
		return true
	case <-ctx.Done():
		return true
	default:
		return false
	}
}

func (a *attacker) count(n int) {
	a.mu.Lock()
	a.tried += uint64(n)
	a.mu.Unlock()
}

// memberLoop answers each victim's update of clock c with the attacker's
// own update of clock c and the attack of its kind.
func (a *attacker) memberLoop(ctx context.Context) {
	for {
		select {
		case <-a.stopped:
			return
		case <-ctx.Done():
			return
		case in := <-a.host.Inbox():
			if node.IsAnnouncement(in.Data) {
				a.rememberHello(in.From, in.Data)
				continue
			}
			ups, err := node.DecodeEnvelope(in.Data)
			if err != nil {
				continue
			}
			for _, u := range ups {
				u = node.Update{Origin: u.Origin, Clock: u.Clock, Frame: bytes.Clone(u.Frame), Sig: bytes.Clone(u.Sig)}
				a.remember(u)
				if u.Origin != in.From {
					continue
				}
				a.mu.Lock()
				from := a.sentClock[in.From]
				if u.Clock > from {
					a.sentClock[in.From] = u.Clock
				}
				a.mu.Unlock()
				for c := from + 1; c <= u.Clock; c++ {
					a.attackClock(ctx, in.From, c)
				}
			}
		}
	}
}

// remember keeps the updates of the last 8 clocks of every origin.
func (a *attacker) remember(u node.Update) {
	a.mu.Lock()
	defer a.mu.Unlock()
	m := a.seen[u.Origin]
	if m == nil {
		m = map[uint64]node.Update{}
		a.seen[u.Origin] = m
	}
	m[u.Clock] = u
	delete(m, u.Clock-min(u.Clock, 8))
}

func (a *attacker) seenUpdate(origin string, clock uint64) (node.Update, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	u, ok := a.seen[origin][clock]
	return u, ok
}

// sign makes the attacker's own signed update of clock with frame.
func (a *attacker) sign(clock uint64, frame []byte) node.Update {
	sig, err := a.auth.Sign(a.id, clock, frame)
	if err != nil {
		a.log.Error("sign", "err", err)
	}
	return node.Update{Origin: a.id, Clock: clock, Frame: frame, Sig: sig}
}

func (a *attacker) send(to string, ups ...node.Update) {
	a.host.Send(to, node.EncodeEnvelope(ups))
}

// sendValid sends victim the attacker's valid update of clock: an empty
// frame, or frame when given.
func (a *attacker) sendValid(to string, clock uint64, frame []byte) {
	if frame == nil {
		frame = rawFrame(codec.Sparse{Keys: []uint64{}, Values: []float32{}})
	}
	u := a.sign(clock, frame)
	a.mu.Lock()
	a.validSent[to]++
	a.keepalive[to] = u
	a.mu.Unlock()
	a.send(to, u)
}

// sendHostile sends victim the attacker's own update of clock carrying
// frame, which honest nodes must refuse.
func (a *attacker) sendHostile(to string, clock uint64, frame []byte) {
	a.count(1)
	a.send(to, a.sign(clock, frame))
}

func rawFrame(u codec.Sparse) []byte {
	f, err := codec.Raw{}.Encode(nil, u)
	if err != nil {
		panic(fmt.Sprintf("raw frame of a well-formed update: %v", err))
	}
	return f
}

// attackClock sends victim the attacker's update of clock and the attack.
func (a *attacker) attackClock(ctx context.Context, to string, clock uint64) {
	switch a.kind {
	case "nan":
		a.sendHostile(to, clock, nanFrame())
		return
	case "norm":
		own, ok := a.seenUpdate(to, clock)
		u, err := codec.Decode(own.Frame)
		if !ok || err != nil {
			a.sendValid(to, clock, nil)
			return
		}
		scale := float32(-5)
		if clock%2 == 1 {
			scale = -1000
		}
		scaled := codec.Sparse{Keys: u.Keys, Values: make([]float32, len(u.Values))}
		for i, v := range u.Values {
			scaled.Values[i] = scale * v
		}
		if scale == -1000 {
			a.sendHostile(to, clock, rawFrame(scaled))
		} else {
			a.sendValid(to, clock, rawFrame(scaled))
		}
		return
	case "oversized":
		// Its own update: a frame cut in half.
		f := rawFrame(codec.Sparse{Keys: []uint64{1, 2, 3}, Values: []float32{1, 2, 3}})
		a.sendHostile(to, clock, f[:len(f)/2])
		var hdr [4]byte
		binary.BigEndian.PutUint32(hdr[:], node.MaxEnvelopeBytes+1)
		a.rawStream(ctx, to, hdr[:])
		binary.BigEndian.PutUint32(hdr[:], 1<<20)
		a.rawStream(ctx, to, append(hdr[:], make([]byte, 100)...))
		return
	}
	// The attack goes first, on the same ordered stream as the attacker's
	// own update of clock, which the victim waits for: everything the
	// attack sent on it has been read by the time the victim finishes.
	defer a.sendValid(to, clock, nil)
	switch a.kind {
	case "garbage":
		n := 1 + a.intN(512)
		junk := make([]byte, n)
		a.fill(junk)
		a.count(1)
		a.host.Send(to, junk)
		if clock%10 == 0 {
			junk := make([]byte, 1+a.intN(64))
			a.fill(junk)
			a.rawStream(ctx, to, junk)
		}
	case "headers":
		for _, h := range hostileHeaders {
			a.count(1)
			a.host.Send(to, h)
		}
	case "forged":
		a.forge(to, clock)
	case "admit-forge", "hello-forge", "stale-incarnation", "leave-forge", "sync-amplify":
		a.membershipAttack(to, clock)
	case "replay":
		// Updates the victim holds for sure: its own of the two previous
		// clocks, and every other origin's of the two clocks its gate
		// needed before it could run clock.
		var old []node.Update
		for _, v := range a.victims {
			first := a.staleness + 1
			if v.host.ID() == to {
				first = 1
			}
			for back := first; back < first+2 && back < clock; back++ {
				if u, ok := a.seenUpdate(v.host.ID(), clock-back); ok {
					old = append(old, u)
				}
			}
		}
		slices.Reverse(old)
		for _, u := range old {
			a.count(1)
			a.send(to, u)
		}
	}
}

// forge sends victim updates in the name of other members: another
// member's update of clock moved to clock+1, altered, stripped of its
// signature, and a fabricated one signed with the attacker's own key.
func (a *attacker) forge(to string, clock uint64) {
	for _, v := range a.victims {
		origin := v.host.ID()
		if origin == to {
			continue
		}
		u, ok := a.seenUpdate(origin, clock)
		if !ok {
			continue
		}
		next := clock + 1
		altered := bytes.Clone(u.Frame)
		altered[len(altered)-1] ^= 0x40
		fake := rawFrame(codec.Sparse{Keys: []uint64{1}, Values: []float32{1e3}})
		ownSig, _ := a.auth.Sign(a.id, next, fake)
		for _, f := range []node.Update{
			{Origin: origin, Clock: next, Frame: u.Frame, Sig: u.Sig},
			{Origin: origin, Clock: next, Frame: altered, Sig: u.Sig},
			{Origin: origin, Clock: next, Frame: u.Frame},
			{Origin: origin, Clock: next, Frame: fake, Sig: ownSig},
		} {
			a.count(1)
			a.send(to, f)
		}
		return
	}
}

// rawStream opens a fresh update stream to victim, writes data as is and
// closes it.
func (a *attacker) rawStream(ctx context.Context, to string, data []byte) {
	a.count(1)
	pid, err := peer.Decode(to)
	if err != nil {
		return
	}
	sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	s, err := a.host.Libp2p().NewStream(sctx, pid, mesh.UpdateProtocol)
	if err != nil {
		return
	}
	_ = s.SetWriteDeadline(time.Now().Add(2 * time.Second))
	_, _ = s.Write(data)
	_ = s.Close()
}

// flood writes well-formed signed envelopes to victim on a stream of its
// own as fast as the victim reads them: clocks far ahead of any honest
// member, and replays of the attacker's last valid update.
func (a *attacker) flood(ctx context.Context, v *member) {
	to := v.host.ID()
	var s network.Stream
	defer func() {
		if s != nil {
			_ = s.Reset()
		}
	}()
	frame := rawFrame(codec.Sparse{Keys: []uint64{1}, Values: []float32{0.5}})
	var hdr [4]byte
	for i := uint64(0); !a.done(ctx); i++ {
		if s == nil {
			sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			st, err := a.host.Libp2p().NewStream(sctx, v.host.Libp2p().ID(), mesh.UpdateProtocol)
			cancel()
			if err != nil {
				return
			}
			s = st
		}
		var u node.Update
		a.mu.Lock()
		last, ok := a.keepalive[to]
		ahead := a.sentClock[to] + 1000 + i%1000
		a.mu.Unlock()
		if ok && i%2 == 0 {
			u = last
		} else {
			u = a.sign(ahead, frame)
		}
		data := node.EncodeEnvelope([]node.Update{u})
		binary.BigEndian.PutUint32(hdr[:], uint32(len(data)))
		_ = s.SetWriteDeadline(time.Now().Add(time.Second))
		if _, err := s.Write(append(hdr[:], data...)); err != nil {
			_ = s.Reset()
			s = nil
			continue
		}
		a.count(1)
	}
}

// outsider keeps trying to reach every victim: without the PSK (nopsk) or
// off the allow list (notallowed), connecting, opening an update stream and
// writing a well-formed envelope, until stopped.
func (a *attacker) outsider(ctx context.Context) {
	data := node.EncodeEnvelope([]node.Update{{Origin: a.id, Clock: 1, Frame: rawFrame(codec.Sparse{Keys: []uint64{1}, Values: []float32{1}})}})
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], uint32(len(data)))
	msg := append(hdr[:], data...)
	for !a.done(ctx) {
		for _, v := range a.victims {
			err := a.reach(ctx, v, msg)
			if a.done(ctx) {
				// Cut short by the end of the run, not by the victim.
				return
			}
			a.mu.Lock()
			a.tried++
			if err != nil {
				a.local[outsiderReason[a.kind]]++
			}
			a.mu.Unlock()
		}
		select {
		case <-a.stopped:
			return
		case <-ctx.Done():
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// outsiderReason names an outsider's failed attempts in the report.
var outsiderReason = map[string]string{"nopsk": "no_psk", "notallowed": "not_allowed"}

// reach connects to v, opens an update stream and writes msg.
func (a *attacker) reach(ctx context.Context, v *member, msg []byte) error {
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	info := addrInfo(v)
	h := a.host.Libp2p()
	if err := h.Connect(cctx, info); err != nil {
		return err
	}
	defer func() { _ = h.Network().ClosePeer(info.ID) }()
	s, err := h.NewStream(cctx, info.ID, mesh.UpdateProtocol)
	if err != nil {
		return err
	}
	defer func() { _ = s.Reset() }()
	_ = s.SetWriteDeadline(time.Now().Add(time.Second))
	if _, err := s.Write(msg); err != nil {
		return err
	}
	// A gater refuses after the handshake; reading tells whether the
	// victim kept the connection.
	_ = s.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if _, err := s.Read(make([]byte, 1)); err != nil && !errors.Is(err, context.DeadlineExceeded) && !isTimeout(err) {
		return err
	}
	return nil
}

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

func (a *attacker) intN(n int) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.rng.IntN(n)
}

func (a *attacker) fill(b []byte) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for i := range b {
		b[i] = byte(a.rng.Uint32())
	}
}

// nanFrame is a raw frame of two pairs whose second value is NaN (the raw
// encoder refuses NaN, so the bytes are patched).
func nanFrame() []byte {
	const marker = float32(1.25)
	f := rawFrame(codec.Sparse{Keys: []uint64{1, 2}, Values: []float32{0.5, marker}})
	var mb [4]byte
	binary.LittleEndian.PutUint32(mb[:], math.Float32bits(marker))
	if i := bytes.Index(f, mb[:]); i >= 0 {
		binary.LittleEndian.PutUint32(f[i:], math.Float32bits(float32(math.NaN())))
	}
	return f
}

// hostileHeaders are envelopes whose msgpack headers claim far more than
// they hold.
var hostileHeaders = [][]byte{
	{0xdd, 0xff, 0xff, 0xff, 0xff},                                                      // array32 of 2^32−1
	{0xdf, 0xff, 0xff, 0xff, 0xff},                                                      // map32 of 2^32−1
	{0x92, 0x01, 0xdd, 0xff, 0xff, 0xff, 0xff},                                          // update list array32
	{0x92, 0x01, 0x91, 0x93, 0xdb, 0xff, 0xff, 0xff, 0xff},                              // str32 origin
	{0x92, 0x01, 0x91, 0x93, 0xc6, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0},                  // bin32 origin
	{0x92, 0x01, 0x91, 0x93, 0xa1, 'a', 0x01, 0xc6, 0xff, 0xff, 0xff, 0xff},             // bin32 frame
	{0x92, 0x01, 0x91, 0x94, 0xa1, 'a', 0x01, 0xc4, 0x00, 0xc6, 0xff, 0xff, 0xff, 0xff}, // bin32 signature
	{0x92, 0x01, 0xdc, 0xff, 0xff},                                                      // array16 past the end
	{0x92, 0x01, 0x91, 0x93, 0xa1, 'a', 0x01, 0xc5, 0x10, 0x00, 0x01},                   // bin16 past the end
}

// report gathers what the attack did from the attacker's counters and the
// honest nodes'; joined is how many updates a joiner owed every node.
func (a *attacker) report(members []*member, iterations int, joined uint64) *AttackReport {
	if a == nil || a.kind == quietMember {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	r := &AttackReport{Kind: a.kind, Member: a.member, Tried: a.tried, Rejected: map[string]uint64{}}
	r.ForgedMembers, r.MadeUpAdmitted = a.membersOutsideRules(members)
	for k, v := range a.local {
		r.Rejected[k] += v
	}
	honest := uint64(len(members)*iterations) + joined
	for _, m := range members {
		st := m.core.Stats()
		for k, v := range st.Rejected {
			r.Rejected[k] += v
		}
		tr := m.host.Traffic()
		if tr.Oversized > 0 {
			r.Rejected["oversized"] += tr.Oversized
		}
		if tr.Truncated > 0 {
			r.Rejected["truncated"] += tr.Truncated
		}
		r.Throttled += tr.Throttled
		r.Panics += tr.Panics
		if m.allow != nil {
			r.GaterRefusals += m.allow.Refused()
		}
		if rb := m.core.Config().Robust; rb != nil {
			r.Clipped += rb.Clipped()
		}
		if m.core.Clock() < uint64(iterations) {
			r.Stalled = true
		}
		extra := st.UpdatesApplied - min(st.UpdatesApplied, honest)
		valid := a.validSent[m.host.ID()]
		r.ValidSent += valid
		r.AppliedValid += min(extra, valid)
		r.AppliedInvalid += extra - min(extra, valid)
		for _, x := range m.core.View() {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				r.AppliedInvalid++
				break
			}
		}
	}
	return r
}
