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
// first use and reopened once after a failure.
//
// # Concurrency
//
// One goroutine (Run) owns the node core. Inbound streams are read by their
// own goroutines, which hand messages to the loop through a channel; sends go
// to a per-peer queue drained by a per-peer goroutine, so the loop never
// blocks on the network. Queues are bounded in practice by the staleness
// gate: a node can be at most s+1 iterations ahead of any live peer.
package mesh
