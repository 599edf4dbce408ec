package mesh

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/event"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/net/swarm"
	relayclient "github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/client"
	pbv2 "github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/pb"
	circuitproto "github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/proto"
	relayv2 "github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/relay"
	"github.com/libp2p/go-libp2p/p2p/protocol/holepunch"
	quic "github.com/libp2p/go-libp2p/p2p/transport/quic"
	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"
)

// Reaching members across sites.
//
// A host started with HostConfig.Reach runs what go-libp2p offers to cross
// NATs and firewalls, and nothing of its own on the wire:
//
//   - QUIC (quic-v1) next to TCP, unless the mesh is private (PSK): the
//     swarm's dial ranker tries QUIC first;
//   - the circuit relay v2 transport, so it can dial and be dialed through a
//     relay; with RelayService it is a relay itself, for the members of its
//     mesh only, and without relay v2's per-connection limits (see
//     MeshRelayResources);
//   - reservations with the relays among the members (members whose
//     identify lists the relay v2 hop protocol) and with
//     ReachConfig.Relays, renewed
//     before they expire and taken again when a relay drops; each one adds
//     this host's circuit addresses (<relay address>/p2p/<relay>/p2p-circuit)
//     to the addresses it advertises, after its direct ones;
//   - a dial ranker that dials circuit addresses only when the direct ones
//     have failed or had 500 ms to answer, hole punching (DCUtR) on relayed
//     connections when the host has public addresses, and, for links that
//     stay relayed, a direct dial again after UpgradeAfter (doubling up to
//     2 min), which upgrades links between private networks that can reach
//     each other after all; the update sender moves to a direct connection
//     as soon as one exists;
//   - AutoNAT v1 and v2 (the host also answers its peers' probes), whose
//     verdicts are logged, as is every change of the advertised addresses.
//
// Reservations are held whatever AutoNAT says. AutoNAT answers whether some
// prober can dial the host, not whether every site can: a firewall between
// two sites, or sites on private networks that reach the relay but not each
// other, leave AutoNAT saying "public" (or saying nothing: it probes public
// addresses only, and first after 15 s), while members at the other site
// still need the relay path. A reservation costs a slot on a member that
// offered to relay and a renewal per hour; dialers try direct addresses
// first, so it is used only where the direct path fails.
// (go-libp2p's autorelay is not used for the same reason: it starts only
// once AutoNAT says "private", and it advertises circuit addresses over a
// relay's public addresses only, so it never helps sites joined over private
// networks.)

// ReachConfig turns on NAT traversal and relays for a host.
type ReachConfig struct {
	// Announce are addresses to advertise besides those libp2p finds
	// (listen addresses, addresses peers observed through identify, circuit
	// addresses of the relay reservations): a public address forwarded to
	// this node, a DNS name. They are advertised first.
	Announce []ma.Multiaddr
	// RelayService makes the host a circuit relay v2 for the members of its
	// mesh (see MeshRelayResources).
	RelayService bool
	// Relays are relays to hold reservations with besides the members that
	// offer relay service, which are found without being listed. (The
	// daemon tells the host who the members are, as it learns of them.)
	Relays []peer.AddrInfo
	// MaxReservations is how many relays the host holds reservations with
	// at once (default 2). A relay itself holds none.
	MaxReservations int
	// UpgradeAfter is how long a peer stays reached through relays only
	// before the host dials it directly again (default 2 s); the wait
	// doubles after each failure, up to 2 min.
	UpgradeAfter time.Duration
}

const (
	defaultMaxReservations = 2
	defaultUpgradeAfter    = 2 * time.Second
	maxUpgradeWait         = 2 * time.Minute
	reserveTimeout         = 10 * time.Second
	directDialTimeout      = 5 * time.Second
	relayRetryMin          = 30 * time.Second
	relayRetryMax          = 10 * time.Minute
	reachTick              = time.Second
	// maxCircuitAddrsPerRelay bounds the circuit addresses one reservation
	// adds to what the host advertises.
	maxCircuitAddrsPerRelay = 8
)

// MeshRelayResources are the circuit relay v2 resources of a member that
// serves as a relay. Relay v2's defaults (2 min and 128 KiB per relayed
// connection, 128 reservations, 8 per IP address) are made for a public
// relay that only helps two peers meet before they hole-punch; a mesh's
// update streams carry megabytes for as long as the run lasts, and a site
// may put many members behind one address. So relayed connections have no
// duration or data limit, and the relay takes a reservation from up to 1024
// members, from any number of them behind one address, with up to 64 relayed
// connections each and 32 KiB copy buffers. Lifting the limits is safe
// because the relay serves members of its mesh only (the daemon admits them
// as it learns of them) and every relayed byte still passes the resource
// manager of the relay's host.
func MeshRelayResources() relayv2.Resources {
	r := relayv2.DefaultResources()
	r.Limit = nil
	r.MaxReservations = 1024
	r.MaxCircuits = 64
	r.BufferSize = 32 << 10
	r.MaxReservationsPerIP = 1024
	r.MaxReservationsPerASN = 1024
	return r
}

// reacher runs a host's reservations, relay service, direct upgrades and
// address logging.
type reacher struct {
	cfg   ReachConfig
	log   *slog.Logger
	h     host.Host
	relay *relayv2.Relay

	mu    sync.Mutex
	held  map[peer.ID]*reservation
	retry map[peer.ID]backoff
	// members are the peers of the mesh's members: the relay service
	// serves them only, and the relays among them are candidates.
	members map[peer.ID]bool
	upgrade map[peer.ID]*backoff
	// refused counts reservations relays refused; lacking is set while the
	// host holds no reservation after some relay failed it.
	refused uint64
	lacking bool

	poke   chan struct{}
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// reservation is one held relay slot.
type reservation struct {
	addrs             []ma.Multiaddr
	obtained, expires time.Time
}

// backoff is when to try something again, and how long to wait after that.
type backoff struct {
	at   time.Time
	wait time.Duration
	busy bool
}

func newReacher(cfg ReachConfig, logger *slog.Logger) *reacher {
	if cfg.MaxReservations <= 0 {
		cfg.MaxReservations = defaultMaxReservations
	}
	if cfg.UpgradeAfter <= 0 {
		cfg.UpgradeAfter = defaultUpgradeAfter
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &reacher{
		cfg: cfg, log: logger,
		held: map[peer.ID]*reservation{}, retry: map[peer.ID]backoff{},
		members: map[peer.ID]bool{}, upgrade: map[peer.ID]*backoff{},
		poke: make(chan struct{}, 1), ctx: ctx, cancel: cancel,
	}
}

// options are the libp2p options of a reaching host; private hosts (PSK)
// run TCP only.
func (r *reacher) options(private bool) []libp2p.Option {
	opts := []libp2p.Option{
		libp2p.EnableRelay(),
		libp2p.EnableHolePunching(holepunch.WithTracer(holePunchLog{r.log})),
		libp2p.EnableNATService(),
		libp2p.EnableAutoNATv2(),
		libp2p.AddrsFactory(r.advertise),
		libp2p.SwarmOpts(swarm.WithDialRanker(preferDirect)),
	}
	if !private {
		opts = append(opts, libp2p.Transport(quic.NewTransport))
	}
	return opts
}

// start runs the relay service, if asked for, and the background work.
func (r *reacher) start(h host.Host) error {
	r.h = h
	r.log = r.log.With("peer", shortID(h.ID()))
	if r.cfg.RelayService {
		rl, err := relayv2.New(h, relayv2.WithResources(MeshRelayResources()), relayv2.WithACL(relayACL{r}))
		if err != nil {
			return fmt.Errorf("start the relay service: %w", err)
		}
		r.relay = rl
		res := MeshRelayResources()
		r.log.Info("relay service on: members that cannot dial each other connect through this node",
			"limit_per_connection", "none", "max_reservations", res.MaxReservations, "max_circuits_per_peer", res.MaxCircuits)
	}
	sub, err := h.EventBus().Subscribe([]any{
		new(event.EvtLocalAddressesUpdated), new(event.EvtLocalReachabilityChanged),
		new(event.EvtHostReachableAddrsChanged), new(event.EvtPeerIdentificationCompleted),
	})
	if err != nil {
		if r.relay != nil {
			_ = r.relay.Close()
		}
		return fmt.Errorf("subscribe to address events: %w", err)
	}
	r.wg.Add(2)
	go r.watch(sub)
	go r.loop()
	return nil
}

func (r *reacher) close() {
	r.cancel()
	r.wg.Wait()
	if r.relay != nil {
		_ = r.relay.Close()
	}
}

// admit records p as a member's peer, and wakes the loop: it may be a
// relay.
func (r *reacher) admit(p peer.ID) {
	r.mu.Lock()
	r.members[p] = true
	r.mu.Unlock()
	r.wake()
}

func (r *reacher) wake() {
	select {
	case r.poke <- struct{}{}:
	default:
	}
}

// relayACL lets only the mesh's members reserve and connect.
type relayACL struct{ r *reacher }

func (a relayACL) AllowReserve(p peer.ID, addr ma.Multiaddr) bool {
	a.r.mu.Lock()
	ok := a.r.members[p]
	a.r.mu.Unlock()
	if !ok {
		a.r.log.Info("relay service refused a reservation: the peer is not a member of this mesh", "from", p, "addr", addr)
	}
	return ok
}

func (a relayACL) AllowConnect(src peer.ID, _ ma.Multiaddr, dest peer.ID) bool {
	a.r.mu.Lock()
	ok := a.r.members[src] && a.r.members[dest]
	a.r.mu.Unlock()
	if !ok {
		a.r.log.Info("relay service refused a connection between peers that are not both members", "from", src, "to", dest)
	}
	return ok
}

// advertise is the host's address factory: the announced addresses, then
// what libp2p found and the circuit addresses of the reservations, at most
// maxAddrs in all (the most an announcement carries).
func (r *reacher) advertise(found []ma.Multiaddr) []ma.Multiaddr {
	r.mu.Lock()
	var circuits []ma.Multiaddr
	for _, rs := range r.held {
		circuits = append(circuits, rs.addrs...)
	}
	r.mu.Unlock()
	return advertised(r.cfg.Announce, found, circuits)
}

// advertised merges announced, found and circuit addresses without
// duplicates. When there are more than maxAddrs, the announced ones are
// kept first, then public, private, circuit and loopback addresses, in
// that order.
func advertised(announce, found, circuits []ma.Multiaddr) []ma.Multiaddr {
	rest := append(slices.Clone(found), circuits...)
	slices.SortStableFunc(rest, func(a, b ma.Multiaddr) int { return cmp.Compare(addrTier(a), addrTier(b)) })
	seen := map[string]bool{}
	var out []ma.Multiaddr
	for _, a := range append(slices.Clone(announce), rest...) {
		k := string(a.Bytes())
		if len(a) == 0 || seen[k] || len(out) == maxAddrs {
			continue
		}
		seen[k] = true
		out = append(out, a)
	}
	return out
}

// addrTier orders addresses by how useful they are to a peer elsewhere.
func addrTier(a ma.Multiaddr) int {
	switch {
	case isCircuit(a):
		return 2
	case manet.IsIPLoopback(a):
		return 3
	case manet.IsPublicAddr(a):
		return 0
	default:
		return 1
	}
}

func isCircuit(a ma.Multiaddr) bool {
	_, err := a.ValueForProtocol(ma.P_CIRCUIT)
	return err == nil
}

// isRelayed reports whether a connection goes through a relay.
func isRelayed(c network.Conn) bool { return isCircuit(c.RemoteMultiaddr()) }

// preferDirect is the dial ranker: go-libp2p's, with circuit addresses
// dialed only 500 ms after the last direct address (at once when every
// direct dial has failed: the swarm then moves on to the next address).
func preferDirect(addrs []ma.Multiaddr) []network.AddrDelay {
	ranked := swarm.DefaultDialRanker(addrs)
	var last time.Duration
	direct := false
	for _, r := range ranked {
		if !isCircuit(r.Addr) {
			direct = true
			last = max(last, r.Delay)
		}
	}
	if !direct {
		return ranked
	}
	for i := range ranked {
		if isCircuit(ranked[i].Addr) {
			ranked[i].Delay = max(ranked[i].Delay, last+swarm.RelayDelay)
		}
	}
	return ranked
}

// watch logs address and reachability changes and wakes the loop when a
// peer is identified (it may be a relay).
func (r *reacher) watch(sub event.Subscription) {
	defer r.wg.Done()
	defer sub.Close()
	for {
		select {
		case <-r.ctx.Done():
			return
		case ev, ok := <-sub.Out():
			if !ok {
				return
			}
			switch e := ev.(type) {
			case event.EvtLocalAddressesUpdated:
				var cur, added, removed []string
				for _, u := range e.Current {
					cur = append(cur, u.Address.String())
					if u.Action == event.Added {
						added = append(added, u.Address.String())
					}
				}
				for _, u := range e.Removed {
					removed = append(removed, u.Address.String())
				}
				r.log.Info("advertised addresses changed", "addrs", cur, "added", added, "removed", removed)
			case event.EvtLocalReachabilityChanged:
				r.log.Info("AutoNAT: reachability changed", "reachability", e.Reachability.String())
			case event.EvtHostReachableAddrsChanged:
				r.log.Info("AutoNAT v2: address reachability", "reachable", addrList(e.Reachable),
					"unreachable", addrList(e.Unreachable), "unknown", addrList(e.Unknown))
			case event.EvtPeerIdentificationCompleted:
				r.wake()
			}
		}
	}
}

func addrList(as []ma.Multiaddr) []string {
	out := make([]string, 0, len(as))
	for _, a := range as {
		out = append(out, a.String())
	}
	return out
}

// loop keeps the reservations and tries relayed peers directly.
func (r *reacher) loop() {
	defer r.wg.Done()
	tick := time.NewTicker(reachTick)
	defer tick.Stop()
	for {
		if !r.cfg.RelayService {
			r.reserve(time.Now())
		}
		r.upgradeRelayed(time.Now())
		select {
		case <-r.ctx.Done():
			return
		case <-tick.C:
		case <-r.poke:
		}
	}
}

// reserve drops reservations whose relay is gone, renews those past half
// their life, and takes new ones up to MaxReservations.
func (r *reacher) reserve(now time.Time) {
	var renew []peer.ID
	r.mu.Lock()
	for p, rs := range r.held {
		switch {
		case r.h.Network().Connectedness(p) == network.NotConnected:
			delete(r.held, p)
			r.log.Info("relay reservation lost: disconnected from the relay; looking for another", "relay", p)
		case now.After(rs.obtained.Add(rs.expires.Sub(rs.obtained) / 2)):
			renew = append(renew, p)
		}
	}
	r.mu.Unlock()
	for _, p := range renew {
		r.take(peer.AddrInfo{ID: p}, now)
	}
	for _, c := range r.candidates(now) {
		r.mu.Lock()
		full := len(r.held) >= r.cfg.MaxReservations
		r.mu.Unlock()
		if full || r.ctx.Err() != nil {
			return
		}
		r.take(c, now)
	}
}

// candidates are the relays to ask now: the configured ones, then the
// connected members that offer relay service, leaving out those held and
// those waiting for a retry.
func (r *reacher) candidates(now time.Time) []peer.AddrInfo {
	var out []peer.AddrInfo
	seen := map[peer.ID]bool{r.h.ID(): true}
	r.mu.Lock()
	defer r.mu.Unlock()
	usable := func(p peer.ID) bool {
		if seen[p] || r.held[p] != nil {
			return false
		}
		seen[p] = true
		b, waiting := r.retry[p]
		return !waiting || !now.Before(b.at)
	}
	for _, ai := range r.cfg.Relays {
		if usable(ai.ID) {
			out = append(out, ai)
		}
	}
	peers := r.h.Network().Peers()
	slices.Sort(peers)
	for _, p := range peers {
		if !r.members[p] {
			continue
		}
		if protos, err := r.h.Peerstore().SupportsProtocols(p, circuitproto.ProtoIDv2Hop); err != nil || len(protos) == 0 {
			continue
		}
		if usable(p) {
			out = append(out, peer.AddrInfo{ID: p})
		}
	}
	return out
}

// take asks one relay for a reservation (or its renewal). A refusal or a
// failure is logged with the fallback, and the relay is asked again after a
// backoff.
func (r *reacher) take(ai peer.AddrInfo, now time.Time) {
	ctx, cancel := context.WithTimeout(r.ctx, reserveTimeout)
	rsvp, err := relayclient.Reserve(ctx, r.h, ai)
	cancel()
	r.mu.Lock()
	defer r.mu.Unlock()
	_, renewal := r.held[ai.ID]
	if err != nil {
		if r.ctx.Err() != nil {
			return
		}
		delete(r.held, ai.ID)
		b := r.retry[ai.ID]
		b.wait = min(max(2*b.wait, relayRetryMin), relayRetryMax)
		b.at = now.Add(b.wait)
		r.retry[ai.ID] = b
		others := len(r.held)
		var re relayclient.ReservationError
		refused := errors.As(err, &re) && re.Status != pbv2.Status_CONNECTION_FAILED
		msg := "relay could not be reached for a reservation"
		if refused {
			r.refused++
			msg = "relay refused a reservation"
		}
		r.log.Warn(msg+"; falling back to the other relays and to direct connections",
			"relay", ai.ID, "renewal", renewal, "err", OneLine(err), "retry_in", b.wait, "reservations_held", others)
		if others == 0 && !r.lacking {
			r.lacking = true
			r.log.Warn("no relay reservation: members that cannot dial this node directly cannot reach it until a relay accepts one")
		}
		return
	}
	delete(r.retry, ai.ID)
	r.held[ai.ID] = &reservation{addrs: r.circuitAddrs(ai.ID), obtained: now, expires: rsvp.Expiration}
	r.lacking = false
	if renewal {
		r.log.Debug("relay reservation renewed", "relay", ai.ID, "expires", rsvp.Expiration)
		return
	}
	r.log.Info("relay reservation: members that cannot dial this node directly reach it through the relay",
		"relay", ai.ID, "expires", rsvp.Expiration.Format(time.RFC3339), "addrs", addrList(r.held[ai.ID].addrs))
	if rsvp.LimitDuration > 0 || rsvp.LimitData > 0 {
		r.log.Warn("relay limits each relayed connection: update streams through it are cut at the limit and reopened; prefer a member started with --relay-service",
			"relay", ai.ID, "duration", rsvp.LimitDuration, "bytes", rsvp.LimitData)
	}
}

// circuitAddrs are this host's addresses through relay: the relay's
// addresses this host knows, with /p2p/<relay>/p2p-circuit; loopback ones
// only when the relay has no other.
func (r *reacher) circuitAddrs(relay peer.ID) []ma.Multiaddr {
	var base []ma.Multiaddr
	for _, a := range r.h.Peerstore().Addrs(relay) {
		if !isCircuit(a) {
			base = append(base, a)
		}
	}
	for _, c := range r.h.Network().ConnsToPeer(relay) {
		if !isRelayed(c) {
			base = append(base, c.RemoteMultiaddr())
		}
	}
	if slices.ContainsFunc(base, func(a ma.Multiaddr) bool { return !manet.IsIPLoopback(a) }) {
		base = slices.DeleteFunc(base, manet.IsIPLoopback)
	}
	slices.SortStableFunc(base, func(a, b ma.Multiaddr) int { return cmp.Compare(addrTier(a), addrTier(b)) })
	suffix, err := ma.NewMultiaddr("/p2p/" + relay.String() + "/p2p-circuit")
	if err != nil {
		return nil
	}
	var out []ma.Multiaddr
	seen := map[string]bool{}
	for _, a := range base {
		c := a.Encapsulate(suffix)
		if k := string(c.Bytes()); !seen[k] && len(out) < maxCircuitAddrsPerRelay {
			seen[k] = true
			out = append(out, c)
		}
	}
	return out
}

// upgradeRelayed dials, directly, the peers this host reaches through
// relays only, each after its backoff.
func (r *reacher) upgradeRelayed(now time.Time) {
	for _, p := range r.h.Network().Peers() {
		direct, relayed := connPath(r.h, p)
		r.mu.Lock()
		b := r.upgrade[p]
		if direct || !relayed {
			if b != nil && !b.busy {
				delete(r.upgrade, p)
			}
			r.mu.Unlock()
			continue
		}
		if b == nil {
			b = &backoff{at: now.Add(r.cfg.UpgradeAfter), wait: r.cfg.UpgradeAfter}
			r.upgrade[p] = b
		}
		due := !b.busy && !now.Before(b.at)
		if due {
			b.busy = true
		}
		r.mu.Unlock()
		if due {
			r.wg.Add(1)
			go r.dialDirect(p)
		}
	}
}

// dialDirect tries a direct connection to a peer reached through relays.
func (r *reacher) dialDirect(p peer.ID) {
	defer r.wg.Done()
	ctx, cancel := context.WithTimeout(network.WithForceDirectDial(r.ctx, "prefer a direct path to a relayed member"), directDialTimeout)
	err := r.h.Connect(ctx, peer.AddrInfo{ID: p})
	cancel()
	r.mu.Lock()
	defer r.mu.Unlock()
	b := r.upgrade[p]
	if b == nil {
		return
	}
	b.busy = false
	if err == nil {
		delete(r.upgrade, p)
		r.log.Info("relayed peer now reached directly", "to", shortID(p))
		return
	}
	b.wait = min(2*b.wait, maxUpgradeWait)
	b.at = time.Now().Add(b.wait)
	r.log.Debug("no direct path to a relayed peer yet", "to", shortID(p), "retry_in", b.wait, "err", OneLine(err))
}

// reservations is how many relay reservations the host holds.
func (r *reacher) reservations() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.held)
}

// connPath reports whether the host has a direct connection to p and
// whether it has a relayed one.
func connPath(h host.Host, p peer.ID) (direct, relayed bool) {
	for _, c := range h.Network().ConnsToPeer(p) {
		if c.IsClosed() {
			continue
		}
		if isRelayed(c) {
			relayed = true
		} else {
			direct = true
		}
	}
	return direct, relayed
}

// holePunchLog logs the outcome of hole punches.
type holePunchLog struct{ log *slog.Logger }

func (l holePunchLog) Trace(e *holepunch.Event) {
	switch evt := e.Evt.(type) {
	case *holepunch.EndHolePunchEvt:
		if evt.Success {
			l.log.Info("hole punch succeeded: relayed peer now reached directly", "to", shortID(e.Remote), "took", evt.EllapsedTime)
		} else {
			l.log.Info("hole punch failed: the peer stays relayed", "to", shortID(e.Remote), "err", evt.Error)
		}
	case *holepunch.DirectDialEvt:
		l.log.Debug("direct dial before hole punching", "to", shortID(e.Remote), "ok", evt.Success, "err", evt.Error)
	}
}

// CheckAnnounce checks an address given to advertise: a multiaddr of this
// node's own transport, without a /p2p/ part.
func CheckAnnounce(s string) (ma.Multiaddr, error) {
	a, err := ma.NewMultiaddr(s)
	if err != nil {
		return nil, fmt.Errorf("%q is not a multiaddr: %w", s, err)
	}
	if _, err := a.ValueForProtocol(ma.P_P2P); err == nil || isCircuit(a) {
		return nil, fmt.Errorf("%q names a peer: give this node's own address, without /p2p/ or /p2p-circuit", s)
	}
	return a, nil
}
