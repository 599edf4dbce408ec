package sim

import (
	"os/exec"
	"strings"
	"testing"
)

// The simulator runs node cores and nothing of the network stack: no
// package it builds on may come from libp2p, or the description it shares
// with the testnet has leaked the testnet's transport into it.
func TestNoLibp2p(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go command is not on PATH")
	}
	out, err := exec.Command(goTool, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) == 0 {
		t.Fatal("go list -deps listed nothing")
	}
	var libp2p []string
	for _, d := range deps {
		if strings.Contains(d, "libp2p") {
			libp2p = append(libp2p, d)
		}
	}
	if len(libp2p) > 0 {
		t.Fatalf("package sim depends on %d libp2p packages, first %s", len(libp2p), libp2p[0])
	}
	if !strings.Contains(string(out), "github.com/sketchmesh/sketchmesh/node") {
		t.Fatal("go list -deps does not list package node: the listing is not sim's")
	}
}
