// Package testnet runs a whole mesh on one machine: several real libp2p hosts
// on 127.0.0.1, each driving a node core on its own shard of a data set, and
// reports how training went. It is the product's demonstration and the
// harness its system tests and measurements use; it contains no training or
// protocol logic of its own, only wiring of node, mesh and dataset.
package testnet
