package mesh

import (
	"context"
	"maps"
	"sync"
	"time"

	"github.com/sketchmesh/sketchmesh/halton"
)

// Site-aware overlay (DaemonConfig.Sites).
//
// In the background the daemon probes the round trip to every live member
// (Host.ProbeRTT), a round every SiteProbeInterval, and on its loop derives
// its site label from the latest measurements (halton.SiteLabel), which
// its hellos then announce (node.Node.SetSite). Every member builds the
// overlay over the labels the members announced (Daemon.overlay): the same
// labels give the same overlay everywhere, and while a member has announced
// none (it has not measured yet, runs with sites off, or sees one site),
// everyone builds the flat one.

// siteProbeWorkers bounds one node's probes in flight.
const siteProbeWorkers = 8

// siteProbe is the daemon's measurement state; the loop owns it.
type siteProbe struct {
	rtt map[string]time.Duration // member → latest round trip
	// tried holds every member a round has probed, answered or not: a
	// live member not in it starts a round before the interval is up, so
	// a joiner is measured at once and one that never answers is not
	// probed over and over.
	tried   map[string]bool
	results chan map[string]time.Duration
	running bool
	last    time.Time // start of the latest round
}

// measureSites takes the results of a finished probe round, sets this
// node's site label from them, and starts the next round when one is due.
func (a *Daemon) measureSites(ctx context.Context, now time.Time) {
	if a.cfg.Sites != "auto" || a.cfg.Topology != "halton" {
		return
	}
	s := &a.sites
	if s.results == nil {
		s.results = make(chan map[string]time.Duration, 1)
		s.rtt, s.tried = map[string]time.Duration{}, map[string]bool{}
	}
	select {
	case got := <-s.results:
		s.running = false
		live := map[string]bool{}
		for _, m := range a.n.Live() {
			live[m] = true
		}
		maps.DeleteFunc(s.rtt, func(m string, _ time.Duration) bool { return !live[m] })
		maps.Copy(s.rtt, got)
		label := halton.SiteLabel(a.self, s.rtt)
		if before := a.n.Sites()[a.self]; label != before {
			a.log.Info("site measured", "site", shortMember(label), "members_probed", len(s.rtt))
		}
		if err := a.n.SetSite(label); err != nil {
			a.log.Warn("site label refused", "err", err)
		}
	default:
	}
	if s.running {
		return
	}
	var targets []string
	untried := false
	for _, m := range a.n.Live() {
		if m != a.self {
			targets = append(targets, m)
			untried = untried || !s.tried[m]
		}
	}
	if len(targets) == 0 || (!untried && now.Sub(s.last) < a.cfg.SiteProbeInterval) {
		return
	}
	for _, m := range targets {
		s.tried[m] = true
	}
	s.running, s.last = true, now
	go a.probeRound(ctx, targets, s.results)
}

// probeRound probes every target and sends what it measured; members that
// do not answer are left out.
func (a *Daemon) probeRound(ctx context.Context, targets []string, out chan<- map[string]time.Duration) {
	got := make(map[string]time.Duration, len(targets))
	var mu sync.Mutex
	jobs := make(chan string)
	var wg sync.WaitGroup
	for range min(siteProbeWorkers, len(targets)) {
		wg.Go(func() {
			for m := range jobs {
				// PeerOf, not the daemon's cache: the loop owns that.
				p, err := PeerOf(m)
				if err != nil {
					continue
				}
				rtt, err := a.net.ProbeRTT(ctx, p.String())
				if err != nil {
					a.log.Debug("round-trip probe failed", "member", shortMember(m), "err", err)
					continue
				}
				mu.Lock()
				got[m] = rtt
				mu.Unlock()
			}
		})
	}
	for _, m := range targets {
		jobs <- m
	}
	close(jobs)
	wg.Wait()
	out <- got
}
