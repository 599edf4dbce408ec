// Package mesh owns the network edge of a node: a go-libp2p host, the update
// stream protocol, per-peer send queues, and the loop that drives a node core
// (package node) with what arrives and sends what the core asks to send.
//
// # The update protocol
//
// Updates travel on libp2p streams of protocol /sketchmesh/update/1. A
// stream carries a sequence of messages, each a 4-byte big-endian length
// followed by that many bytes of envelope (node.EncodeEnvelope). A length
// above node.MaxEnvelopeBytes is refused before anything is allocated and the
// stream is reset. Each peer gets one long-lived outbound stream, opened on
// first use and reopened once after a failure (sender.go). The daemon
// drives the network through a Transport (transport.go), which Host
// implements; what the host knows of each link, direct or relayed and
// failing since when, is kept in links.go.
//
// # The long-running node
//
// Daemon drives a core in a live mesh (the run command): a joiner asks any
// member on /sketchmesh/join/1 for the mesh's settings, its members and a
// snapshot to start from (join.go), which it checks against a second
// member's rows before it starts (joincheck.go; JoinService answers both
// for the daemon and for Run); members announce themselves, admit
// joiners and leave over a GossipSub topic per mesh (member.go), and the
// daemon declares a silent member dead after a timeout that follows the
// mesh's round time. What a node does before its daemon runs is in
// bootstrap.go: the checkpoint it resumes from, checked to be its own
// (LoadCheckpoint), and the core it starts (NewCore: fresh, from the
// checkpoint's rows, or from a join reply's snapshot with its pending
// frames replayed). Reaching members behind NATs (QUIC, relays, hole
// punching, AutoNAT) is in reach.go; private networks, allow lists, limits
// and update signatures in security.go; Prometheus metrics in metrics.go;
// what the live web view shows of a core and of the host's links, copied on
// the loop that owns the core, in liveview.go (LiveBoard for the daemon,
// ObserveCore for the testnet's drivers through DaemonConfig.Observe).
// Round-trip probes on /sketchmesh/probe/1 (probe.go) give each member the
// site label it announces for the site-aware overlay (sites.go).
//
// # Concurrency
//
// One goroutine (Run, or Daemon.Run) owns the node core. Inbound streams are read by their
// own goroutines, which hand messages to the loop through a channel; sends go
// to a per-peer queue drained by a per-peer goroutine, so the loop never
// blocks on the network. Queues are bounded in practice by the staleness
// gate: a node can be at most s+1 iterations ahead of any live peer.
package mesh
