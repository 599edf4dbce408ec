package testnet

import (
	"testing"

	"github.com/sketchmesh/sketchmesh/model"
)

// On geo3 the site-aware overlay sends each update across one inter-site
// link, as the full mesh does, where the flat overlay's paths cross up to
// three: bulk-synchronous iterations take about the full mesh's simulated
// time, well below the flat overlay's, and every topology ends with the
// same model bit for bit.
func TestSimSitesCutTheWANHops(t *testing.T) {
	wan, err := ParseLinkProfile("geo3")
	if err != nil {
		t.Fatal(err)
	}
	runs := map[string]*SimReport{}
	for _, c := range []struct{ name, topology, sites string }{{"flat", "halton", "off"}, {"sites", "halton", "auto"}, {"full", "full", "auto"}} {
		cfg := simConfig(t, 24, 12, 1)
		cfg.WAN, cfg.Staleness, cfg.Topology, cfg.Sites = wan, 0, c.topology, c.sites
		r := simulate(t, cfg)
		if !r.Invariants.OK {
			t.Fatalf("%s: invariants %+v", c.name, r.Invariants)
		}
		runs[c.name] = r
	}
	flat, sites, full := runs["flat"], runs["sites"], runs["full"]
	t.Logf("simulated seconds: flat %.3f, sites %.3f, full %.3f; messages per node per iteration %.1f, %.1f, %.1f",
		flat.SimulatedSeconds, sites.SimulatedSeconds, full.SimulatedSeconds,
		flat.MessagesPerNodePerIteration, sites.MessagesPerNodePerIteration, full.MessagesPerNodePerIteration)
	if sites.Sites != 3 || flat.Sites != 1 || full.Sites != 1 {
		t.Fatalf("sites: %d with sites on, %d flat, %d full", sites.Sites, flat.Sites, full.Sites)
	}
	if sites.SimulatedSeconds > 1.25*full.SimulatedSeconds || 1.5*sites.SimulatedSeconds > flat.SimulatedSeconds {
		t.Fatalf("simulated seconds: sites %.3f, full mesh %.3f, flat overlay %.3f", sites.SimulatedSeconds, full.SimulatedSeconds, flat.SimulatedSeconds)
	}
	if sites.FinalTestLoss != full.FinalTestLoss || flat.FinalTestLoss != full.FinalTestLoss {
		t.Fatalf("final test loss: sites %v, flat %v, full %v", sites.FinalTestLoss, flat.FinalTestLoss, full.FinalTestLoss)
	}
}

// The testnet measures round trips over its emulated WAN and finds geo3's
// three sites; on loopback it finds one and keeps the flat overlay. Either
// way every node applies every update once and the views end identical.
func TestTestnetFindsSitesByRoundTrip(t *testing.T) {
	train, test := builtin(t, "rcv1")
	wan, err := ParseWAN("geo3")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		wan   LinkProfile
		sites int
	}{{wan, 3}, {LinkProfile{}, 1}} {
		rep := run(t, Config{
			Nodes: 6, Train: train, Test: test, Model: model.LogisticRegression, Optimizer: model.Adam,
			LR: 0.02, L2: 1e-4, Batch: 0.2, Iterations: 6, Seed: 2, Codec: "raw", WAN: c.wan,
		})
		if rep.Sites != c.sites || !rep.ViewsIdentical || len(rep.Rejected) != 0 {
			t.Fatalf("%s: %d sites (want %d), views identical %v, rejected %v", rep.WAN, rep.Sites, c.sites, rep.ViewsIdentical, rep.Rejected)
		}
		for _, n := range rep.PerNode {
			if n.UpdatesApplied != 6*6 {
				t.Fatalf("%s: node %s applied %d updates, want 36", rep.WAN, n.ID, n.UpdatesApplied)
			}
		}
	}
}
