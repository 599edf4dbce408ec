package mesh

import (
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"
)

// Link bookkeeping: which path (direct or relayed) each update stream took,
// which links fail and since when, as the host records them (linkUp,
// linkDown) and the daemon counts them for its result and metrics.

// Link is what a host knows of its update-stream link with one peer.
type Link struct {
	// Direct and Relayed say whether an update stream with the peer, in
	// either direction, ever ran over a direct or a relayed connection.
	Direct, Relayed bool
	// FailingSince is when the host last began failing to open an update
	// stream to the peer; zero while it succeeds.
	FailingSince time.Time
}

// linkBook tracks a host's links.
type linkBook struct {
	mu    sync.Mutex
	peers map[peer.ID]*Link
	// warned holds the peers whose current run of failures was warned of.
	warned map[peer.ID]bool
}

// linkWarnAfter is how long a link fails before the host warns: a member
// that just joined is not reachable through relays until its relay
// addresses reach the others, a heartbeat or two later.
const linkWarnAfter = 3 * time.Second

func (b *linkBook) get(p peer.ID) *Link {
	if b.peers == nil {
		b.peers = map[peer.ID]*Link{}
	}
	l := b.peers[p]
	if l == nil {
		l = &Link{}
		b.peers[p] = l
	}
	return l
}

// linkUp records an update stream with p over c.
func (m *Host) linkUp(p peer.ID, c network.Conn) {
	relayed := isRelayed(c)
	m.links.mu.Lock()
	l := m.links.get(p)
	was := *l
	if relayed {
		l.Relayed = true
	} else {
		l.Direct = true
	}
	l.FailingSince = time.Time{}
	delete(m.links.warned, p)
	m.links.mu.Unlock()
	path := "direct"
	if relayed {
		path = "relayed"
	}
	switch {
	case !was.FailingSince.IsZero():
		m.log.Info("overlay link established", "to", shortID(p), "path", path, "after", time.Since(was.FailingSince).Round(time.Millisecond))
	case relayed && !was.Relayed && !was.Direct:
		m.log.Info("overlay link runs through a relay: no direct path yet", "to", shortID(p), "via", relayOf(c))
	case !relayed && !was.Direct && was.Relayed:
		m.log.Info("overlay link upgraded to a direct connection", "to", shortID(p))
	}
}

// linkDown records a failure to open an update stream to p, and warns
// once the failures have lasted linkWarnAfter.
func (m *Host) linkDown(p peer.ID, err error) {
	now := time.Now()
	m.links.mu.Lock()
	l := m.links.get(p)
	first := l.FailingSince.IsZero()
	if first {
		l.FailingSince = now
	}
	since := l.FailingSince
	warn := !first && now.Sub(since) >= linkWarnAfter && !m.links.warned[p]
	if warn {
		if m.links.warned == nil {
			m.links.warned = map[peer.ID]bool{}
		}
		m.links.warned[p] = true
	}
	m.links.mu.Unlock()
	switch {
	case first:
		m.log.Info("overlay link not established yet; retrying with the next update", "to", shortID(p), "err", OneLine(err))
	case warn:
		msg := "overlay link cannot be established: the peer is down, or there is no direct or relayed path to it (a member every site can reach, started with --relay-service, gives one)"
		if m.loopbackOnly() {
			// Relays cannot help on one machine: the peer is down.
			msg = "overlay link cannot be established: the peer is down"
		}
		m.log.Warn(msg, "to", shortID(p), "failing_for", now.Sub(since).Round(time.Millisecond), "err", OneLine(err))
	}
}

// loopbackOnly reports whether the host listens on loopback addresses
// only: a mesh on one machine, where relays are no help.
func (m *Host) loopbackOnly() bool {
	addrs := m.h.Network().ListenAddresses()
	for _, a := range addrs {
		if !manet.IsIPLoopback(a) {
			return false
		}
	}
	return len(addrs) > 0
}

// relayOf names the relay a relayed connection goes through.
func relayOf(c network.Conn) string {
	var relay string
	ma.ForEach(c.RemoteMultiaddr(), func(comp ma.Component) bool {
		switch comp.Protocol().Code {
		case ma.P_P2P:
			relay = comp.Value()
		case ma.P_CIRCUIT:
			return false
		}
		return true
	})
	return relay
}

// Links returns what the host knows of its update-stream links, by peer.
func (m *Host) Links() map[peer.ID]Link {
	m.links.mu.Lock()
	defer m.links.mu.Unlock()
	out := make(map[peer.ID]Link, len(m.links.peers))
	for p, l := range m.links.peers {
		out[p] = *l
	}
	return out
}

// ConnPaths counts the peers among ids the host is connected to now: direct
// when any of its connections with the peer is direct, relayed when all of
// them go through relays.
func (m *Host) ConnPaths(ids []peer.ID) (direct, relayed int) {
	for _, p := range ids {
		d, r := connPath(m.h, p)
		switch {
		case d:
			direct++
		case r:
			relayed++
		}
	}
	return direct, relayed
}

// Reservations is how many relay reservations the host holds (0 without
// HostConfig.Reach).
func (m *Host) Reservations() int {
	if m.reach == nil {
		return 0
	}
	return m.reach.reservations()
}

// addMember tells the host that p runs a member of its mesh: it may use
// the host's relay service, and it is a relay candidate if it offers one.
func (m *Host) addMember(p peer.ID) {
	m.mu.Lock()
	if m.members == nil {
		m.members = map[peer.ID]bool{}
	}
	m.members[p] = true
	m.mu.Unlock()
	if m.reach != nil {
		m.reach.admit(p)
	}
}

// betterConnThan reports whether the host now has a direct connection to
// the peer of a stream that runs through a relay: the sender then moves to
// it.
func (m *Host) betterConnThan(s network.Stream) bool {
	if !isRelayed(s.Conn()) {
		return false
	}
	direct, _ := connPath(m.h, s.Conn().RemotePeer())
	return direct
}

// linkCounts counts the daemon's update links: peers reached directly at
// some time, peers reached through relays only, and live members to which
// no stream could be opened for longer than the dead-member timeout.
func (a *Daemon) linkCounts(now time.Time) (direct, relayed, unreachable int) {
	live := map[peer.ID]bool{}
	for _, m := range a.n.Live() {
		if p, err := a.peerOf(m); err == nil {
			live[p] = true
		}
	}
	limit := a.deadAfter()
	for p, l := range a.net.Links() {
		if a.n.MemberOf(p.String()) == "" {
			continue // a stranger that opened an update stream is no peer of the mesh
		}
		switch {
		case l.Direct:
			direct++
		case l.Relayed:
			relayed++
		}
		if live[p] && !l.FailingSince.IsZero() && now.Sub(l.FailingSince) >= limit {
			unreachable++
		}
	}
	return direct, relayed, unreachable
}

// livePeers are the peers of the live members besides this one.
func (a *Daemon) livePeers() []peer.ID {
	var out []peer.ID
	self := a.net.Self()
	for _, m := range a.n.Live() {
		if p, err := a.peerOf(m); err == nil && p != self {
			out = append(out, p)
		}
	}
	return out
}

// reachable reports whether the host is connected to any live member.
func (a *Daemon) reachable() bool {
	direct, relayed := a.net.ConnPaths(a.livePeers())
	return direct+relayed > 0
}
