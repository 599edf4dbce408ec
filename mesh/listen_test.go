package mesh

import (
	"errors"
	"net"
	"testing"
)

func TestCheckListen(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	if err := CheckListen([]string{"/ip4/127.0.0.1/tcp/0", "/ip4/127.0.0.1/udp/0/quic-v1", "/dns4/localhost/tcp/" + port}); err != nil {
		t.Errorf("free or unchecked addresses: %v", err)
	}
	err = CheckListen([]string{"/ip4/127.0.0.1/tcp/0", "/ip4/127.0.0.1/tcp/" + port})
	if !errors.Is(err, ErrAddrInUse) {
		t.Errorf("a held port: %v, want ErrAddrInUse", err)
	}
	if err := CheckListen([]string{"/ip4/192.0.2.1/tcp/4001"}); err == nil || errors.Is(err, ErrAddrInUse) {
		t.Errorf("an address not on this machine: %v, want a bind error", err)
	}
	// A host's listener shares its port (SO_REUSEPORT); the check does not.
	h, err := NewHost(HostConfig{ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"}})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if _, err := NewHost(HostConfig{ListenAddrs: []string{h.Libp2p().Addrs()[0].String()}}); !errors.Is(err, ErrAddrInUse) {
		t.Errorf("a second host on the first's port: %v, want ErrAddrInUse", err)
	}
}

func TestOneLine(t *testing.T) {
	err := OneLine(errors.New("failed to dial:\n  * [/ip4/1.2.3.4/tcp/1] dial tcp: refused\n  * [/ip4/5.6.7.8/tcp/1] timeout\n"))
	if got, want := err.Error(), "failed to dial: [/ip4/1.2.3.4/tcp/1] dial tcp: refused; [/ip4/5.6.7.8/tcp/1] timeout"; got != want {
		t.Errorf("OneLine = %q, want %q", got, want)
	}
	if OneLine(nil) != nil {
		t.Error("OneLine(nil) != nil")
	}
}
