package sim

import (
	"time"

	"github.com/sketchmesh/sketchmesh/halton"
)

// measureSites gives every node the site label its round trips give
// (halton.SiteLabel). A simulated probe measures the link model exactly: a
// round trip is the one-way latencies of both directions (jitter aside),
// so the simulator reads them from the model instead of sending probes.
// Each core announces its label in its hellos (node.Node.SetSite) and
// builds the overlay over the labels it has heard: until the first hellos
// arrive, and for a joiner's first heartbeat, cores relay along different
// trees, which the cores' duplicate checks and retransmission absorb.
func (s *sim) measureSites() {
	if s.cfg.Topology != "halton" || s.cfg.Sites == "off" {
		return
	}
	// Round trips depend on the pair of sites only: one table per site.
	bySite := make([]map[string]time.Duration, s.cfg.WAN.Sites)
	for a := range bySite {
		bySite[a] = make(map[string]time.Duration, s.p)
		for j, id := range s.ids {
			b := j % s.cfg.WAN.Sites
			bySite[a][id] = time.Duration(s.lat[a][b] + s.lat[b][a])
		}
	}
	s.labels = make(map[string]string, s.p)
	for i, id := range s.ids {
		s.labels[id] = halton.SiteLabel(id, bySite[i%s.cfg.WAN.Sites])
	}
}
