package netmodel

import (
	"fmt"
	"slices"

	"github.com/sketchmesh/sketchmesh/halton"
	"github.com/sketchmesh/sketchmesh/node"
)

// Topologies are the overlays a run may name: halton (the default: O(log P)
// links per node, updates relayed along broadcast trees) and full (everyone
// sends to everyone).
var Topologies = []string{"halton", "full"}

// CheckTopology checks a topology and defaults it to halton.
func CheckTopology(topology *string) error {
	if *topology == "" {
		*topology = "halton"
	}
	if !slices.Contains(Topologies, *topology) {
		return fmt.Errorf("unknown topology %q (want halton or full)", *topology)
	}
	return nil
}

// NewSiteRouter returns the overlay a topology names: for halton, the
// site-aware overlay over the members' site labels, which is the flat one
// when the labels name one site or there are none.
func NewSiteRouter(topology string, ids []string, site map[string]string) Router {
	if topology == "full" {
		return fullRouter{node.NewFullMesh(ids), len(ids)}
	}
	return haltonRouter{halton.BuildSites(ids, site)}
}

// Router is the overlay of a run: how updates are relayed, and which pairs
// of nodes hold a link.
type Router interface {
	node.Router
	// Linked lists the peers a node opens links to.
	Linked(id string) []string
	// MeanHops is the mean number of hops an update takes to a receiver.
	MeanHops() float64
}

type fullRouter struct {
	node.FullMesh
	n int
}

func (f fullRouter) Linked(id string) []string { return f.Forward(id, id) }
func (f fullRouter) MeanHops() float64 {
	if f.n < 2 {
		return 0
	}
	return 1
}

type haltonRouter struct{ *halton.SiteOverlay }

func (h haltonRouter) Linked(id string) []string { return h.Out(id) }

// SitesModes are the values of a run's Sites setting: auto (group nodes
// into sites by round trip and build the site-aware overlay) or off.
var SitesModes = []string{"auto", "off"}

// CheckSitesMode checks a Sites setting and defaults it to auto.
func CheckSitesMode(mode *string) error {
	if *mode == "" {
		*mode = "auto"
	}
	if !slices.Contains(SitesModes, *mode) {
		return fmt.Errorf("unknown sites mode %q (want auto or off)", *mode)
	}
	return nil
}

// SiteCount is the number of sites a router groups members into: 1 for a
// flat overlay or a full mesh.
func SiteCount(r Router) int {
	if s, ok := r.(interface{ Sites() int }); ok {
		return s.Sites()
	}
	return 1
}
