// Package netmodel owns the description of a run's network that the
// testnet (package testnet, real libp2p hosts) and the simulator (package
// sim, node cores on a virtual clock) share: the link profiles
// (LinkProfile, ParseLinkProfile: latency, bandwidth and faults per site
// pair), the exchange settings (Exchange: local steps, the outer step, the
// update budget), the overlay a run routes updates over (Router,
// NewSiteRouter, SiteCount, the Sites modes), and the checks of a run's
// training description (Training).
//
// It exists because both harnesses describe the same network and must read
// the same flags the same way; it imports no libp2p, so the simulator
// builds without it (sim's TestNoLibp2p holds that).
//
//   - links.go: link profiles, their syntax and their checks.
//   - exchange.go: how often and how nodes exchange.
//   - router.go: the overlay of a run and the site modes.
//   - training.go: what a run trains, declared once for both harnesses.
package netmodel
