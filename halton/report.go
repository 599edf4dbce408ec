package halton

import (
	"fmt"
	"math/rand/v2"
)

// Report describes an overlay against a full mesh of the same size. The
// package documentation defines every field.
type Report struct {
	Nodes                        int     `json:"nodes"`
	Construction                 string  `json:"construction"`
	Sites                        int     `json:"sites,omitempty"`
	Edges                        int     `json:"edges"`
	OutDegreeMax                 int     `json:"out_degree_max"`
	OutDegreeMean                float64 `json:"out_degree_mean"`
	InDegreeMax                  int     `json:"in_degree_max"`
	Diameter                     int     `json:"diameter"`
	DiameterBound                int     `json:"diameter_bound"`
	MeanHops                     float64 `json:"mean_hops"`
	Connected                    bool    `json:"connected"`
	UpdateDeliveriesPerIteration int     `json:"update_deliveries_per_iteration"`
	MessagesPerIteration         int     `json:"messages_per_iteration"`
	FullMeshMessagesPerIteration int     `json:"full_mesh_messages_per_iteration"`
	LinksPerNode                 float64 `json:"links_per_node"`
	FullMeshLinksPerNode         int     `json:"full_mesh_links_per_node"`
	EdgesChangedJoin             int     `json:"edges_changed_join"`
	EdgesChangedLeave            int     `json:"edges_changed_leave"`
	// InterSiteLinksPerUpdate and InterSiteHopsMax are set by AnalyzeSites
	// only (see SiteOverlay.InterSite).
	InterSiteLinksPerUpdate float64 `json:"inter_site_links_per_update,omitempty"`
	InterSiteHopsMax        int     `json:"inter_site_hops_max,omitempty"`
}

// Report measures the overlay. The two EdgesChanged fields are left zero:
// they compare against a neighbouring membership, which Analyze builds.
func (o *Overlay) Report() Report {
	n := len(o.ids)
	r := Report{
		Nodes:                        n,
		Construction:                 o.Construction(),
		Edges:                        o.edges,
		Diameter:                     o.diameter,
		DiameterBound:                DiameterBound(n),
		MeanHops:                     o.meanHops,
		Connected:                    o.connected,
		FullMeshMessagesPerIteration: n * (n - 1),
		FullMeshLinksPerNode:         max(n-1, 0),
	}
	if n == 0 {
		return r
	}
	links := 0
	for v := range n {
		r.OutDegreeMax = max(r.OutDegreeMax, len(o.out[v]))
		r.InDegreeMax = max(r.InDegreeMax, len(o.in[v]))
		links += len(o.out[v]) + len(o.in[v]) - common(o.out[v], o.in[v])
	}
	r.OutDegreeMean = float64(o.edges) / float64(n)
	r.LinksPerNode = float64(links) / float64(n)
	r.UpdateDeliveriesPerIteration, r.MessagesPerIteration = o.deliveries, o.messages
	return r
}

// common counts the values two sorted lists share.
func common(x, y []int32) int {
	n, i, j := 0, 0, 0
	for i < len(x) && j < len(y) {
		switch {
		case x[i] < y[j]:
			i++
		case x[i] > y[j]:
			j++
		default:
			n++
			i++
			j++
		}
	}
	return n
}

// Analyze reports on a synthetic membership of p members and on the edges
// that change when one member joins it and when one leaves it. With seed 0
// the members are "node-0" … "node-(p−1)"; any other seed gives
// "s<seed>-node-<i>", an unrelated set of ring positions. The joiner is
// member number p of the same series; the leaver is drawn from seed.
func Analyze(p int, seed int64) Report {
	p = max(p, 0)
	name := memberName(seed)
	ids := make([]string, p)
	for i := range ids {
		ids[i] = name(i)
	}
	o := Build(ids)
	r := o.Report()
	r.EdgesChangedJoin = EdgesChanged(o, Build(append(ids[:p:p], name(p))))
	if p > 0 {
		rng := rand.New(rand.NewPCG(uint64(seed), uint64(p)))
		k := rng.IntN(p)
		rest := append(ids[:k:k], ids[k+1:]...)
		r.EdgesChangedLeave = EdgesChanged(o, Build(rest))
	}
	return r
}

// memberName names Analyze's synthetic members.
func memberName(seed int64) func(i int) string {
	return func(i int) string {
		if seed == 0 {
			return fmt.Sprintf("node-%d", i)
		}
		return fmt.Sprintf("s%d-node-%d", seed, i)
	}
}

// AnalyzeSites reports on the site-aware overlay (BuildSites) of Analyze's
// membership of p members, spread round robin over sites sites, and on the
// flat overlay of the same members, both with their inter-site counts. The
// EdgesChanged fields are left zero.
func AnalyzeSites(p int, seed int64, sites int) (sited, flat Report) {
	p, sites = max(p, 0), max(sites, 1)
	name := memberName(seed)
	ids := make([]string, p)
	label := make(map[string]string, p)
	for i := range ids {
		ids[i] = name(i)
		label[ids[i]] = fmt.Sprintf("site-%d", i%sites)
	}
	for _, c := range []struct {
		r *Report
		o *SiteOverlay
	}{{&sited, BuildSites(ids, label)}, {&flat, BuildSites(ids, nil)}} {
		*c.r = c.o.Report()
		c.r.InterSiteLinksPerUpdate, c.r.InterSiteHopsMax = c.o.InterSite(label)
	}
	return sited, flat
}
