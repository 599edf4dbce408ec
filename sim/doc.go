// Package sim owns the discrete-event simulator: it runs hundreds or
// thousands of node cores (package node, the code a real mesh runs) on a
// virtual clock, dealt over a number of workers (goroutines) that advance
// in windows of the least link latency, over modelled links with loss,
// duplication, reordering and partitions, driven by a fault script (kills,
// restarts, partitions, joins, leaves, churn with heavy-tailed sessions),
// and replayable by seed: the same configuration, workers included, gives
// the same trace hash.
//
// It stands apart from package testnet, which runs real libp2p hosts over
// loopback sockets: the simulator opens no socket and its nodes keep
// virtual time, so a run replays exactly. What it shares with the testnet
// is the description of a run in package netmodel: the network
// (netmodel.LinkProfile), the exchange settings (netmodel.Exchange) and the
// overlay (netmodel.Router). It imports no libp2p (TestNoLibp2p).
//
//   - config.go: the configuration, its defaults and their checks.
//   - sim.go: building the nodes and the run loop.
//   - workers.go: the workers, their windows, and what the cores of one
//     worker share because it is the same between them: a decode cache,
//     the committed views of the same rows and the sums of pending rows
//     (node.RowStore), a gradient scratch, the table of origin slots
//     (node.SlotTable) and the spare outbox queues and envelope buffers
//     (node.QueuePool: a worker hands back each envelope it delivered).
//   - overlay.go: the overlays the cores route over, built once per input.
//   - members.go: joins, rejoins by snapshot, leaves and stops.
//   - queue.go: the event queue and the trace hash.
//   - links.go: the link model (latency, bandwidth, loss, duplication,
//     reordering, partitions).
//   - scenario.go and faults.go: the fault-script language, its parser,
//     and running a script's steps.
//   - sites.go: the site labels a node's round trips would give.
//   - report.go and invariants.go: the report, the invariants checked
//     while the run goes and at its end, and the script's assertions.
package sim
