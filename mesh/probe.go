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
// libp2p's own ping would do on a real network, but it bypasses the
// emulated links of a testnet (HostConfig.Shape); a probe waits for the
// emulated latency in each direction, as an update does, so the testnet
// measures the WAN it emulates.
const ProbeProtocol = protocol.ID("/sketchmesh/probe/1")

const (
	probeBytes   = 8
	probeEchoes  = 5
	probeTimeout = 10 * time.Second
)

// serveProbe echoes a prober's messages back, after the emulated latency.
func (m *Host) serveProbe(s network.Stream) {
	defer func() { _ = s.Close() }()
	_ = s.SetDeadline(time.Now().Add(probeTimeout))
	var shape LinkShape
	if m.shape != nil {
		shape = m.shape(s.Conn().RemotePeer().String())
	}
	buf := make([]byte, probeBytes)
	for range probeEchoes {
		if _, err := io.ReadFull(s, buf); err != nil {
			return
		}
		m.sleep(shape.Latency)
		if _, err := s.Write(buf); err != nil {
			return
		}
	}
}

// sleep waits d or until the host closes.
func (m *Host) sleep(d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-m.shutdown:
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
	var shape LinkShape
	if m.shape != nil {
		shape = m.shape(to)
	}
	buf := make([]byte, probeBytes)
	best := time.Duration(-1)
	for k := range probeEchoes {
		start := time.Now()
		m.sleep(shape.Latency)
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
