package testnet

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
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

// probeAttempts is how often a probe is tried before the run fails. The
// pairs are probed in two rounds (siteLabels) so that no two nodes dial
// each other at once: a dial that met the other end's dial now and then
// failed on loopback ("noise: message is too short"), even after retries.
const probeAttempts = 3

// probeRTT connects from to to and measures a round trip over the emulated
// link, trying again after a failed attempt (past the dial backoff libp2p
// puts on a peer whose dial failed).
func probeRTT(ctx context.Context, from, to *member) (time.Duration, error) {
	info := infoOf(to)
	var err error
	for attempt := range probeAttempts {
		dialCtx := ctx
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return 0, ctx.Err()
			case <-time.After(time.Duration(attempt) * 20 * time.Millisecond):
			}
			dialCtx = network.WithForceDirectDial(ctx, "site probe retried")
		}
		if err = from.host.Connect(dialCtx, info); err != nil {
			continue
		}
		var d time.Duration
		if d, err = from.net.ProbeRTT(ctx, to.host.ID()); err == nil {
			return d, nil
		}
	}
	return 0, fmt.Errorf("%d attempts: %w", probeAttempts, err)
}

// probeRounds orders the probes of n nodes as (from, to) pairs in two
// rounds, each to finish before the next starts: the first dials each
// pair from its lower index only, the second measures the other direction
// over the connections the first left open. So no pair is ever dialled
// from both ends at once.
func probeRounds(n int) [2][][2]int {
	var rounds [2][][2]int
	for i := range n {
		for j := range n {
			switch {
			case i < j:
				rounds[0] = append(rounds[0], [2]int{i, j})
			case i > j:
				rounds[1] = append(rounds[1], [2]int{i, j})
			}
		}
	}
	return rounds
}

func infoOf(m *member) peer.AddrInfo {
	return peer.AddrInfo{ID: m.host.Libp2p().ID(), Addrs: m.host.Libp2p().Addrs()}
}

// siteLabels probes every ordered pair of nodes and returns each node's
// site label, or nil when the run's overlay does not use sites.
func siteLabels(ctx context.Context, cfg Config, members []*member) (map[string]string, error) {
	if cfg.Topology != "halton" || cfg.Sites == "off" || !cfg.WAN.Emulated() || len(members) < 2 {
		return nil, nil
	}
	start := time.Now()
	n := len(members)
	cfg.Logger.Info("measuring round trips for the site-aware overlay", "pairs", n*(n-1))
	type pair struct {
		from, to int
		round    *sync.WaitGroup
	}
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
				d, err := probeRTT(ctx, members[j.from], members[j.to])
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = fmt.Errorf("node %d probing node %d: %w", j.from, j.to, err)
				}
				rtt[j.from][j.to] = d
				mu.Unlock()
				j.round.Done()
			}
		})
	}
	var round sync.WaitGroup
	for _, pairs := range probeRounds(n) {
		for _, p := range pairs {
			round.Add(1)
			jobs <- pair{p[0], p[1], &round}
		}
		round.Wait()
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
