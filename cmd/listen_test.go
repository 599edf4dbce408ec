package cmd

import (
	"bytes"
	"net"
	"os/exec"
	"strings"
	"testing"

	ma "github.com/multiformats/go-multiaddr"

	"github.com/sketchmesh/sketchmesh/mesh"
)

// runBinary runs the built command and returns its exit status and output.
func runBinary(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	c := exec.Command(bin, args...)
	c.Stdout, c.Stderr = &out, &errb
	if err := c.Run(); err != nil && c.ProcessState == nil {
		t.Fatal(err)
	}
	return c.ProcessState.ExitCode(), out.String(), errb.String()
}

// A port held by another program, or by another node (whose libp2p
// listener shares ports with SO_REUSEPORT), is refused before anything is
// printed: one line on stderr, exit 2. The same for --metrics.
func TestRunRefusesPortsInUse(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Close()
	udp, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	other, err := mesh.NewHost(mesh.HostConfig{ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"}})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	otherAddr := other.Libp2p().Addrs()[0]
	otherPort, _ := otherAddr.ValueForProtocol(ma.P_TCP)
	tcpPort := portOf(tcp.Addr())
	free := "/ip4/127.0.0.1/tcp/0"
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"tcp port of another program", []string{"--listen", "/ip4/127.0.0.1/tcp/" + tcpPort}, "--listen /ip4/127.0.0.1/tcp/" + tcpPort + ": address in use: tcp port " + tcpPort + " is held by another program or another node"},
		{"udp port of another program", []string{"--listen", free, "--listen", "/ip4/127.0.0.1/udp/" + portOf(udp.LocalAddr()) + "/quic-v1"}, "udp port " + portOf(udp.LocalAddr()) + " is held"},
		{"port of another node", []string{"--listen", otherAddr.String()}, "tcp port " + otherPort + " is held"},
		{"metrics port", []string{"--listen", free, "--metrics", "127.0.0.1:" + tcpPort}, "--metrics 127.0.0.1:" + tcpPort + ": address in use"},
	} {
		code, out, errOut := runBinary(t, append([]string{"run", "--data", "rcv1", "--iterations", "1"}, c.args...)...)
		lines := strings.Split(strings.TrimSpace(errOut), "\n")
		if code != 2 || out != "" || len(lines) != 1 || !strings.Contains(errOut, c.want) {
			t.Errorf("%s: exit %d, stdout %q, stderr:\n%s\nwant exit 2, nothing on stdout and one line with %q", c.name, code, out, errOut, c.want)
		}
	}
}

func portOf(a net.Addr) string {
	_, p, _ := net.SplitHostPort(a.String())
	return p
}
