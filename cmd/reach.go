package cmd

import (
	"flag"

	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/sketchmesh/sketchmesh/mesh"
)

// Default listen addresses of run: TCP and QUIC on port 4001, TCP only in a
// private mesh (go-libp2p's QUIC has no private networks).
var (
	defaultListen        = []string{"/ip4/0.0.0.0/tcp/4001", "/ip4/0.0.0.0/udp/4001/quic-v1"}
	defaultPrivateListen = []string{"/ip4/0.0.0.0/tcp/4001"}
)

// registerReach registers the flags that make a node reachable across
// sites.
func (f *runFlags) registerReach(fs *flag.FlagSet) {
	fs.Var(&f.announce, "announce", "multiaddr to advertise besides the addresses libp2p finds (listen, observed, relayed), e.g. a forwarded public address /ip4/203.0.113.7/tcp/4001; repeatable")
	fs.BoolVar(&f.relayService, "relay-service", false, "serve as a circuit relay for the mesh's members, without relay v2's per-connection limits; members that cannot dial each other connect through it")
	fs.Var(&f.relay, "relay", "multiaddr of a relay to hold a reservation with, ending in /p2p/<peer id>, besides the members started with --relay-service (found on their own); repeatable")
}

// listenAddrs are the --listen addresses, or the defaults.
func (f *runFlags) listenAddrs() []string {
	switch {
	case len(f.listen) > 0:
		return f.listen
	case f.psk != "":
		return defaultPrivateListen
	default:
		return defaultListen
	}
}

// checkReach checks --announce, --relay, and --listen against --psk.
func (f *runFlags) checkReach() error {
	for _, s := range f.announce {
		if _, err := mesh.CheckAnnounce(s); err != nil {
			return badInput("--announce %v", err)
		}
	}
	for _, s := range f.relay {
		a, err := ma.NewMultiaddr(s)
		if err != nil {
			return badInput("--relay %q is not a multiaddr: %v", s, err)
		}
		if _, err := peer.AddrInfoFromP2pAddr(a); err != nil {
			return badInput("--relay %q has no /p2p/<peer id> part: a relay's full address is printed at its start", s)
		}
	}
	if f.psk != "" {
		for _, s := range f.listen {
			if a, err := ma.NewMultiaddr(s); err == nil && !isTCP(a) {
				return badInput("--listen %s: a private mesh (--psk) runs over TCP only (go-libp2p's QUIC has no private networks)", s)
			}
		}
	}
	return nil
}

func isTCP(a ma.Multiaddr) bool {
	_, err := a.ValueForProtocol(ma.P_TCP)
	return err == nil
}

// reachConfig is the checked --announce, --relay and --relay-service.
func (f *runFlags) reachConfig() *mesh.ReachConfig {
	rc := &mesh.ReachConfig{RelayService: f.relayService}
	for _, s := range f.announce {
		if a, err := mesh.CheckAnnounce(s); err == nil {
			rc.Announce = append(rc.Announce, a)
		}
	}
	for _, s := range f.relay {
		if a, err := ma.NewMultiaddr(s); err == nil {
			if ai, err := peer.AddrInfoFromP2pAddr(a); err == nil {
				rc.Relays = append(rc.Relays, *ai)
			}
		}
	}
	return rc
}
