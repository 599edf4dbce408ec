package mesh

import (
	"errors"
	"fmt"
	"net"
	"syscall"

	ma "github.com/multiformats/go-multiaddr"
)

// ErrAddrInUse is returned by CheckListen for a port another socket holds.
var ErrAddrInUse = errors.New("address in use")

// CheckListen binds each TCP and UDP port of addrs for a moment, without
// SO_REUSEPORT, and releases it. libp2p binds its listeners with
// SO_REUSEPORT, so a port another libp2p node holds would be shared
// silently (and half the connections meant for that node would reach this
// one); a plain bind is refused whenever any socket holds the port, so a
// port in use is found before anything starts. Port 0 (any free port) and
// addresses without a TCP or UDP port are not checked.
func CheckListen(addrs []string) error {
	for _, s := range addrs {
		a, err := ma.NewMultiaddr(s)
		if err != nil {
			return fmt.Errorf("%s is not a multiaddr: %w", s, err)
		}
		network, hostport, ok := socketOf(a)
		if !ok {
			continue
		}
		if err := tryBind(network, hostport); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	return nil
}

// socketOf returns the network and host:port an address binds, if it binds
// a fixed TCP or UDP port on an IP.
func socketOf(a ma.Multiaddr) (network, hostport string, ok bool) {
	var ip, port string
	for _, c := range a {
		switch c.Protocol().Code {
		case ma.P_IP4, ma.P_IP6:
			if ip == "" {
				ip = c.Value()
			}
		case ma.P_TCP, ma.P_UDP:
			if ip == "" || port != "" {
				return "", "", false
			}
			network, port = c.Protocol().Name, c.Value()
		}
	}
	if ip == "" || port == "" || port == "0" {
		return "", "", false
	}
	return network, net.JoinHostPort(ip, port), true
}

// tryBind binds and releases one socket.
func tryBind(network, hostport string) error {
	if network == "tcp" {
		ln, err := net.Listen("tcp", hostport)
		if err != nil {
			return bindError(network, hostport, err)
		}
		return ln.Close()
	}
	pc, err := net.ListenPacket("udp", hostport)
	if err != nil {
		return bindError(network, hostport, err)
	}
	return pc.Close()
}

// ListenTCP opens a TCP listener for a host:port flag such as --metrics,
// naming a port in use as CheckListen does.
func ListenTCP(hostport string) (net.Listener, error) {
	ln, err := net.Listen("tcp", hostport)
	if err != nil {
		return nil, bindError("tcp", hostport, err)
	}
	return ln, nil
}

// bindError says plainly why a bind failed, on one line.
func bindError(network, hostport string, err error) error {
	if errors.Is(err, syscall.EADDRINUSE) {
		_, port, _ := net.SplitHostPort(hostport)
		return fmt.Errorf("%w: %s port %s is held by another program or another node", ErrAddrInUse, network, port)
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		err = op.Err
	}
	return fmt.Errorf("cannot bind %s %s: %w", network, hostport, err)
}
