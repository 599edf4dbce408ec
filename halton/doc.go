// Package halton owns the communication overlay of decentralised parameter
// storage: which peers each member opens links to, and along which tree each
// member's update travels so that it reaches every other member exactly
// once. It is the Halton-sequence topology of MALT (Li et al., EuroSys '15):
// instead of sending its update to all P−1 peers, a member sends to about
// log2 P of them, and relays pass updates on, batching everything bound for
// the same next hop into one message.
//
// Everything here is a pure function of the membership, the sorted set of
// peer ids: every member derives the same overlay and the same trees on its
// own, with no coordination. Changing how links are chosen therefore changes
// the protocol; the version lives in the hash domain string.
//
// # Construction
//
// Each id is hashed with SHA-256 (under a versioned domain prefix) into a
// 64-bit ring position, a 64-bit rotation, a degree dither and a seed.
// Members sorted by position form a ring. Member x links to
//
//   - its ring successor, and
//   - the owners of the ring points pos(x) + rot(x) + h_k·2^64 for
//     k = 0, 1, 2, …, where h_k = Radical(k, 2) is the base-2 Halton (van
//     der Corput) sequence, skipping members it already links to, until it
//     has d(x) links.
//
// The owner of a point is the member owning the first virtual point at or
// after it; each member owns sixteen virtual points (its position and
// fifteen more drawn from a SplitMix64 stream of its seed), so its share of
// the ring, and with it its number of in-links, varies by about a quarter of
// the mean instead of by the whole mean.
//
// The degree is d(x) = ⌊log2(P·s(x))⌋, capped at P−1, with s(x) spread over
// [√2, 2√2) by the dither: the mean is about log2 P + ½ and, since
// P·s < 4·2^⌈log2 P⌉, no member has more than ⌈log2 P⌉+1 links. A degree
// of exactly ⌈log2 P⌉ for everyone would add a link at every member each
// time P passes a power of two; with the dither a join adds one to about
// 1/ln 2 ≈ 1.4 members.
//
// Why the Halton sequence: any prefix of it is evenly spread (the first n
// points leave no gap wider than 2/n of the ring), so a member's links cover
// the ring evenly at every degree, and raising the degree by one as P grows
// adds a link without moving the others. Why not MALT's placement as
// stated, where node i sends to i + ⌊P·h_k⌋ for k = 1 … ⌈log2 P⌉: all nodes
// then share one set of rank offsets, and the first m = ⌈log2 P⌉ Halton
// points are all multiples of 2^−⌈log2(m+1)⌉. For P a power of two the
// offsets then generate a proper subgroup of Z_P and the graph falls apart
// into cosets (disconnected at P = 16, 64, 1024); otherwise paths are long
// (diameter 24 at P = 100); and since the offsets count ranks, every join
// shifts every offset that spans it. Here the offsets are rotated per
// member (a Cranley–Patterson rotation) and measured on the hashed ring, so
// there is no common lattice and a join only disturbs the arcs it lands in.
//
// # Connectivity and diameter
//
// The successor links form a cycle through all members, so the overlay is
// strongly connected by construction. The Halton links are spread like
// random ones, and a random digraph of out-degree d has diameter about
// log P / log d: the diameter is at most 6 for every membership node-0 …
// node-(P−1) with P ≤ 1024 and 5 at P = 4096, against a bound of
// ⌈log2 P⌉+1 = 11 and 13.
//
// That is a statement about likely memberships, so Build does not rely on
// it: it computes every hop count exactly (the trees need them anyway) and,
// when the diameter exceeds ⌈log2 P⌉+1, it discards the Halton links for a
// fallback in which the member at ring rank r links to ranks r+1, r+2,
// r+4, …, r+2^(⌈log2 P⌉−1) (mod P). Every rank distance below
// P ≤ 2^⌈log2 P⌉ is a sum of distinct powers of two, and hopping through
// them largest first is a path, so the fallback has out-degree ⌈log2 P⌉ and
// diameter at most ⌈log2 P⌉ whatever the positions. Every overlay Build
// returns is therefore strongly connected, with out-degree and diameter at
// most ⌈log2 P⌉+1. The fallback rewires Θ(P) edges when it engages, so it
// must be rare: it is used by none of the memberships node-0 … node-(P−1)
// for P ≤ 1024, by 2 of 94,500 random memberships of 2 to 64 members, where
// the bound is tightest, and by none of 13,000 of 65 to 1024. Construction
// reports which one an overlay uses.
//
// # Broadcast trees
//
// The tree of origin o is a breadth-first tree of the overlay: the parent
// of member v ≠ o is, among its in-neighbours one hop nearer o, the one
// nearest behind v on the ring. That preference is the same for every
// origin, so a relay that is v's parent for one origin tends to be its
// parent for others, which is what lets relays batch. Forward(o, v) lists
// v's children, a subset of Out(v); every member receives o's update exactly
// once, Hops(o, v) ≤ Diameter() hops after o sends it.
//
// # Joins and leaves
//
// A joiner y brings its own ≈ log2 P + ½ links; takes over the link targets
// of other members that fall in its sixteen arcs, which cover ≈ 1/P of the
// ring and so catch about one mean out-degree of targets, each counted twice
// (the old edge goes, the new one comes); takes its predecessor's successor
// link; and gives one more link to the ≈ 1.4 members whose degree threshold
// P crosses. That is ≈ 3·log2 P + 5 edges; the measured mean is 3·log2 P + 3
// to 4 (12 at P = 8, 34 at P = 1024). A leave is the mirror image. Placing
// members by rank instead would change Θ(P) edges per join, as every rank
// offset spanning the joiner shifts.
//
// # Cost
//
// Build hashes, sorts and links in O(P log P) and then runs a breadth-first
// search from all origins at once, 64 per machine word, in
// O(P²·d·D/64) time for degree d and diameter D, storing three bytes per
// ordered pair of members (the hop count, and a mask of each member's
// children per origin while no member has more than 16 out-neighbours):
// 48 MiB and a quarter of a second at P = 4096. Afterwards Hops is O(1)
// and Forward O(1) plus its result (O(d·d_in) without the mask). The
// Overlay is immutable and safe for concurrent use.
//
// # Sites
//
// On a WAN whose members sit in a few sites, BuildSites keeps every update
// to at most one inter-site link: the flat overlay within each site, plus
// one link from each member to an entry member of every other site, which
// spreads the update within its site. Sites come from every member's label,
// which SiteLabel derives from the member's measured round-trip times. With
// one site it is Build exactly; see sites.go.
//
// # Report
//
// Report and Analyze describe an overlay against a full mesh, in which every
// member sends its update straight to every other. One iteration is one
// all-to-all broadcast, run in synchronous rounds: in round r every member
// sends each update that reached it in round r−1 (its own in round 1) to
// that update's children, and everything one member sends to one next hop
// in one round is one message. The fields:
//
//   - nodes: P, the number of members.
//   - construction: "halton", or "chord" when the fallback is in use, or
//     "sites" for a site-aware overlay (BuildSites).
//   - sites: the number of sites a site-aware overlay is built over (1 when
//     it is the flat overlay; absent from Analyze).
//   - edges: directed links, the sum of out-degrees.
//   - out_degree_max, out_degree_mean, in_degree_max: over members.
//   - diameter: the largest hop count over ordered pairs of members; an
//     iteration takes this many rounds. diameter_bound: ⌈log2 P⌉+1.
//   - mean_hops: the mean hop count over ordered pairs of distinct members,
//     that is the mean age in rounds of an update when it is applied.
//   - connected: every member reaches every other.
//   - update_deliveries_per_iteration: tree edges summed over all origins,
//     one per update per receiving member, so always P·(P−1), as in a full
//     mesh: relaying adds no duplicates.
//   - messages_per_iteration: network messages in one iteration, the number
//     of distinct (sender, next hop, round) triples over all trees. It is at
//     most edges·diameter and at most P·(P−1).
//   - full_mesh_messages_per_iteration: P·(P−1), one message per update per
//     receiver, all in one round.
//   - links_per_node: the mean number of distinct peers a member shares a
//     link with in either direction, |Out ∪ In|: the connections it keeps
//     open, since one libp2p connection carries streams both ways.
//   - full_mesh_links_per_node: P−1.
//   - edges_changed_join, edges_changed_leave: EdgesChanged between the
//     overlay and that of the membership with one member added or removed.
package halton
