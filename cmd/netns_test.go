//go:build linux

package cmd

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// sites are three network namespaces joined by veth pairs: the relay's R,
// with 10.77.1.1 towards site A (10.77.1.2) and 10.77.2.1 towards site B
// (10.77.2.2). A and B have no route to each other, and R does not
// forward IP.
type sites struct {
	r, a, b string // namespace names
}

// newSites builds the namespaces and deletes them when the test ends,
// failed or not. It skips the test when this machine cannot build them.
func newSites(t *testing.T) sites {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to create network namespaces (ip netns); run as root to test reachability across sites")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skipf("needs ip (iproute2) to create network namespaces: %v", err)
	}
	prefix := fmt.Sprintf("sm%d", os.Getpid())
	s := sites{r: prefix + "-r", a: prefix + "-a", b: prefix + "-b"}
	for _, ns := range []string{s.r, s.a, s.b} {
		if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
			t.Skipf("cannot create network namespaces here (ip netns add %s: %v: %s)", ns, err, strings.TrimSpace(string(out)))
		}
		t.Cleanup(func() {
			if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
				t.Errorf("ip netns del %s: %v: %s", ns, err, out)
			}
		})
	}
	ip := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	for _, site := range []struct{ ns, dev, addr, relayAddr string }{
		{s.a, "to-a", "10.77.1.2/24", "10.77.1.1/24"},
		{s.b, "to-b", "10.77.2.2/24", "10.77.2.1/24"},
	} {
		veth := []string{"-n", s.r, "link", "add", site.dev, "type", "veth", "peer", "name", "to-r", "netns", site.ns}
		if out, err := exec.Command("ip", veth...).CombinedOutput(); err != nil {
			t.Skipf("cannot create veth pairs between network namespaces here (ip %s: %v: %s)", strings.Join(veth, " "), err, strings.TrimSpace(string(out)))
		}
		ip("-n", s.r, "addr", "add", site.relayAddr, "dev", site.dev)
		ip("-n", s.r, "link", "set", site.dev, "up")
		ip("-n", site.ns, "addr", "add", site.addr, "dev", "to-r")
		ip("-n", site.ns, "link", "set", "to-r", "up")
	}
	for _, ns := range []string{s.r, s.a, s.b} {
		ip("-n", ns, "link", "set", "lo", "up")
	}
	if out, err := exec.Command("ip", "netns", "exec", s.r, "sysctl", "-qw", "net.ipv4.ip_forward=0").CombinedOutput(); err != nil {
		t.Fatalf("turn off forwarding at the relay: %v: %s", err, out)
	}
	if out, err := exec.Command("ip", "-n", s.a, "route", "get", "10.77.2.2").CombinedOutput(); err == nil {
		t.Fatalf("site A has a route to site B: %s", out)
	}
	return s
}

// inNS is the command prefix that runs a command in namespace ns.
func inNS(ns string) []string { return []string{"ip", "netns", "exec", ns} }

// listening waits for the node to print a listening address containing
// part and returns it.
func (p *proc) listening(t *testing.T, part string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		p.mu.Lock()
		out := p.stdout.String()
		p.mu.Unlock()
		for _, line := range strings.Split(out, "\n") {
			if a, ok := strings.CutPrefix(line, "listening: "); ok && strings.Contains(a, part) {
				return a
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s printed no listening address with %s:\n%s", p.name, part, out)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A relay R, two nodes at site A and two at site B, where A and B reach R
// but not each other: R founds the mesh with --relay-service, the others
// join through it by multiaddr, and the four at the sites trade updates
// with the other site through R. Every node ends within one accuracy point
// of the same mesh on loopback, where all reach each other; each site node
// reaches its own site and R directly and the other site's two nodes
// through the relay, and no link stays unreachable.
func TestRunAcrossNetworkNamespaces(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run of separate processes in network namespaces")
	}
	s := newSites(t)
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	names := []string{"r", "a1", "a2", "b1", "b2"}
	args := func(run string, i int) []string {
		return append(keyArgs(dir, run+names[i]), "--shard", fmt.Sprintf("%d/5", i+1), "--topology", "full")
	}
	anywhere := []string{"--listen", "/ip4/0.0.0.0/tcp/0", "--listen", "/ip4/0.0.0.0/udp/0/quic-v1"}

	// The reference: all five on loopback, all reaching each other.
	var ref []*proc
	r := startNode(t, bin, "ref-r", append(args("ref-", 0), "--wait-members", "5", "--relay-service")...)
	ref = append(ref, r)
	for i := 1; i < 5; i++ {
		ref = append(ref, startNode(t, bin, "ref-"+names[i], append(args("ref-", i), "--join", r.addr)...))
	}
	refReports := make([]runReport, 5)
	for i, p := range ref {
		refReports[i] = p.wait(t)
	}

	// Across sites.
	var procs []*proc
	t.Cleanup(func() {
		for _, p := range procs {
			_ = p.cmd.Process.Kill()
		}
	})
	r = startNodeIn(t, inNS(s.r), bin, "r", append(append(args("", 0), anywhere...), "--wait-members", "5", "--relay-service")...)
	procs = append(procs, r)
	toA, toB := r.listening(t, "/ip4/10.77.1.1/tcp/"), r.listening(t, "/ip4/10.77.2.1/tcp/")
	for i := 1; i < 5; i++ {
		ns, join := s.a, toA
		if i > 2 {
			ns, join = s.b, toB
		}
		procs = append(procs, startNodeIn(t, inNS(ns), bin, names[i], append(append(args("", i), anywhere...), "--join", join)...))
	}
	for i, p := range procs {
		rep, want := p.wait(t), refReports[i]
		t.Logf("%s: clock %d, accuracy %.4f (all reaching each other: %.4f), peers %d direct, %d relayed, %d unreachable (reference %d, %d, %d), applied twice %d",
			p.name, rep.Clock, rep.TestAccuracy, want.TestAccuracy, rep.DirectPeers, rep.RelayedPeers, rep.UnreachableLinks,
			want.DirectPeers, want.RelayedPeers, want.UnreachableLinks, rep.AppliedTwice)
		if rep.Clock != e2eIterations || rep.AppliedTwice != 0 {
			t.Errorf("%s: clock %d, applied twice %d", p.name, rep.Clock, rep.AppliedTwice)
		}
		if math.Abs(rep.TestAccuracy-want.TestAccuracy) > 0.01 {
			t.Errorf("%s ends at accuracy %.4f, the mesh on loopback at %.4f", p.name, rep.TestAccuracy, want.TestAccuracy)
		}
		if want.RelayedPeers != 0 || want.DirectPeers != 4 {
			t.Errorf("ref-%s: %d peers direct, %d relayed on loopback, want 4 direct", names[i], want.DirectPeers, want.RelayedPeers)
		}
		wantDirect, wantRelayed := 2, 2 // its own site and R; the other site
		if i == 0 {
			wantDirect, wantRelayed = 4, 0
		}
		if rep.DirectPeers != wantDirect || rep.RelayedPeers != wantRelayed || rep.UnreachableLinks != 0 {
			t.Errorf("%s: peers %d direct, %d relayed, %d unreachable; want %d, %d, 0",
				p.name, rep.DirectPeers, rep.RelayedPeers, rep.UnreachableLinks, wantDirect, wantRelayed)
		}
	}
}
