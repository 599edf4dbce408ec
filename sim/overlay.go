package sim

// The overlays the cores route over: built once per input (the live set
// and the site labels) and shared by every core with an equal input.

import (
	"strings"
	"sync"

	"github.com/sketchmesh/sketchmesh/halton"
	"github.com/sketchmesh/sketchmesh/netmodel"
	"github.com/sketchmesh/sketchmesh/node"
)

// diameter is the most hops an update takes over router: 1 on the full
// mesh.
func diameter(router netmodel.Router) int {
	if d, ok := router.(interface{ Diameter() int }); ok {
		return max(1, d.Diameter())
	}
	return 1
}

// overlay returns the overlay over a live set and the site labels its
// members announced; nodes with the same set and labels share one.
func (s *sim) overlay(live []string, site map[string]string) netmodel.Router {
	if !siteAware(live, site) {
		// halton.BuildSites builds the flat overlay over the live set
		// whatever the labels: one key for all of them.
		site = nil
	}
	var key strings.Builder
	for _, m := range live {
		key.WriteString(m)
		key.WriteByte('=')
		key.WriteString(site[m])
		key.WriteByte(',')
	}
	s.overlayMu.Lock()
	defer s.overlayMu.Unlock()
	if r, ok := s.routers[key.String()]; ok {
		return r
	}
	if len(s.routers) >= 64 {
		clear(s.routers)
	}
	r := netmodel.NewSiteRouter(s.cfg.Topology, live, site)
	s.routers[key.String()] = r
	return r
}

// siteAware reports whether halton.BuildSites builds the site-aware
// overlay over live with these labels: every member labelled, and between
// 2 and halton.DiameterBound sites.
func siteAware(live []string, site map[string]string) bool {
	distinct := map[string]bool{}
	for _, m := range live {
		if site[m] == "" {
			return false
		}
		distinct[site[m]] = true
	}
	return len(distinct) > 1 && len(distinct) <= halton.DiameterBound(len(live))
}

// lazyRouter is the overlay a core asked for, built when the core first
// routes through it. A core asks again on every change of membership it
// hears, a first hello naming a site included: P times per node while a
// mesh of P starts, when it routes a few times. The overlay is a function
// of the live set and the labels, so building it late builds the same one.
type lazyRouter struct {
	s *sim
	// built builds r once: cores of every worker may share the router
	// (keepOverlay).
	built sync.Once
	live  []string
	site  map[string]string
	r     netmodel.Router
}

// keyedOverlay returns the overlay built before for an input with this
// key, or nil.
func (s *sim) keyedOverlay(key node.OverlayKey) node.Router {
	s.overlayMu.Lock()
	defer s.overlayMu.Unlock()
	if key.Unlabelled > 0 {
		return s.flat[key.Members]
	}
	return s.keyed[key.Labelled]
}

// keepOverlay remembers the overlay a core built under its key.
func (s *sim) keepOverlay(key node.OverlayKey, r node.Router) {
	s.overlayMu.Lock()
	defer s.overlayMu.Unlock()
	m, k := s.keyed, key.Labelled
	if key.Unlabelled > 0 {
		m, k = s.flat, key.Members
	}
	if len(m) >= 64 {
		clear(m)
	}
	m[k] = r
}

func (s *sim) lazyOverlay(live []string, site map[string]string) node.Router {
	return &lazyRouter{s: s, live: live, site: site}
}

// Forward implements node.Router.
func (l *lazyRouter) Forward(origin, at string) []string {
	return l.router().Forward(origin, at)
}

// AppendForward implements node.ForwardAppender.
func (l *lazyRouter) AppendForward(dst []string, origin, at string) []string {
	if r, ok := l.router().(node.ForwardAppender); ok {
		return r.AppendForward(dst, origin, at)
	}
	return append(dst, l.r.Forward(origin, at)...)
}

func (l *lazyRouter) router() netmodel.Router {
	l.built.Do(func() {
		l.r = l.s.overlay(l.live, l.site)
		l.live, l.site = nil, nil
	})
	return l.r
}
