package mesh

import (
	"context"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
)

// Inbound is a message that arrived from a peer.
type Inbound struct {
	From string
	Data []byte
}

// Transport is what a daemon needs of the network: non-blocking sends to a
// peer, a channel of arrivals, a way to wait until sends are out, and what
// it reports of its links. Host implements it; DaemonConfig.Transport may
// wrap a Host in a decorator (link shaping, fault injection) that the
// daemon then drives without knowing. Peers are peer.IDs throughout: the
// daemon decodes a member id once, not at every hop.
type Transport interface {
	// Self is the peer the transport sends from.
	Self() peer.ID
	Inbox() <-chan Inbound
	SendTo(to peer.ID, data []byte)
	// Forget drops what is queued for p, whose member is gone.
	Forget(p peer.ID)
	Flush(ctx context.Context) error
	// KnownAddrs are the addresses the transport knows p by.
	KnownAddrs(p peer.ID) []ma.Multiaddr
	// ConnectedPeers counts the peers connected now, members or not.
	ConnectedPeers() int
	Traffic() TrafficStats
	PeerTraffic() map[string]PeerTraffic
	Links() map[peer.ID]Link
	ConnPaths(ids []peer.ID) (direct, relayed int)
	PathTo(p peer.ID) string
	Reservations() int
	ProbeRTT(ctx context.Context, to string) (time.Duration, error)
	// addMember keeps p's connection and link record: p runs a member.
	addMember(p peer.ID)
}

// Self implements Transport.
func (m *Host) Self() peer.ID { return m.h.ID() }

// KnownAddrs implements Transport: the addresses in the host's peerstore.
func (m *Host) KnownAddrs(p peer.ID) []ma.Multiaddr { return m.h.Peerstore().Addrs(p) }

// ConnectedPeers implements Transport.
func (m *Host) ConnectedPeers() int { return len(m.h.Network().Peers()) }

var _ Transport = (*Host)(nil)
