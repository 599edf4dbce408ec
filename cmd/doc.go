// Package cmd owns the sketchmesh command line: it turns flags into
// configurations, runs them, and prints progress, tables and JSON reports.
// The training flags of testnet, run and simulate are declared once
// (training.go) and become one node.Settings; what a long-running node
// does to start (its checkpoint, the core it resumes or joins with) is
// package mesh's bootstrap, which run only calls.
// The binary in cmd/sketchmesh only calls Main, so tests run the whole
// command in-process.
//
// Exit status: 0 on success, 1 when a run fails, 2 for bad input (an unknown
// flag or value, a missing or malformed data file); a bad-input error is one
// line on stderr naming the cause, and nothing is written on stdout.
package cmd
