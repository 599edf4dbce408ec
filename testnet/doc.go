// Package testnet owns the harnesses that run whole meshes on one machine,
// for trying sketchmesh out and for measuring it. It contains no training
// or protocol logic of its own: it wires the same node cores (package node)
// that a real mesh runs.
//
//   - Run starts several real libp2p hosts on 127.0.0.1, each driving a node
//     core on its own shard of a data set, over loopback TCP or over links
//     shaped like a WAN (netmodel.LinkProfile, see wan.go; each member
//     sends through a mesh.ShapedTransport), and reports how training went. With
//     Config.Attack it hosts a hostile peer (package attack) through one
//     hook, the adversary interface (adversary.go); RunAttack compares the
//     attacked run with its baseline (attack.go).
//   - LiveView, given to Run, keeps a copy of every node's state for the
//     live web view (package liveview), taken on each node's own loop.
//
// The simulator, which runs the same node cores over modelled links on a
// virtual clock, is package sim; the description of a run both read (link
// profiles, exchange settings, the overlay Router, the training) is package
// netmodel.
package testnet
