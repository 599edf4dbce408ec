// Package node owns the node core: one member's view of the model, its
// optimizer state, its vector clock and the rules for what it sends, relays
// and applies. It is a deterministic state machine in the spirit of etcd's
// raft: no goroutines, no network, no wall clock. A driver (package mesh over
// libp2p, or a simulator) feeds it events and carries out what it asks:
//
//	n.Receive(from, data)  // a network message arrived
//	n.PeerDown(id)         // liveness changed (decided by the driver)
//	if n.CanTrain() {      // the staleness gate is open
//		n.Train()          // one local iteration: gradient, update, encode
//	}
//	rd := n.Ready()        // envelopes to send, one per next hop
//
// # One update, from the training step to apply
//
// The walk of one update through the packages, in call order (a relay
// repeats the receiver's part and hands the frame on as it came):
//
//  1. mesh.Daemon.Run opens the gate and calls Daemon.train, which calls
//     Node.Train (sync.go) and Node.train (node.go).
//  2. Node.train reads Node.View, takes Node.nextBatch (batch.go), and asks package
//     model for the step: Model.Gradient, then Optimizer.Update;
//     Node.withResidual adds what error feedback carried.
//  3. Node.exchange (localsteps.go) encodes it, Node.encode with the
//     codec.Codec (or sfb's factors), cuts it to the budget
//     (Node.fitBudget), decodes its own frame as its receivers will
//     (Node.decode), adds it (Node.add) and Node.sendOwn (sign.go) signs
//     it and queues it for the next hops the Router (halton's overlay)
//     gives (Node.route).
//  4. Node.Ready hands the queued envelopes (EncodeEnvelope, wire.go, on
//     package wire's Writer) to mesh.Daemon.handleReady, which sends each
//     with Transport.SendTo; Host's sender (sender.go) writes it, length
//     first, on the peer's /sketchmesh/update/1 stream.
//  5. On the receiver, Host.handleStream refuses a length above
//     MaxEnvelopeBytes before it reads, and puts the message on the Inbox;
//     Daemon.Run hands it to Daemon.receive and Node.Receive (sync.go).
//  6. Node.Receive decodes it (DecodeEnvelope, on wire.Reader), and
//     Node.receive (receive.go) checks each update (Node.acceptFrom and Node.accept:
//     member, clock, duplicate, staleness bound, signature in
//     Node.verify, the codec's Decode in Node.decode, the screen), adds it
//     to its row (Node.add), relays it (Node.route) and commits the rows
//     that are complete (Node.commit), which apply each update to the
//     committed view (Node.applyCommitted, applySparse) in canonical
//     order.
//
// # Updates and views
//
// What travels is an additive update: the change a node makes to its view in
// one iteration, encoded by a codec. A node applies to its own view exactly
// what its receivers decode (it decodes its own frame), so a lossy codec
// never makes views drift apart; with error feedback on, the part the codec
// lost is carried into the node's next update.
//
// The view is the committed view plus the pending updates up to the node's
// own clock. Row c (every live member's update with clock c) is committed
// once all of it has arrived, in canonical order: clock by clock, origin by
// origin in sorted id order. Pending updates are added on top in the same
// order; updates from peers that are ahead wait until the node reaches their
// clock. The view is therefore a
// function of the set of updates it holds, not of their arrival order: under
// bulk-synchronous steps (staleness 0) every node holds the same set at every
// gate and all views are bit-identical.
//
// Since committed rows are a function of the updates they hold, members
// compare digests of them in anti-entropy and report replicas that have
// drifted apart (see digest.go). For the same reason the cores of a
// simulator share them (Config.SharedRows, rows.go): cores that added the
// same updates hold one copy of the committed view, computed once, and
// overlay their pending updates on one working view, through sums of the
// pending rows shared by clock where that is cheaper (rowsums.go): such a
// read equals the overlay in canonical order to within rounding.
//
// # Clocks and staleness (SSP)
//
// A node's clock t counts its completed iterations; its update of iteration t
// carries clock t. The vector clock V holds, per origin q, the largest c such
// that all of q's updates with clock ≤ c are in the view (see VectorClock).
// Before iteration t+1 a node waits until V[q] ≥ t − s for every live member
// q, where s is the staleness bound; s = 0 is bulk-synchronous. A node's own
// update is in its view as soon as it is made (read-my-writes). Updates may
// arrive out of order and through different relays; each is applied once.
//
// The staleness of a read at iteration t+1 is t − min over live q of V[q];
// the gate keeps it ≤ s.
//
// # Bad input
//
// A message that does not parse, an update from a non-member, a duplicate, a
// clock further ahead than any honest member can be, a frame the codec
// rejects or one whose keys fall outside the model: each is dropped and
// counted by reason (a RejectReason) in Stats.Rejected; nothing of it is
// applied or relayed. A Tracer (Config.Tracer, after go-libp2p-pubsub's
// RawTracer) hears of each refusal and of each update the view takes, as
// the core counts them: mesh.Metrics, the testnet's reports and the attack
// report (through a RejectTally per run) and the simulator's report (one
// RejectTally for every core) read their rejection counts from it.
// In a signed mesh (Config.Auth), an update whose signature verifies but
// whose content is refused (a frame that does not decode, NaN, a norm past
// the bound) still counts as its origin's update for that clock, with
// nothing in it, and is forwarded unchanged: otherwise a member that sends
// poison would close every staleness gate for good. Without signatures it
// is dropped, since anyone could then block a member's clock with a forgery.
//
// # Message formats
//
// Every message of the core is read with package wire's checked Reader and
// written with its Writer, next to the type it carries: update envelopes in
// wire.go, sync requests in sync.go, gone notices in catchup.go,
// announcements in announce.go, settings in settings.go and snapshots in
// snapshot.go. Each decoder is fuzzed, with its corpus in
// testdata/fuzz.
//
// # Membership
//
// Members join from a snapshot of another member's rows, checked against a
// second member's digest of its own rows at the same clock (verify.go),
// leave with notice or are declared down by the driver; see membership.go. Updates are scaled
// by the members whose updates for a clock will be in the row (see
// scale.go): members that are only cut off keep their share.
//
// # Local steps, budgets and priorities
//
// With local steps a node takes H whole optimizer steps on its own copy
// between exchanges and sends its share of their sum through an outer step
// (localsteps.go); under a staleness bound, an exchange that starts with
// rows in flight stands the node's own update in for each missing one
// there, so the round hides behind the next exchange's steps.
// AutoLocalSteps picks H for a run of a given length, whatever its links
// (autosteps.go). A budget cuts an update to its keys
// of highest priority and keeps the rest in the residual (priority.go).
//
// # Files
//
// node.go holds the Node, its construction and its training step;
// config.go its configuration and the overlay's Router; receive.go the
// path of an arriving update up to its commit; stats.go the counters and
// the rejection reasons; batch.go the mini-batch sampler. The membership
// protocol is in liveness.go, admission.go, announce.go, membership.go and
// catchup.go; the driver feeds the core through Receive and Ready
// (sync.go) and Tick (liveness.go). pages.go holds the 64-key pages in
// which the working view's overlay is tracked (the error feedback
// residual is a model.PagedVec); rows.go the committed views shared between a simulator's
// cores.
package node
