// Package attack owns the hostile peer of a testnet run (testnet.Config.Attack,
// --attack KIND): its kinds, what each sends, and its report (Report) of
// what the honest nodes refused and applied. The testnet hosts it through
// one hook (testnet's adversary) and knows nothing of what it does; the
// attacker knows the honest nodes only as Victims.
//
// A hand-written hostile peer attacks the testnet while it trains: a real
// libp2p host speaking the update protocol, with no node core, that sends
// what the kind names. For every kind but nopsk and
// notallowed it is a member of the mesh (on the allow list, holding the
// PSK, with a signing key of its own), the strongest position short of
// stealing an honest member's key: it sits on the overlay as a leaf, so every
// honest origin sends it its updates, and it owes the mesh one update per
// clock like any member. Each node's update of clock c that reaches it
// triggers its own update of clock c to that node, plus the attack.
//
//	garbage     random bytes: as messages, and as raw stream bytes
//	oversized   a length prefix above the limit, a message cut short, and
//	            its own updates with truncated frames
//	headers     envelopes with hostile msgpack headers (array32, map32,
//	            str32, bin32 lengths of 0xffffffff, lengths past the end)
//	forged      other members' updates moved to another clock, altered,
//	            stripped of their signature, or signed with its own key
//	replay      old updates of every origin that the victim holds,
//	            resent in reverse order
//	nan         its own updates hold NaN
//	norm        its own updates are honest updates scaled by −1000 (odd
//	            clocks) and by −5, within the norm bound (even clocks)
//	flood       well-formed signed envelopes as fast as the network takes
//	            them, on extra streams: clocks far ahead, and replays
//	nopsk       an outsider without the PSK keeps trying to connect
//	notallowed  an outsider with the PSK, not on the allow list, keeps
//	            trying to connect and send
//
// An attack run is a hardened mesh: signed updates, a PSK and an allow list
// of the members.
package attack
