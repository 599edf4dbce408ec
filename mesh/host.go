package mesh

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/pnet"
	"github.com/libp2p/go-libp2p/core/protocol"
	"github.com/libp2p/go-libp2p/p2p/muxer/yamux"
	"github.com/libp2p/go-libp2p/p2p/security/noise"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/sketchmesh/sketchmesh/node"
)

// UpdateProtocol is the libp2p protocol id of the update stream.
const UpdateProtocol = protocol.ID("/sketchmesh/update/1")

// lengthPrefix is the size of a message's length header on a stream.
const lengthPrefix = 4

// HostConfig configures a Host.
type HostConfig struct {
	// ListenAddrs are multiaddrs to listen on, such as /ip4/127.0.0.1/tcp/0.
	ListenAddrs []string
	// Key is the host's identity; nil generates a fresh Ed25519 key.
	Key crypto.PrivKey
	// Logger receives the host's logs; nil uses slog.Default().
	Logger *slog.Logger
	// PSK, when set, makes the host a member of a private network: every
	// connection is encrypted with this 32-byte pre-shared key (LoadPSK),
	// and peers without it cannot connect. Private networks run over TCP
	// only (go-libp2p's QUIC transport does not support them).
	PSK pnet.PSK
	// Allow, when set, admits only the peers on the list, in both
	// directions (see AllowList); nil admits any peer.
	Allow *AllowList
	// Limits bound what peers can make the host spend (resource manager,
	// message size, per-peer rate of update messages); zero fields take
	// their defaults (DefaultLimits).
	Limits Limits
	// Reach, when set, adds QUIC (unless PSK is set), relays, hole
	// punching, AutoNAT and announced addresses (see ReachConfig).
	Reach *ReachConfig
}

// TrafficStats counts what a host put on and took off its update streams,
// length prefixes included.
type TrafficStats struct {
	BytesSent    uint64
	MessagesSent uint64
	// MembershipBytesSent and MembershipMessagesSent are the part of the
	// above that carried membership announcements (hellos, admits, leaves
	// and their acknowledgements) rather than updates.
	MembershipBytesSent    uint64
	MembershipMessagesSent uint64
	BytesReceived          uint64
	MessagesReceived       uint64
	SendFailures           uint64
	BadStreams             uint64
	// Oversized counts messages refused for a length prefix above
	// Limits.MaxMessageBytes, Truncated those whose stream ended inside
	// them; each also resets its stream and counts in BadStreams.
	Oversized uint64
	Truncated uint64
	// Throttled counts messages held back by the per-peer rate limit, and
	// ThrottledSeconds the time they were held in all.
	Throttled        uint64
	ThrottledSeconds float64
	// Panics counts stream handlers that panicked (and were recovered).
	Panics uint64
	// SendDropped counts messages dropped from a peer's full send queue
	// (Limits.SendQueueBytes); SendFailures those whose stream could not be
	// opened or whose write failed or timed out.
	SendDropped uint64
	// InboxDropped counts arrived messages dropped because the inbox held
	// Limits.InboxBytes already.
	InboxDropped uint64
}

// Host is a libp2p host speaking the update protocol.
type Host struct {
	h   host.Host
	log *slog.Logger
	// Stream readers put arrivals on arrived, within inboxLimit bytes
	// (inboxBytes counts them until the node takes them); deliver hands
	// them on to inbox, which the node reads.
	arrived    chan Inbound
	inbox      chan Inbound
	inboxBytes atomic.Int64
	inboxLimit int64
	// lastInboxWarn (unix nanoseconds) rate-limits reports of inbox drops.
	lastInboxWarn atomic.Int64
	// maxMessage bounds an inbound message; rate limits each peer's.
	maxMessage int
	rate       *rateLimiter
	// maxQueue bounds each peer's send queue in bytes; writeTimeout is the
	// fixed part of a message's write deadline.
	maxQueue     int
	writeTimeout time.Duration
	// refusedLog spaces the warnings about refused update streams.
	refusedLog logEvery
	// rcmgr is the resource manager NewHost made, closed with the host.
	rcmgr network.ResourceManager
	// reach runs relays and NAT traversal (HostConfig.Reach); links tracks
	// the paths of update streams.
	reach *reacher
	links linkBook
	// traffic counts each peer's update messages (PeerTraffic).
	traffic peerBook

	mu      sync.Mutex
	senders map[peer.ID]*sender
	// members are the peers that run a member of the mesh (addMember):
	// their link records outlive their connections, for the run's report.
	members map[peer.ID]bool
	closed  bool
	wg      sync.WaitGroup
	// shutdown is closed by Close, releasing stream readers blocked on inbox;
	// ctx is cancelled with it, ending the senders' stream opens.
	shutdown chan struct{}
	ctx      context.Context
	cancel   context.CancelFunc

	bytesSent, msgsSent, bytesRecv, msgsRecv, sendFailures, badStreams atomic.Uint64
	membershipBytesSent, membershipMsgsSent                            atomic.Uint64
	oversized, truncated, throttled, throttledNanos, panics            atomic.Uint64
	sendDropped, inboxDropped                                          atomic.Uint64
}

// NewHost starts a libp2p host with TCP, Noise and yamux that listens on
// cfg.ListenAddrs and serves the update protocol, within cfg.Limits, in the
// private network of cfg.PSK and admitting only cfg.Allow when they are set.
func NewHost(cfg HostConfig) (*Host, error) {
	if err := cfg.Limits.Validate(); err != nil {
		return nil, err
	}
	limits := cfg.Limits.withDefaults()
	if cfg.PSK != nil && len(cfg.PSK) != 32 {
		return nil, fmt.Errorf("%w: %d bytes, want 32", ErrBadPSK, len(cfg.PSK))
	}
	key := cfg.Key
	if key == nil {
		var err error
		key, _, err = crypto.GenerateEd25519Key(nil)
		if err != nil {
			return nil, fmt.Errorf("generate host key: %w", err)
		}
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	if err := CheckListen(cfg.ListenAddrs); err != nil {
		return nil, fmt.Errorf("listen on %w", err)
	}
	mgr, err := limits.resourceManager()
	if err != nil {
		return nil, err
	}
	opts := []libp2p.Option{
		libp2p.Identity(key),
		libp2p.UserAgent(AgentVersion()),
		libp2p.ListenAddrStrings(cfg.ListenAddrs...),
		libp2p.Transport(tcp.NewTCPTransport),
		libp2p.Security(noise.ID, noise.New),
		libp2p.Muxer(yamux.ID, yamux.DefaultTransport),
		libp2p.DisableRelay(),
		libp2p.DisableMetrics(),
		libp2p.ResourceManager(mgr),
	}
	if cfg.PSK != nil {
		opts = append(opts, libp2p.PrivateNetwork(cfg.PSK))
	}
	if cfg.Allow != nil {
		opts = append(opts, libp2p.ConnectionGater(cfg.Allow))
	}
	var reach *reacher
	if cfg.Reach != nil {
		reach = newReacher(*cfg.Reach, logger)
		opts = append(opts, reach.options(cfg.PSK != nil)...)
	}
	h, err := libp2p.New(opts...)
	if err != nil {
		_ = mgr.Close()
		return nil, fmt.Errorf("start libp2p host on %v: %w", cfg.ListenAddrs, OneLine(err))
	}
	mh := newHost(h, logger, limits)
	mh.rcmgr = mgr
	if reach != nil {
		if err := reach.start(h); err != nil {
			_ = h.Close()
			_ = mgr.Close()
			return nil, err
		}
		mh.reach = reach
	}
	if cfg.PSK != nil {
		mh.log.Info("private network: connections need the pre-shared key; TCP only (go-libp2p's QUIC does not support private networks)")
	}
	if cfg.Allow != nil {
		mh.log.Info("allow list: only listed peers may connect")
	}
	return mh, nil
}

// Wrap serves the update protocol on an existing libp2p host, such as one
// on an emulated network, with the default message size and rate limits
// (the host's own resource manager, gater and network stay as they are).
func Wrap(h host.Host, logger *slog.Logger) *Host {
	if logger == nil {
		logger = slog.Default()
	}
	return newHost(h, logger, DefaultLimits())
}

func newHost(h host.Host, logger *slog.Logger, limits Limits) *Host {
	ctx, cancel := context.WithCancel(context.Background())
	mh := &Host{
		ctx:          ctx,
		cancel:       cancel,
		h:            h,
		log:          logger.With("peer", shortID(h.ID())),
		arrived:      make(chan Inbound, 1024),
		inbox:        make(chan Inbound),
		inboxLimit:   int64(limits.InboxBytes),
		senders:      map[peer.ID]*sender{},
		shutdown:     make(chan struct{}),
		maxMessage:   limits.MaxMessageBytes,
		rate:         newRateLimiter(limits),
		maxQueue:     limits.SendQueueBytes,
		writeTimeout: limits.WriteTimeout,
	}
	h.SetStreamHandler(UpdateProtocol, mh.handleStream)
	h.SetStreamHandler(ProbeProtocol, mh.serveProbe)
	h.Network().Notify(&network.NotifyBundle{DisconnectedF: func(_ network.Network, c network.Conn) { mh.disconnected(c.RemotePeer()) }})
	go mh.deliver()
	return mh
}

// deliver hands arrivals to the node in order, and releases their bytes
// from the inbox's budget once the node has taken them.
func (m *Host) deliver() {
	for {
		select {
		case in := <-m.arrived:
			select {
			case m.inbox <- in:
				m.inboxBytes.Add(-int64(len(in.Data)))
			case <-m.shutdown:
				return
			}
		case <-m.shutdown:
			return
		}
	}
}

// admitToInbox reserves room for n bytes in the inbox's budget; it reports
// false, and counts the message dropped, when there is none.
func (m *Host) admitToInbox(from peer.ID, n int) bool {
	if m.inboxBytes.Add(int64(n)) <= m.inboxLimit {
		return true
	}
	m.inboxBytes.Add(-int64(n))
	dropped := m.inboxDropped.Add(1)
	now := time.Now().UnixNano()
	if last := m.lastInboxWarn.Load(); now-last >= int64(failureLogEvery) && m.lastInboxWarn.CompareAndSwap(last, now) {
		m.log.Warn("inbox full: dropping arriving updates until the node catches up",
			"from", shortID(from), "bytes", n, "limit_bytes", m.inboxLimit, "dropped_total", dropped)
	}
	return false
}

// disconnected drops the link record of a peer whose connection closed,
// unless the host sends to it or it runs a member (addMember): peers that
// are not members must not grow the book, whoever connects.
func (m *Host) disconnected(p peer.ID) {
	m.mu.Lock()
	_, sending := m.senders[p]
	member := m.members[p]
	m.mu.Unlock()
	if !sending && !member {
		m.dropLink(p)
	}
}

// dropLink forgets what the host knows of its link with p.
func (m *Host) dropLink(p peer.ID) {
	m.links.mu.Lock()
	delete(m.links.peers, p)
	delete(m.links.warned, p)
	m.links.mu.Unlock()
}

// ID returns the host's peer id as a member id.
func (m *Host) ID() string { return m.h.ID().String() }

// Libp2p returns the underlying libp2p host.
func (m *Host) Libp2p() host.Host { return m.h }

// Addrs returns the host's full multiaddrs, /p2p/ id included: the strings
// other nodes dial.
func (m *Host) Addrs() []ma.Multiaddr {
	addrs, err := peer.AddrInfoToP2pAddrs(&peer.AddrInfo{ID: m.h.ID(), Addrs: m.h.Addrs()})
	if err != nil {
		return nil
	}
	return addrs
}

// Connect dials a peer.
func (m *Host) Connect(ctx context.Context, info peer.AddrInfo) error {
	if err := m.h.Connect(ctx, info); err != nil {
		return fmt.Errorf("connect to %s: %w", info.ID, err)
	}
	return nil
}

// Inbox implements Transport.
func (m *Host) Inbox() <-chan Inbound { return m.inbox }

// Traffic returns the host's traffic counters.
func (m *Host) Traffic() TrafficStats {
	return TrafficStats{
		BytesSent:              m.bytesSent.Load(),
		MessagesSent:           m.msgsSent.Load(),
		MembershipBytesSent:    m.membershipBytesSent.Load(),
		MembershipMessagesSent: m.membershipMsgsSent.Load(),
		BytesReceived:          m.bytesRecv.Load(),
		MessagesReceived:       m.msgsRecv.Load(),
		SendFailures:           m.sendFailures.Load(),
		BadStreams:             m.badStreams.Load(),
		Oversized:              m.oversized.Load(),
		Truncated:              m.truncated.Load(),
		Throttled:              m.throttled.Load(),
		ThrottledSeconds:       time.Duration(m.throttledNanos.Load()).Seconds(),
		Panics:                 m.panics.Load(),
		SendDropped:            m.sendDropped.Load(),
		InboxDropped:           m.inboxDropped.Load(),
	}
}

// Send queues data for the peer whose id is to (its text form) and
// returns at once; see SendTo.
func (m *Host) Send(to string, data []byte) {
	pid, err := peer.Decode(to)
	if err != nil {
		m.log.Error("send to invalid peer id", "to", to, "err", err)
		m.sendFailures.Add(1)
		return
	}
	m.SendTo(pid, data)
}

// SendTo implements Transport: it queues data for peer to and returns at
// once.
func (m *Host) SendTo(to peer.ID, data []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	s := m.senders[to]
	if s == nil {
		s = &sender{host: m, to: to, wake: make(chan struct{}, 1), counters: m.traffic.get(to)}
		m.senders[to] = s
		m.wg.Add(1)
		go s.loop()
	}
	s.push(data)
}

// LinkRate returns the throughput of the link to peer p as measured from
// what this host wrote to it (node.LinkRate), in bytes per second; 0 when
// it is not known (the link never backed up, or nothing was sent).
func (m *Host) LinkRate(p peer.ID) float64 {
	m.mu.Lock()
	s := m.senders[p]
	m.mu.Unlock()
	if s == nil {
		return 0
	}
	return s.linkRate()
}

// Flush implements Transport: it waits until every queued message has been
// written or has failed.
func (m *Host) Flush(ctx context.Context) error {
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		m.mu.Lock()
		busy := false
		for _, s := range m.senders {
			if s.busy() {
				busy = true
				break
			}
		}
		m.mu.Unlock()
		if !busy {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("flush sends: %w", ctx.Err())
		case <-tick.C:
		}
	}
}

// writeDeadline is how long the write of an n-byte message may take: the
// fixed WriteTimeout plus the message at 64 KiB/s, a slow WAN path.
func (m *Host) writeDeadline(n int) time.Duration {
	return m.writeTimeout + time.Duration(float64(n)/(64<<10)*float64(time.Second))
}

// Forget drops what is queued for peer p: p's member left or was declared
// dead, so nothing more goes to it and its link's failures are neither
// retried nor reported. The paths the link took stay on record (Links)
// while p is connected; once it is not, its record is dropped. A later
// Send to p starts afresh.
func (m *Host) Forget(p peer.ID) {
	m.mu.Lock()
	if s := m.senders[p]; s != nil {
		s.stop()
		delete(m.senders, p)
	}
	m.mu.Unlock()
	// The link record stays: it is a member's, and the run's report counts
	// the paths its links took. Non-members' records go when they
	// disconnect (linkDown).
	m.links.mu.Lock()
	if l := m.links.peers[p]; l != nil {
		l.FailingSince = time.Time{}
	}
	delete(m.links.warned, p)
	m.links.mu.Unlock()
}

// closeWait bounds how long Close waits for the senders once the libp2p
// host is closed; they return at once then, so this only guards against a
// transport that does not fail a blocked write when its connection closes.
const closeWait = 2 * time.Second

// Close stops the senders and the libp2p host, and returns within a few
// seconds whatever peers do: it closes the libp2p host first, which closes
// every connection and so fails any write blocked on a peer that stopped
// reading, and only then joins the senders, with a bounded wait. What was
// queued and not yet written is lost, as it is when a node stops.
func (m *Host) Close() error {
	m.mu.Lock()
	if !m.closed {
		close(m.shutdown)
		m.cancel()
	}
	m.closed = true
	for _, s := range m.senders {
		s.stop()
	}
	m.mu.Unlock()
	if m.reach != nil {
		m.reach.close()
	}
	err := m.h.Close()
	joined := make(chan struct{})
	go func() {
		m.wg.Wait()
		close(joined)
	}()
	t := time.NewTimer(closeWait)
	defer t.Stop()
	select {
	case <-joined:
	case <-t.C:
		m.log.Warn("closing: update senders still running", "waited", closeWait)
	}
	if m.rcmgr != nil {
		if cerr := m.rcmgr.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

func (m *Host) handleStream(s network.Stream) {
	from := s.Conn().RemotePeer()
	defer func() {
		// A bug reached by a peer's bytes must not take the node down.
		if p := recover(); p != nil {
			m.panics.Add(1)
			m.log.Error("update stream handler panicked", "from", shortID(from), "panic", p)
			_ = s.Reset()
		}
	}()
	m.linkUp(from, s.Conn())
	counters := m.traffic.get(from)
	r := bufio.NewReader(s)
	for {
		data, err := readMessageMax(r, m.maxMessage)
		if err != nil {
			if !errors.Is(err, io.EOF) {
				m.badStreams.Add(1)
				refused := true
				switch {
				case errors.Is(err, errTooLarge):
					m.oversized.Add(1)
				case errors.Is(err, io.ErrUnexpectedEOF):
					m.truncated.Add(1)
				default:
					refused = false // reset or closed by the peer
				}
				if !refused {
					m.log.Debug("update stream closed", "from", shortID(from), "err", err)
				} else if ok, n := m.refusedLog.allow(time.Now()); ok {
					m.log.Warn("update message refused before it was decoded; stream reset", "from", shortID(from), "err", OneLine(err), "unreported_since_last", n)
				}
				_ = s.Reset()
				return
			}
			_ = s.Close()
			return
		}
		m.bytesRecv.Add(uint64(len(data) + lengthPrefix))
		m.msgsRecv.Add(1)
		counters.bytesRecv.Add(uint64(len(data) + lengthPrefix))
		counters.msgsRecv.Add(1)
		if wait := m.rate.delay(from, len(data)+lengthPrefix, time.Now()); wait > 0 {
			m.throttled.Add(1)
			m.throttledNanos.Add(uint64(wait))
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-m.shutdown:
				t.Stop()
				_ = s.Reset()
				return
			}
		}
		if !m.admitToInbox(from, len(data)) {
			continue
		}
		select {
		case m.arrived <- Inbound{From: from.String(), Data: data}:
		case <-m.shutdown:
			m.inboxBytes.Add(-int64(len(data)))
			_ = s.Reset()
			return
		}
	}
}

// errTooLarge is returned for a message length above the envelope limit.
var errTooLarge = errors.New("message too large")

// readMessage reads one length-prefixed message of at most
// node.MaxEnvelopeBytes (see readMessageMax).
func readMessage(r io.Reader) ([]byte, error) {
	return readMessageMax(r, node.MaxEnvelopeBytes)
}

// firstChunk is the most readMessageMax allocates before bytes arrive.
const firstChunk = 64 << 10

// readMessageMax reads one length-prefixed message, checking the length
// against limit before it reads on. Its buffer grows with the bytes that
// actually arrive (doubling from 64 KiB, never past the declared length),
// so a peer that declares a large message and sends little of it costs
// little memory.
func readMessageMax(r io.Reader, limit int) ([]byte, error) {
	var hdr [lengthPrefix]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint32(hdr[:]))
	if n > limit {
		return nil, fmt.Errorf("%w: %d bytes (limit %d)", errTooLarge, n, limit)
	}
	data := make([]byte, 0, min(n, firstChunk))
	for len(data) < n {
		if len(data) == cap(data) {
			data = append(make([]byte, 0, min(n, 2*cap(data))), data...)
		}
		k, err := io.ReadFull(r, data[len(data):min(n, cap(data))])
		data = data[:len(data)+k]
		if err != nil {
			return nil, fmt.Errorf("read %d-byte message: %d bytes arrived: %w", n, len(data), io.ErrUnexpectedEOF)
		}
	}
	return data, nil
}

func writeMessage(w io.Writer, data []byte) error {
	var hdr [lengthPrefix]byte
	binary.BigEndian.PutUint32(hdr[:], uint32(len(data)))
	if _, err := w.Write(hdr[:]); err != nil {
		return err
	}
	_, err := w.Write(data)
	return err
}
