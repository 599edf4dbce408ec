package sim

import (
	"testing"

	"github.com/sketchmesh/sketchmesh/netmodel"
)

// On geo3 the site-aware overlay sends each update across one inter-site
// link, as the full mesh does, where the flat overlay's paths cross up to
// three: bulk-synchronous iterations take about the full mesh's simulated
// time, well below the flat overlay's, and every topology ends with the
// same model bit for bit.
func TestSimSitesCutTheWANHops(t *testing.T) {
	wan, err := netmodel.ParseLinkProfile("geo3")
	if err != nil {
		t.Fatal(err)
	}
	runs := map[string]*Report{}
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
