package attack

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/pnet"

	"github.com/sketchmesh/sketchmesh/codec"
	"github.com/sketchmesh/sketchmesh/mesh"
	"github.com/sketchmesh/sketchmesh/node"
)

// Quiet is the baseline of the member kinds: a member that sends its
// empty update of every clock and nothing else. A member, hostile or not,
// changes the mesh (every node scales its update by 1/P), so the effect of
// an attack is measured against the same mesh with a quiet member.
const Quiet = "quiet"

// Kinds lists the hostile peer's kinds.
var Kinds = append([]string{"garbage", "oversized", "headers", "forged", "replay", "nan", "norm", "flood", "nopsk", "notallowed"}, MembershipKinds...)

// IsMember reports whether kind's attacker is a member of the mesh.
func IsMember(kind string) bool { return kind != "" && kind != "nopsk" && kind != "notallowed" }

// Report is what an attack did. Field names are part of the JSON
// interface.
type Report struct {
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
	// BaselineAccuracy that of the baseline run (testnet.Baseline), when
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
	// Stalled is true when some honest node did not run all its iterations
	// (no node's clock moved for the testnet's stall timeout).
	Stalled bool `json:"stalled"`
	// ForgedMembers counts, over the honest nodes, members no rule lets
	// the attacker add (it must be 0); MadeUpAdmitted the joiners it made
	// up that honest nodes admitted (a member may admit, at most
	// node.MaxSilentAdmits that never speak).
	ForgedMembers  uint64 `json:"forged_members"`
	MadeUpAdmitted uint64 `json:"made_up_admitted"`
}

// Attacker is the hostile peer: a libp2p host of its own, started by New,
// run by Start until Stop, and read by Report.
type Attacker struct {
	kind      string
	member    bool
	staleness uint64
	id        string
	host      *mesh.Host
	auth      *mesh.KeyAuthenticator
	victims   []Victim
	log       *slog.Logger
	// joinTimeout bounds a join the donor-lie kind answers.
	joinTimeout time.Duration

	mu        sync.Mutex
	rng       *rand.Rand
	tried     uint64
	local     map[string]uint64 // refusals the attacker sees itself
	validSent map[string]uint64 // per victim
	sentClock map[string]uint64 // per victim: the last clock it sent it
	seen      map[string]map[uint64]node.Update
	keepalive map[string]node.Update // per victim: its last valid update
	// Membership kinds: the made-up identities, the victims' hellos.
	meshName string
	made     map[int]madeUp
	hellos   map[string][][]byte
	// lingering[to] is the clock of the leave-linger attacker's last
	// update to victim to, once its notice went there.
	lingering    map[string]uint64
	reincarnated atomic.Bool
	// donor-lie: the model's size and the mesh's settings; the joiner's
	// peer id, when the run has one.
	params   int
	settings node.Settings
	joiner   string

	stopped chan struct{}
	wg      sync.WaitGroup
}

// Config is what the hostile peer knows of the mesh it attacks.
type Config struct {
	// Kind is one of Kinds, or Quiet.
	Kind string
	// Seed seeds the attacker's choices, so runs are reproducible.
	Seed uint64
	// Key is the attacker's identity; a member attacker signs with it.
	Key crypto.PrivKey
	// PSK is the mesh's pre-shared key (every kind but nopsk holds it).
	PSK pnet.PSK
	// MeshName names the mesh in signatures.
	MeshName string
	// Staleness is the mesh's staleness bound, in clocks.
	Staleness uint64
	// Joiner is the peer id of the run's joiner, "" when it has none.
	Joiner string
	// Params and Settings are the model's size and the mesh's training
	// settings, which a donor-lie welcome claims.
	Params   int
	Settings node.Settings
	// JoinTimeout bounds a join the attacker answers (donor-lie).
	JoinTimeout time.Duration
	Logger      *slog.Logger
}

// Victim is an honest node under attack: its host, and for Report its
// core and its allow list (nil when the run has none).
type Victim struct {
	Host  *mesh.Host
	Core  *node.Node
	Allow *mesh.AllowList
}

// New starts the hostile host of cfg.Kind on the loopback; a member
// attacker connects to every victim.
func New(ctx context.Context, cfg Config, victims []Victim) (*Attacker, error) {
	if cfg.Kind != Quiet && !slices.Contains(Kinds, cfg.Kind) {
		return nil, fmt.Errorf("unknown attack %q (want one of %v)", cfg.Kind, Kinds)
	}
	if cfg.Key == nil {
		return nil, fmt.Errorf("attack %s: the attacker needs a key of its own (Config.Key)", cfg.Kind)
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	hc := mesh.HostConfig{ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"}, Key: cfg.Key, Logger: logger}
	if cfg.Kind != "nopsk" {
		hc.PSK = cfg.PSK
	}
	h, err := mesh.NewHost(hc)
	if err != nil {
		return nil, fmt.Errorf("attacker: %w", err)
	}
	a := &Attacker{
		kind: cfg.Kind, member: IsMember(cfg.Kind), staleness: cfg.Staleness, id: h.ID(), host: h, victims: victims,
		log: logger.With("attacker", cfg.Kind), rng: rand.New(rand.NewPCG(cfg.Seed, 0xa77ac)), joinTimeout: cfg.JoinTimeout,
		local: map[string]uint64{}, validSent: map[string]uint64{}, sentClock: map[string]uint64{},
		seen: map[string]map[uint64]node.Update{}, keepalive: map[string]node.Update{}, lingering: map[string]uint64{},
		meshName: cfg.MeshName, made: map[int]madeUp{}, hellos: map[string][][]byte{},
		joiner: cfg.Joiner, params: cfg.Params, settings: cfg.Settings,
		stopped: make(chan struct{}),
	}
	if a.member {
		if a.auth, err = mesh.NewKeyAuthenticator(cfg.MeshName, a.id, cfg.Key); err != nil {
			_ = h.Close()
			return nil, fmt.Errorf("attacker: %w", err)
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

// ID is the attacker's peer id.
func (a *Attacker) ID() string { return a.id }

// Member reports whether the attacker is a member of the mesh.
func (a *Attacker) Member() bool { return a.member }

// Host is the attacker's host (a joiner asks a member attacker first).
func (a *Attacker) Host() *mesh.Host { return a.host }

func addrInfo(v Victim) peer.AddrInfo {
	return peer.AddrInfo{ID: v.Host.Libp2p().ID(), Addrs: v.Host.Libp2p().Addrs()}
}

func addrStrings(h *mesh.Host) []string {
	var out []string
	for _, a := range h.Libp2p().Addrs() {
		out = append(out, a.String())
	}
	return out
}

// Start launches the attack; it runs until Stop.
func (a *Attacker) Start(ctx context.Context) {
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
		if a.kind == DonorLie {
			a.serveLies(ctx)
		}
		if a.kind == "flood" {
			for _, v := range a.victims {
				run(func(ctx context.Context) { a.flood(ctx, v) })
			}
		}
	}
}

// Stop ends the attack and closes the hostile host.
func (a *Attacker) Stop() {
	close(a.stopped)
	_ = a.host.Close()
	a.wg.Wait()
}

func (a *Attacker) done(ctx context.Context) bool {
	select {
	case <-a.stopped:
		return true
	case <-ctx.Done():
		return true
	default:
		return false
	}
}

func (a *Attacker) count(n int) {
	a.mu.Lock()
	a.tried += uint64(n)
	a.mu.Unlock()
}

// memberLoop answers each victim's update of clock c with the attacker's
// own update of clock c and the attack of its kind.
func (a *Attacker) memberLoop(ctx context.Context) {
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
func (a *Attacker) remember(u node.Update) {
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

func (a *Attacker) seenUpdate(origin string, clock uint64) (node.Update, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	u, ok := a.seen[origin][clock]
	return u, ok
}

// sign makes the attacker's own signed update of clock with frame.
func (a *Attacker) sign(clock uint64, frame []byte) node.Update {
	sig, err := a.auth.Sign(a.id, clock, frame)
	if err != nil {
		a.log.Error("sign", "err", err)
	}
	return node.Update{Origin: a.id, Clock: clock, Frame: frame, Sig: sig}
}

func (a *Attacker) send(to string, ups ...node.Update) {
	a.host.Send(to, node.EncodeEnvelope(ups))
}

// sendValid sends victim the attacker's valid update of clock: an empty
// frame, or frame when given.
func (a *Attacker) sendValid(to string, clock uint64, frame []byte) {
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
func (a *Attacker) sendHostile(to string, clock uint64, frame []byte) {
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
func (a *Attacker) attackClock(ctx context.Context, to string, clock uint64) {
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
	case "leave-linger":
		// Its updates up to the notice's clock are valid; the notice
		// follows them on the same stream, and those after are refused.
		if clock <= leaveLingerClock {
			a.sendValid(to, clock, nil)
		} else {
			a.sendHostile(to, clock, rawFrame(codec.Sparse{Keys: []uint64{}, Values: []float32{}}))
		}
		if clock >= leaveLingerClock {
			a.announce(to, node.Announcement{Kind: node.KindLeave, Member: a.id, Clock: leaveLingerClock}, a.id, a.auth)
			a.mu.Lock()
			a.lingering[to] = max(a.lingering[to], clock)
			a.mu.Unlock()
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
			if v.Host.ID() == to {
				first = 1
			}
			for back := first; back < first+2 && back < clock; back++ {
				if u, ok := a.seenUpdate(v.Host.ID(), clock-back); ok {
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
func (a *Attacker) forge(to string, clock uint64) {
	for _, v := range a.victims {
		origin := v.Host.ID()
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
func (a *Attacker) rawStream(ctx context.Context, to string, data []byte) {
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
func (a *Attacker) flood(ctx context.Context, v Victim) {
	to := v.Host.ID()
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
			st, err := a.host.Libp2p().NewStream(sctx, v.Host.Libp2p().ID(), mesh.UpdateProtocol)
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
func (a *Attacker) outsider(ctx context.Context) {
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
func (a *Attacker) reach(ctx context.Context, v Victim, msg []byte) error {
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

func (a *Attacker) intN(n int) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.rng.IntN(n)
}

func (a *Attacker) fill(b []byte) {
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

// Report gathers what the attack did from the attacker's counters and the
// honest nodes'; rejected is what the honest cores refused, as their
// node.Tracer counted it; joined, when not nil, is how many of a joiner's
// updates a member's core holds (a member may lack some it refused while
// it took the joiner for dead, as a loaded machine makes it).
func (a *Attacker) Report(members []Victim, rejected map[node.RejectReason]uint64, iterations int, joined func(*node.Node) uint64) *Report {
	if a.kind == Quiet {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	r := &Report{Kind: a.kind, Member: a.member, Tried: a.tried, Rejected: map[string]uint64{}}
	r.ForgedMembers, r.MadeUpAdmitted = a.membersOutsideRules(members)
	for k, v := range a.local {
		r.Rejected[k] += v
	}
	for k, v := range rejected {
		r.Rejected[string(k)] += v
	}
	for _, m := range members {
		// The honest updates m holds, counted by clock: on a loaded machine
		// a member may have refused some while it took their origin for
		// dead, and those are no attacker's.
		var honest uint64
		vc := m.Core.VectorClock()
		for _, h := range members {
			for c := 1; c <= iterations; c++ {
				if vc.Has(h.Core.ID(), uint64(c)) {
					honest++
				}
			}
		}
		if joined != nil {
			honest += joined(m.Core)
		}
		st := m.Core.Stats()
		tr := m.Host.Traffic()
		if tr.Oversized > 0 {
			r.Rejected["oversized"] += tr.Oversized
		}
		if tr.Truncated > 0 {
			r.Rejected["truncated"] += tr.Truncated
		}
		r.Throttled += tr.Throttled
		r.Panics += tr.Panics
		if m.Allow != nil {
			r.GaterRefusals += m.Allow.Refused()
		}
		if rb := m.Core.Config().Robust; rb != nil {
			r.Clipped += rb.Clipped()
		}
		// Iterations are optimizer steps: with local steps, an exchange
		// (a clock) holds several.
		if m.Core.Steps() < uint64(iterations) {
			r.Stalled = true
		}
		extra := st.UpdatesApplied - min(st.UpdatesApplied, honest)
		valid := a.validSent[m.Host.ID()]
		r.ValidSent += valid
		r.AppliedValid += min(extra, valid)
		r.AppliedInvalid += extra - min(extra, valid)
		for _, x := range m.Core.View() {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				r.AppliedInvalid++
				break
			}
		}
	}
	return r
}
