package mesh

import (
	"sync"
	"sync/atomic"

	"github.com/libp2p/go-libp2p/core/peer"
)

// PeerTraffic is a host's traffic with one peer on update streams, length
// prefixes included, and how it reaches the peer now.
type PeerTraffic struct {
	BytesSent, MessagesSent         uint64
	BytesReceived, MessagesReceived uint64
	// Path is "direct" (some connection to the peer is direct), "relayed"
	// (all go through relays), "unreachable" (not connected, and opening
	// an update stream fails) or "" (not connected, nothing failing).
	Path string
}

// peerCounters count one peer's traffic; senders and stream readers hold
// them, so counting costs no lock.
type peerCounters struct {
	bytesSent, msgsSent, bytesRecv, msgsRecv atomic.Uint64
}

// peerBook holds the counters of every peer the host exchanged updates
// with.
type peerBook struct {
	mu    sync.Mutex
	peers map[peer.ID]*peerCounters
}

func (b *peerBook) get(p peer.ID) *peerCounters {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.peers == nil {
		b.peers = map[peer.ID]*peerCounters{}
	}
	c := b.peers[p]
	if c == nil {
		c = &peerCounters{}
		b.peers[p] = c
	}
	return c
}

// PeerTraffic returns the host's traffic with every peer it exchanged
// update messages with, by peer id, and the path to each.
func (m *Host) PeerTraffic() map[string]PeerTraffic {
	m.traffic.mu.Lock()
	counters := make(map[peer.ID]*peerCounters, len(m.traffic.peers))
	for p, c := range m.traffic.peers {
		counters[p] = c
	}
	m.traffic.mu.Unlock()
	links := m.Links()
	out := make(map[string]PeerTraffic, len(counters))
	for p, c := range counters {
		out[p.String()] = PeerTraffic{
			BytesSent: c.bytesSent.Load(), MessagesSent: c.msgsSent.Load(),
			BytesReceived: c.bytesRecv.Load(), MessagesReceived: c.msgsRecv.Load(),
			Path: m.pathTo(p, links[p]),
		}
	}
	return out
}

// PathTo says how the host reaches peer p now (see PeerTraffic.Path).
func (m *Host) PathTo(p peer.ID) string {
	m.links.mu.Lock()
	var l Link
	if got := m.links.peers[p]; got != nil {
		l = *got
	}
	m.links.mu.Unlock()
	return m.pathTo(p, l)
}

func (m *Host) pathTo(p peer.ID, l Link) string {
	direct, relayed := connPath(m.h, p)
	switch {
	case direct:
		return "direct"
	case relayed:
		return "relayed"
	case !l.FailingSince.IsZero():
		return "unreachable"
	}
	return ""
}
