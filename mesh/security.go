package mesh

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/control"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/pnet"
	"github.com/libp2p/go-libp2p/core/protocol"
	rcmgr "github.com/libp2p/go-libp2p/p2p/host/resource-manager"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/sketchmesh/sketchmesh/node"
)

// A private mesh (pre-shared key).
//
// With HostConfig.PSK set, every connection is encrypted with the key
// (libp2p's private networks) before the Noise handshake even starts: a peer
// without the key cannot complete a connection or learn anything but that
// something listens. go-libp2p's QUIC transport does not support private
// networks, so a private host runs TCP only, which is all a Host runs today.

// pskHeader is the first line of a PSK file: the format go-libp2p and IPFS
// use for swarm.key files.
const pskHeader = "/key/swarm/psk/1.0.0/"

// maxPSKFileBytes bounds what LoadPSK reads: a key file is under 100 bytes.
const maxPSKFileBytes = 4096

// LoadPSK reads a pre-shared key file in the swarm.key format:
//
//	/key/swarm/psk/1.0.0/
//	/base16/
//	<64 hexadecimal digits>
//
// (/base64/ and /bin/ encodings are accepted too).
func LoadPSK(path string) (pnet.PSK, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("psk: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxPSKFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("psk: read %s: %w", path, err)
	}
	psk, err := ParsePSK(data)
	if err != nil {
		return nil, fmt.Errorf("psk %s: %w", path, err)
	}
	return psk, nil
}

// ErrBadPSK is wrapped by every PSK parsing error.
var ErrBadPSK = errors.New("bad pre-shared key")

// ParsePSK parses the contents of a PSK file (see LoadPSK).
func ParsePSK(data []byte) (pnet.PSK, error) {
	if len(data) > maxPSKFileBytes {
		return nil, fmt.Errorf("%w: more than %d bytes", ErrBadPSK, maxPSKFileBytes)
	}
	psk, err := pnet.DecodeV1PSK(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadPSK, err)
	}
	if len(psk) != 32 {
		return nil, fmt.Errorf("%w: %d bytes, want 32", ErrBadPSK, len(psk))
	}
	return psk, nil
}

// NewPSK returns a fresh random 32-byte key and its file contents, for
// `LoadPSK` on every member.
func NewPSK() (pnet.PSK, []byte, error) {
	psk := make([]byte, 32)
	if _, err := rand.Read(psk); err != nil {
		return nil, nil, fmt.Errorf("generate psk: %w", err)
	}
	return psk, EncodePSK(psk), nil
}

// EncodePSK returns the swarm.key file contents of psk, in base16.
func EncodePSK(psk pnet.PSK) []byte {
	return []byte(pskHeader + "\n/base16/\n" + hex.EncodeToString(psk) + "\n")
}

// Member ids.
//
// A member id is a libp2p peer id, optionally followed by "/" and a decimal
// incarnation number: "12D3KooW...", "12D3KooW.../3". A node restarted from a
// checkpoint rejoins as a new incarnation of the same peer. The key that
// signs a member's updates is the one its peer id embeds (Ed25519 ids embed
// their public key).

// MemberPeer returns the peer id and incarnation (0 when absent) of a member
// id.
func MemberPeer(member string) (peer.ID, uint64, error) {
	idPart, inc, hasInc := strings.Cut(member, "/")
	pid, err := peer.Decode(idPart)
	if err != nil {
		return "", 0, fmt.Errorf("member id %q: %w", member, err)
	}
	if !hasInc {
		return pid, 0, nil
	}
	n, err := strconv.ParseUint(inc, 10, 64)
	if err != nil || strconv.FormatUint(n, 10) != inc {
		return "", 0, fmt.Errorf("member id %q: incarnation %q is not a canonical decimal number", member, inc)
	}
	return pid, n, nil
}

// The allow list.

// ParseAllow parses an allow list given as peer or member ids separated by
// commas, spaces or newlines; '#' starts a comment that runs to the end of
// its line. Member ids are reduced to their peer ids; duplicates are kept
// once. An empty list is an error: it would admit nobody.
func ParseAllow(spec string) ([]peer.ID, error) {
	var out []peer.ID
	seen := map[peer.ID]bool{}
	for _, line := range strings.Split(spec, "\n") {
		line, _, _ = strings.Cut(line, "#")
		for _, f := range strings.FieldsFunc(line, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\r' }) {
			pid, _, err := MemberPeer(f)
			if err != nil {
				return nil, fmt.Errorf("allow list: %w", err)
			}
			if !seen[pid] {
				seen[pid] = true
				out = append(out, pid)
			}
		}
	}
	if len(out) == 0 {
		return nil, errors.New("allow list: no peer ids")
	}
	return out, nil
}

// LoadAllow reads an allow list from a file (the syntax of ParseAllow, one
// or more ids a line).
func LoadAllow(path string) ([]peer.ID, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("allow list: %w", err)
	}
	defer f.Close()
	var sb strings.Builder
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		sb.WriteString(sc.Text())
		sb.WriteByte('\n')
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("allow list %s: %w", path, err)
	}
	ids, err := ParseAllow(sb.String())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return ids, nil
}

// AllowList is a connection gater that admits only listed peers, in both
// directions: a dial to an unlisted peer is not made, and a connection from
// one is closed as soon as the handshake has authenticated its peer id. The
// list may change while the host runs (members join and leave). It is safe
// for concurrent use.
type AllowList struct {
	mu      sync.RWMutex
	allowed map[peer.ID]bool
	refused atomic.Uint64
}

// NewAllowList returns a gater admitting ids.
func NewAllowList(ids ...peer.ID) *AllowList {
	a := &AllowList{allowed: make(map[peer.ID]bool, len(ids))}
	for _, id := range ids {
		a.allowed[id] = true
	}
	return a
}

// Add admits id.
func (a *AllowList) Add(id peer.ID) {
	a.mu.Lock()
	a.allowed[id] = true
	a.mu.Unlock()
}

// Remove stops admitting id; connections already open stay open.
func (a *AllowList) Remove(id peer.ID) {
	a.mu.Lock()
	delete(a.allowed, id)
	a.mu.Unlock()
}

// Allowed reports whether id is admitted.
func (a *AllowList) Allowed(id peer.ID) bool {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.allowed[id]
}

// Refused returns how many dials and connections the list has refused.
func (a *AllowList) Refused() uint64 { return a.refused.Load() }

func (a *AllowList) check(id peer.ID) bool {
	if a.Allowed(id) {
		return true
	}
	a.refused.Add(1)
	return false
}

// InterceptPeerDial implements connmgr.ConnectionGater.
func (a *AllowList) InterceptPeerDial(p peer.ID) bool { return a.check(p) }

// InterceptAddrDial implements connmgr.ConnectionGater.
func (a *AllowList) InterceptAddrDial(peer.ID, ma.Multiaddr) bool { return true }

// InterceptAccept implements connmgr.ConnectionGater: the peer is not known
// before the handshake, so every connection is let in to it.
func (a *AllowList) InterceptAccept(network.ConnMultiaddrs) bool { return true }

// InterceptSecured implements connmgr.ConnectionGater.
func (a *AllowList) InterceptSecured(_ network.Direction, p peer.ID, _ network.ConnMultiaddrs) bool {
	return a.check(p)
}

// InterceptUpgraded implements connmgr.ConnectionGater.
func (a *AllowList) InterceptUpgraded(network.Conn) (bool, control.DisconnectReason) {
	return true, 0
}

// Limits bound what peers can make a host spend. The zero value of a field
// picks its default; the defaults leave honest meshes of up to a few hundred
// members untouched.
type Limits struct {
	// Conns caps the host's connections, both directions (default 1024).
	Conns int
	// ConnsPerPeer caps connections with one peer (default 8).
	ConnsPerPeer int
	// StreamsPerPeer caps streams with one peer, all protocols and both
	// directions (default 64).
	StreamsPerPeer int
	// UpdateStreamsPerPeer caps a peer's inbound update streams (default 4;
	// an honest peer opens one).
	UpdateStreamsPerPeer int
	// MemoryPerPeer caps, in bytes, the memory libp2p reserves for one
	// peer's connections and streams (default 256 MiB).
	MemoryPerPeer int64
	// Memory caps, in bytes, what libp2p reserves for the whole host
	// (default 2 GiB).
	Memory int64
	// MaxMessageBytes is the largest update message a peer may send, in
	// bytes; a longer length prefix resets the stream before anything is
	// read (default node.MaxEnvelopeBytes, 64 MiB).
	MaxMessageBytes int
	// UpdateMessagesPerSecond and UpdateBytesPerSecond rate-limit each
	// peer's update messages (defaults 2000 messages and 256 MiB per
	// second, each with a burst of one second's worth). A peer over its
	// rate is not read until it is back under it, so TCP flow control
	// slows the sender down; nothing it sent is lost.
	UpdateMessagesPerSecond float64
	UpdateBytesPerSecond    float64
	// SendQueueBytes caps what the host queues for one peer, in bytes
	// (default 128 MiB). Past it the oldest queued messages are dropped and
	// counted (TrafficStats.SendDropped); the peer pulls what it misses.
	// The message being queued is always kept.
	SendQueueBytes int
	// WriteTimeout bounds the write of one message: this much, plus the
	// message's time at 64 KiB/s (default 10 s). A peer that stops reading
	// has its stream reset, instead of holding its queue for ever.
	WriteTimeout time.Duration
	// InboxBytes caps the bytes of the messages that arrived and wait for
	// the node to take them (default 256 MiB, at least MaxMessageBytes).
	// Past it arriving messages are dropped and counted
	// (TrafficStats.InboxDropped); their senders' updates are pulled again
	// when they are missed.
	InboxBytes int
}

// DefaultLimits returns the limits a Host uses when HostConfig.Limits is
// zero.
func DefaultLimits() Limits { return Limits{}.withDefaults() }

func (l Limits) withDefaults() Limits {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&l.Conns, 1024)
	def(&l.ConnsPerPeer, 8)
	def(&l.StreamsPerPeer, 64)
	def(&l.UpdateStreamsPerPeer, 4)
	def(&l.MaxMessageBytes, node.MaxEnvelopeBytes)
	def(&l.SendQueueBytes, 128<<20)
	def(&l.InboxBytes, max(256<<20, l.MaxMessageBytes))
	if l.WriteTimeout == 0 {
		l.WriteTimeout = 10 * time.Second
	}
	if l.MemoryPerPeer == 0 {
		l.MemoryPerPeer = 256 << 20
	}
	if l.Memory == 0 {
		l.Memory = 2 << 30
	}
	if l.UpdateMessagesPerSecond == 0 {
		l.UpdateMessagesPerSecond = 2000
	}
	if l.UpdateBytesPerSecond == 0 {
		l.UpdateBytesPerSecond = 256 << 20
	}
	return l
}

// Validate checks l (after defaults).
func (l Limits) Validate() error {
	l = l.withDefaults()
	switch {
	case l.Conns < 1 || l.ConnsPerPeer < 1 || l.StreamsPerPeer < 1 || l.UpdateStreamsPerPeer < 1:
		return fmt.Errorf("limits: connection and stream limits must be >= 1, got %+v", l)
	case l.MemoryPerPeer < 1<<20 || l.Memory < l.MemoryPerPeer:
		return fmt.Errorf("limits: memory per peer must be >= 1 MiB and at most the host's memory, got %d and %d bytes", l.MemoryPerPeer, l.Memory)
	case l.MaxMessageBytes < 1 || l.MaxMessageBytes > node.MaxEnvelopeBytes:
		return fmt.Errorf("limits: max message bytes must be in [1, %d], got %d", node.MaxEnvelopeBytes, l.MaxMessageBytes)
	case !(l.UpdateMessagesPerSecond > 0) || !(l.UpdateBytesPerSecond > 0) || math.IsInf(l.UpdateMessagesPerSecond, 0) || math.IsInf(l.UpdateBytesPerSecond, 0):
		return fmt.Errorf("limits: update rates must be finite and > 0, got %v messages/s and %v bytes/s", l.UpdateMessagesPerSecond, l.UpdateBytesPerSecond)
	case l.SendQueueBytes < 0 || l.WriteTimeout < 0:
		return fmt.Errorf("limits: send queue bytes and write timeout must be >= 0 (0 = default), got %d bytes and %v", l.SendQueueBytes, l.WriteTimeout)
	case l.InboxBytes < l.MaxMessageBytes:
		return fmt.Errorf("limits: inbox bytes must be at least the max message bytes %d (0 = default), got %d", l.MaxMessageBytes, l.InboxBytes)
	}
	return nil
}

// resourceManager builds go-libp2p's resource manager for l: the library's
// defaults, scaled to the machine, with the host-wide, per-peer and
// update-protocol limits of l on top.
func (l Limits) resourceManager() (network.ResourceManager, error) {
	scaling := rcmgr.DefaultLimits
	libp2p.SetDefaultServiceLimits(&scaling)
	perPeer := rcmgr.ResourceLimits{
		Conns:   rcmgr.LimitVal(l.ConnsPerPeer),
		Streams: rcmgr.LimitVal(l.StreamsPerPeer),
		Memory:  rcmgr.LimitVal64(l.MemoryPerPeer),
	}
	partial := rcmgr.PartialLimitConfig{
		System: rcmgr.ResourceLimits{
			Conns:  rcmgr.LimitVal(l.Conns),
			Memory: rcmgr.LimitVal64(l.Memory),
		},
		PeerDefault: perPeer,
		ProtocolPeer: map[protocol.ID]rcmgr.ResourceLimits{
			UpdateProtocol: {
				StreamsInbound:  rcmgr.LimitVal(l.UpdateStreamsPerPeer),
				StreamsOutbound: rcmgr.LimitVal(l.UpdateStreamsPerPeer),
				Streams:         rcmgr.LimitVal(2 * l.UpdateStreamsPerPeer),
				Memory:          rcmgr.LimitVal64(l.MemoryPerPeer),
			},
		},
	}
	mgr, err := rcmgr.NewResourceManager(rcmgr.NewFixedLimiter(partial.Build(scaling.AutoScale())))
	if err != nil {
		return nil, fmt.Errorf("resource manager: %w", err)
	}
	return mgr, nil
}

// bucket is a token bucket: rate tokens a second, up to burst. Taking more
// than it holds leaves it in debt; the taker waits until the debt is paid,
// so a message larger than the burst still passes, at the rate.
type bucket struct {
	rate, burst, tokens float64
	last                time.Time
}

func newBucket(rate float64, now time.Time) bucket {
	return bucket{rate: rate, burst: rate, tokens: rate, last: now}
}

// take removes n tokens and returns how long the taker must wait.
func (b *bucket) take(n float64, now time.Time) time.Duration {
	b.tokens = math.Min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	b.last = now
	b.tokens -= n
	if b.tokens >= 0 {
		return 0
	}
	return time.Duration(-b.tokens / b.rate * float64(time.Second))
}

// rateLimiter rate-limits each peer's update messages, in messages and in
// bytes, over all the peer's streams.
type rateLimiter struct {
	mu    sync.Mutex
	msgs  float64
	bytes float64
	peers map[peer.ID]*peerBuckets
}

type peerBuckets struct{ msgs, bytes bucket }

// maxRatePeers bounds the peers a rateLimiter keeps buckets for.
const maxRatePeers = 1 << 13

func newRateLimiter(l Limits) *rateLimiter {
	return &rateLimiter{msgs: l.UpdateMessagesPerSecond, bytes: l.UpdateBytesPerSecond, peers: map[peer.ID]*peerBuckets{}}
}

// delay charges one message of n bytes to p and returns how long to hold it.
func (r *rateLimiter) delay(p peer.ID, n int, now time.Time) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	b := r.peers[p]
	if b == nil {
		if len(r.peers) >= maxRatePeers {
			// Peers come and go; starting everyone afresh only grants one
			// burst more.
			clear(r.peers)
		}
		b = &peerBuckets{msgs: newBucket(r.msgs, now), bytes: newBucket(r.bytes, now)}
		r.peers[p] = b
	}
	return max(b.msgs.take(1, now), b.bytes.take(float64(n), now))
}

// KeyAuthenticator signs a node's updates with its libp2p key and verifies
// other members' with the public keys their peer ids embed. It implements
// node.Authenticator and is safe for concurrent use.
type KeyAuthenticator struct {
	mesh string
	self string
	key  crypto.PrivKey

	mu   sync.Mutex
	keys map[peer.ID]crypto.PubKey
}

// maxCachedKeys bounds the public keys a KeyAuthenticator remembers.
const maxCachedKeys = 1 << 14

// NewKeyAuthenticator returns the authenticator of member self in the mesh
// named meshName, signing with key, which must be self's peer key.
// Signatures cover the mesh name, so an update signed in one mesh is refused
// in any other.
func NewKeyAuthenticator(meshName, self string, key crypto.PrivKey) (*KeyAuthenticator, error) {
	pid, _, err := MemberPeer(self)
	if err != nil {
		return nil, err
	}
	if !pid.MatchesPrivateKey(key) {
		return nil, fmt.Errorf("signing key is not the key of %s", pid)
	}
	return &KeyAuthenticator{mesh: meshName, self: self, key: key, keys: map[peer.ID]crypto.PubKey{}}, nil
}

// Sign implements node.Authenticator: it signs only for its own member id.
func (a *KeyAuthenticator) Sign(origin string, clock uint64, frame []byte) ([]byte, error) {
	if origin != a.self {
		return nil, fmt.Errorf("sign as %s: this key is %s's", origin, a.self)
	}
	sig, err := a.key.Sign(node.SignedBytes(a.mesh, origin, clock, frame))
	if err != nil {
		return nil, fmt.Errorf("sign update %d: %w", clock, err)
	}
	return sig, nil
}

// Verify implements node.Authenticator.
func (a *KeyAuthenticator) Verify(origin string, clock uint64, frame, sig []byte) error {
	pub, err := a.publicKey(origin)
	if err != nil {
		return fmt.Errorf("%w: %w", node.ErrBadSignature, err)
	}
	ok, err := pub.Verify(node.SignedBytes(a.mesh, origin, clock, frame), sig)
	if err != nil {
		return fmt.Errorf("%w: %s clock %d: %w", node.ErrBadSignature, origin, clock, err)
	}
	if !ok {
		return fmt.Errorf("%w: %s clock %d does not verify", node.ErrBadSignature, origin, clock)
	}
	return nil
}

// SignMessage implements node.Authenticator: it signs a membership message
// as this member.
func (a *KeyAuthenticator) SignMessage(msg []byte) ([]byte, error) {
	sig, err := a.key.Sign(node.MessageBytes(a.mesh, msg))
	if err != nil {
		return nil, fmt.Errorf("sign membership message: %w", err)
	}
	return sig, nil
}

// VerifyMessage implements node.Authenticator.
func (a *KeyAuthenticator) VerifyMessage(signer string, msg, sig []byte) error {
	pub, err := a.publicKey(signer)
	if err != nil {
		return fmt.Errorf("%w: %w", node.ErrBadSignature, err)
	}
	ok, err := pub.Verify(node.MessageBytes(a.mesh, msg), sig)
	if err != nil {
		return fmt.Errorf("%w: message of %s: %w", node.ErrBadSignature, signer, err)
	}
	if !ok {
		return fmt.Errorf("%w: message of %s does not verify", node.ErrBadSignature, signer)
	}
	return nil
}

// publicKey returns the key member's peer id embeds.
func (a *KeyAuthenticator) publicKey(member string) (crypto.PubKey, error) {
	pid, _, err := MemberPeer(member)
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if k, ok := a.keys[pid]; ok {
		return k, nil
	}
	k, err := pid.ExtractPublicKey()
	if err != nil {
		return nil, fmt.Errorf("member %s: its peer id embeds no public key (use Ed25519 identities): %w", member, err)
	}
	if len(a.keys) >= maxCachedKeys {
		clear(a.keys)
	}
	a.keys[pid] = k
	return k, nil
}
