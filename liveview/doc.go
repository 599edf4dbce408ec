// Package liveview owns the live web view of a mesh: the page a person
// opens to watch it train (who is in, which links carry what, who waits for
// whom, how fast it learns), the read-only HTTP server that serves it, and
// the State it draws, which /api/state also serves as JSON.
//
// It is a package of its own because it is an edge with no protocol in it:
// it never touches a node core. A producer (the testnet, or the daemon of
// `run`) copies what the page needs out of each core on the goroutine that
// owns it, into a snapshot guarded by a mutex, and offers it as a Source;
// the server only reads Source.LiveState. The package imports nothing of
// the mesh, so it can be tested with hand-made states.
//
// # Updates and throttling
//
// The page loads /api/state once, then follows /api/events, a stream of
// server-sent events. The server polls its Source at most Options.Rate
// times a second (2 by default) on one goroutine, encodes the state to JSON
// once per poll, and sends it only when it changed; every client has a
// one-slot queue in which a newer state replaces one not yet sent, so a slow
// client gets the latest state, never a backlog. The page coalesces in its
// turn: it keeps the newest state and redraws at most once per animation
// frame, and not at all while it is hidden. A mesh of 64 nodes therefore
// costs the server two encodings a second and the page two redraws a
// second, whatever the mesh's pace. States travel gzip-compressed to clients
// that accept it: a state names every member many times (links, the vector
// clock, who waits for whom) and shrinks about sevenfold.
//
// The page takes two query parameters for headless browsers: ?events=N
// draws only what the event stream sends, at once rather than at the next
// animation frame, and leaves the stream after N events, so that the
// browser can settle and dump or photograph it; ?bench=N redraws the first
// state N times with every clock moved on and records the mean time of a
// redraw in the body's data-bench-ms.
//
// # What is served
//
// Everything the page needs is embedded in the binary (web/: hand-written
// HTML, CSS and JavaScript, no library and no network access), so it works
// on a site cut off from the internet; its Content-Security-Policy allows
// nothing but its own origin. The server answers GET and HEAD only. Listen
// binds to a loopback address unless told that a public one is meant, and
// warns when it is.
package liveview
