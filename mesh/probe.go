package mesh

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
)

// ProbeProtocol is the libp2p protocol of round-trip probes: the prober
// writes probeBytes, the other side writes them back, at most probeEchoes
// times per stream. Round trips group members into sites (halton.SiteLabel).
//
// A testnet's ShapedTransport adds its emulated latency to what a probe
// measures, so the testnet groups members by the WAN it emulates.
const ProbeProtocol = protocol.ID("/sketchmesh/probe/1")

const (
	probeBytes   = 8
	probeEchoes  = 5
	probeTimeout = 10 * time.Second
)

// serveProbe echoes a prober's messages back.
func (m *Host) serveProbe(s network.Stream) {
	defer func() { _ = s.Close() }()
	_ = s.SetDeadline(time.Now().Add(probeTimeout))
	buf := make([]byte, probeBytes)
	for range probeEchoes {
		if _, err := io.ReadFull(s, buf); err != nil {
			return
		}
		if _, err := s.Write(buf); err != nil {
			return
		}
	}
}

// ProbeRTT measures the round-trip time to member peer to: the least of
// four echoes on one probe stream, after a first that pays for the stream's
// negotiation. The peer must be reachable (connected, or its addresses in
// the peerstore). A connection the probe had to open is closed again
// unless an update stream came to use it: probing every member must not
// leave a node connected to every member.
func (m *Host) ProbeRTT(ctx context.Context, to string) (time.Duration, error) {
	pid, err := peer.Decode(to)
	if err != nil {
		return 0, fmt.Errorf("probe %s: %w", to, err)
	}
	if m.h.Network().Connectedness(pid) != network.Connected {
		defer func() {
			if _, linked := m.Links()[pid]; !linked {
				_ = m.h.Network().ClosePeer(pid)
			}
		}()
	}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	s, err := m.h.NewStream(ctx, pid, ProbeProtocol)
	if err != nil {
		return 0, fmt.Errorf("probe %s: %w", shortID(pid), OneLine(err))
	}
	defer func() { _ = s.Close() }()
	if d, ok := ctx.Deadline(); ok {
		_ = s.SetDeadline(d)
	}
	buf := make([]byte, probeBytes)
	best := time.Duration(-1)
	for k := range probeEchoes {
		start := time.Now()
		if _, err := s.Write(buf); err != nil {
			return 0, fmt.Errorf("probe %s: %w", shortID(pid), OneLine(err))
		}
		if _, err := io.ReadFull(s, buf); err != nil {
			return 0, fmt.Errorf("probe %s: %w", shortID(pid), OneLine(err))
		}
		if rtt := time.Since(start); k > 0 && (best < 0 || rtt < best) {
			best = rtt
		}
	}
	return best, nil
}
