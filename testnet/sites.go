package testnet

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/sketchmesh/sketchmesh/halton"
)

// Site-aware overlay (Config.Sites): before training, every node probes
// every other over the emulated WAN (mesh.ShapedTransport.ProbeRTT) and derives its
// site label from its own round trips (halton.SiteLabel), as a member of a
// real mesh does before it announces the label in its hellos; the overlay
// is halton.BuildSites over those labels, the flat overlay when they name
// one site. On loopback (WAN lan) every node is one site by construction
// and nothing is probed.

// probeWorkers bounds the probes in flight: P² of them for P nodes.
const probeWorkers = 16

// siteLabels probes every ordered pair of nodes and returns each node's
// site label, or nil when the run's overlay does not use sites.
func siteLabels(ctx context.Context, cfg Config, members []*member) (map[string]string, error) {
	if cfg.Topology != "halton" || cfg.Sites == "off" || !cfg.WAN.Emulated() || len(members) < 2 {
		return nil, nil
	}
	start := time.Now()
	n := len(members)
	cfg.Logger.Info("measuring round trips for the site-aware overlay", "pairs", n*(n-1))
	type pair struct{ from, to int }
	jobs := make(chan pair)
	rtt := make([][]time.Duration, n)
	for i := range rtt {
		rtt[i] = make([]time.Duration, n)
	}
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	for range min(probeWorkers, n*(n-1)) {
		wg.Go(func() {
			for j := range jobs {
				a, b := members[j.from].host, members[j.to].host
				info := peer.AddrInfo{ID: b.Libp2p().ID(), Addrs: b.Libp2p().Addrs()}
				d, err := time.Duration(0), a.Connect(ctx, info)
				if err == nil {
					d, err = members[j.from].net.ProbeRTT(ctx, b.ID())
				}
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = fmt.Errorf("node %d probing node %d: %w", j.from, j.to, err)
				}
				rtt[j.from][j.to] = d
				mu.Unlock()
			}
		})
	}
	for i := range n {
		for j := range n {
			if i != j {
				jobs <- pair{i, j}
			}
		}
	}
	close(jobs)
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	// The probes connected every pair; the run keeps the overlay's links
	// only (connect dials them).
	for _, m := range members {
		for _, p := range m.host.Libp2p().Network().Peers() {
			_ = m.host.Libp2p().Network().ClosePeer(p)
		}
	}
	labels := make(map[string]string, n)
	for i, m := range members {
		measured := make(map[string]time.Duration, n-1)
		for j, o := range members {
			if j != i {
				measured[o.host.ID()] = rtt[i][j]
			}
		}
		labels[m.host.ID()] = halton.SiteLabel(m.host.ID(), measured)
		cfg.Logger.Debug("round trips measured", "node", i, "rtt", rtt[i], "site", labels[m.host.ID()])
	}
	sizes := map[string]int{}
	for _, l := range labels {
		sizes[l]++
	}
	counts := slices.Sorted(maps.Values(sizes))
	cfg.Logger.Info("sites measured", "sites", len(sizes), "nodes_per_site", counts, "took", time.Since(start).Round(time.Millisecond))
	return labels, nil
}
