package cmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sketchmesh/sketchmesh/mesh"
)

// Bad reachability flags are refused before anything starts, naming the
// flag.
func TestRunBadReachFlags(t *testing.T) {
	psk, _, err := mesh.NewPSK()
	if err != nil {
		t.Fatal(err)
	}
	pskFile := filepath.Join(t.TempDir(), "mesh.psk")
	if err := os.WriteFile(pskFile, mesh.EncodePSK(psk), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"announce not a multiaddr", []string{"--announce", "203.0.113.7:4001"}, `--announce "203.0.113.7:4001" is not a multiaddr`},
		{"announce of a peer", []string{"--announce", "/ip4/203.0.113.7/tcp/4001/p2p/12D3KooWBXu3uGPMkjjxViK6autSnFH5QaKJgTwW8CaSxYSD6yYL"}, "names a peer"},
		{"relay not a multiaddr", []string{"--relay", "relay.example.org"}, `--relay "relay.example.org" is not a multiaddr`},
		{"relay without peer id", []string{"--relay", "/ip4/192.0.2.20/tcp/4001"}, "has no /p2p/<peer id> part"},
		{"quic in a private mesh", []string{"--psk", pskFile, "--listen", "/ip4/127.0.0.1/udp/0/quic-v1"}, "runs over TCP only"},
	} {
		code, _, errOut := runMain(append([]string{"run", "--data", "rcv1"}, c.args...)...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%s: exit %d, stderr:\n%s\nwant exit 2 and %q", c.name, code, errOut, c.want)
		}
	}
}

// Without --listen a node listens on TCP and QUIC, on TCP only in a
// private mesh; the final report counts its links by path.
func TestRunListensOnQUICAndReportsPaths(t *testing.T) {
	var f runFlags
	if got := f.listenAddrs(); len(got) != 2 || !strings.HasSuffix(got[1], "/quic-v1") {
		t.Errorf("default listen %v, want TCP and QUIC", got)
	}
	f.psk = "mesh.psk"
	if got := f.listenAddrs(); len(got) != 1 || !strings.Contains(got[0], "/tcp/") {
		t.Errorf("private default listen %v, want TCP only", got)
	}
	code, out, errOut := runMain("run", "--data", "a9a", "--listen", "/ip4/127.0.0.1/tcp/0", "--listen", "/ip4/127.0.0.1/udp/0/quic-v1",
		"--announce", "/ip4/203.0.113.7/tcp/4001", "--iterations", "2", "--json")
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, errOut)
	}
	for _, want := range []string{"listening: /ip4/127.0.0.1/udp/", "/quic-v1/p2p/", "listening: /ip4/203.0.113.7/tcp/4001/p2p/",
		`"direct_peers":0`, `"relayed_peers":0`, `"unreachable_links":0`} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
