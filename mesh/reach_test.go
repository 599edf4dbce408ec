package mesh

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/peerstore"
	relayv2 "github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/relay"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/sketchmesh/sketchmesh/dataset"
	"github.com/sketchmesh/sketchmesh/node"
)

// logBuffer collects a logger's output for tests.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func newReachHost(t *testing.T, rc ReachConfig, logger *slog.Logger) *Host {
	t.Helper()
	h, err := NewHost(HostConfig{ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0", "/ip4/127.0.0.1/udp/0/quic-v1"}, Reach: &rc, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	return h
}

// eventually polls cond until it holds, failing the test after a minute.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("still not so after a minute: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func circuitAddrs(h *Host) []ma.Multiaddr {
	var out []ma.Multiaddr
	for _, a := range h.Libp2p().Addrs() {
		if isCircuit(a) {
			out = append(out, a)
		}
	}
	return out
}

// Two hosts that know each other only by their circuit addresses trade
// updates through a member relay, a message far over relay v2's default
// 128 KiB limit included; once identify has told them each other's direct
// addresses, the link moves to a direct connection and keeps its order.
func TestRelayedLinkCarriesUpdatesThenGoesDirect(t *testing.T) {
	var logs logBuffer
	r := newReachHost(t, ReachConfig{RelayService: true}, logs.logger())
	a := newReachHost(t, ReachConfig{}, logs.logger())
	b := newReachHost(t, ReachConfig{}, logs.logger())
	r.addMember(a.h.ID())
	r.addMember(b.h.ID())
	a.addMember(r.h.ID())
	b.addMember(r.h.ID())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, h := range []*Host{a, b} {
		if err := h.Connect(ctx, info(r)); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "both hold a reservation with the relay", func() bool { return a.Reservations() == 1 && b.Reservations() == 1 })
	circuits := circuitAddrs(b)
	if len(circuits) == 0 {
		t.Fatalf("b advertises no circuit address: %v", b.Libp2p().Addrs())
	}
	a.h.Peerstore().AddAddrs(b.h.ID(), circuits, peerstore.PermanentAddrTTL)

	big := make([]byte, 1<<20)
	if _, err := rand.Read(big); err != nil {
		t.Fatal(err)
	}
	a.Send(b.ID(), big)
	for i := range 5 {
		a.Send(b.ID(), []byte(fmt.Sprintf("small %d", i)))
	}
	recv := func(want []byte) {
		t.Helper()
		select {
		case m := <-b.Inbox():
			if m.From != a.ID() || !bytes.Equal(m.Data, want) {
				t.Fatalf("got %d bytes from %s, want %d bytes from a", len(m.Data), m.From, len(want))
			}
		case <-ctx.Done():
			t.Fatalf("no message after a minute")
		}
	}
	recv(big)
	for i := range 5 {
		recv([]byte(fmt.Sprintf("small %d", i)))
	}
	if l := a.Links()[b.h.ID()]; !l.Relayed {
		t.Fatalf("a's link to b: %+v, want relayed", l)
	}
	for _, c := range a.h.Network().ConnsToPeer(b.h.ID()) {
		if isRelayed(c) && c.Stat().Limited {
			t.Errorf("the member relay limits relayed connections")
		}
	}

	// The upgrade: messages keep flowing, in order, and end on a direct
	// connection.
	for i := 0; !a.Links()[b.h.ID()].Direct; i++ {
		msg := []byte(fmt.Sprintf("upgrade %d", i))
		a.Send(b.ID(), msg)
		recv(msg)
		if ctx.Err() != nil {
			t.Fatalf("the link never went direct:\n%s", logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if d, _ := connPath(a.h, b.h.ID()); !d {
		t.Errorf("a has no direct connection to b after the upgrade")
	}
	if tr := a.Traffic(); tr.SendFailures != 0 {
		t.Errorf("send failures: %+v", tr)
	}
	for _, want := range []string{"relay reservation", "overlay link runs through a relay", "overlay link upgraded to a direct connection"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("no log line %q", want)
		}
	}
}

// A relay that is not a member keeps relay v2's default limits: the hosts
// warn of them, and updates still go over its limited connections, in both
// directions.
func TestUpdatesOverALimitedRelay(t *testing.T) {
	var logs logBuffer
	r := newReachHost(t, ReachConfig{}, nil)
	if _, err := relayv2.New(r.h); err != nil {
		t.Fatal(err)
	}
	a := newReachHost(t, ReachConfig{Relays: []peer.AddrInfo{info(r)}}, logs.logger())
	b := newReachHost(t, ReachConfig{Relays: []peer.AddrInfo{info(r)}}, logs.logger())
	eventually(t, "both hold a reservation with the relay", func() bool { return a.Reservations() == 1 && b.Reservations() == 1 })
	a.h.Peerstore().AddAddrs(b.h.ID(), circuitAddrs(b), peerstore.PermanentAddrTTL)
	a.Send(b.ID(), []byte("over a limited relay"))
	select {
	case m := <-b.Inbox():
		if string(m.Data) != "over a limited relay" {
			t.Fatalf("got %q", m.Data)
		}
	case <-time.After(time.Minute):
		t.Fatal("nothing arrived over the limited relay")
	}
	limited := false
	for _, c := range a.h.Network().ConnsToPeer(b.h.ID()) {
		limited = limited || c.Stat().Limited
	}
	if !limited {
		t.Errorf("no limited connection from a to b")
	}
	b.Send(a.ID(), []byte("and back"))
	select {
	case m := <-a.Inbox():
		if string(m.Data) != "and back" {
			t.Fatalf("got %q", m.Data)
		}
	case <-time.After(time.Minute):
		t.Fatal("nothing came back over the limited relay")
	}
	if !strings.Contains(logs.String(), "relay limits each relayed connection") {
		t.Errorf("no warning of the relay's limits:\n%s", logs.String())
	}
}

// A member relay serves members only: another peer's reservation is
// refused, and the refused host says so at warning level and falls back.
func TestRelayRefusalIsLogged(t *testing.T) {
	r := newReachHost(t, ReachConfig{RelayService: true}, nil)
	var logs logBuffer
	a := newReachHost(t, ReachConfig{Relays: []peer.AddrInfo{info(r)}}, logs.logger())
	eventually(t, "the refusal is logged", func() bool {
		return strings.Contains(logs.String(), "relay refused a reservation; falling back")
	})
	if n := a.Reservations(); n != 0 {
		t.Errorf("%d reservations after a refusal", n)
	}
	out := logs.String()
	for _, want := range []string{"level=WARN", r.h.ID().String(), "PERMISSION_DENIED", "no relay reservation"} {
		if !strings.Contains(out, want) {
			t.Errorf("the log lacks %q:\n%s", want, out)
		}
	}
}

// Announced addresses are advertised with the ones libp2p finds; a private
// host refuses to listen on QUIC.
func TestAnnouncedAddrs(t *testing.T) {
	ann := []ma.Multiaddr{ma.StringCast("/ip4/203.0.113.7/tcp/4001"), ma.StringCast("/dns4/node.example.org/udp/4001/quic-v1")}
	h := newReachHost(t, ReachConfig{Announce: ann}, nil)
	got := map[string]bool{}
	for _, a := range h.Libp2p().Addrs() {
		got[a.String()] = true
	}
	for _, a := range ann {
		if !got[a.String()] {
			t.Errorf("%s not advertised: %v", a, h.Libp2p().Addrs())
		}
	}
	if len(got) < len(ann)+2 {
		t.Errorf("the listen addresses are missing: %v", h.Libp2p().Addrs())
	}
	psk, _, err := NewPSK()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewHost(HostConfig{ListenAddrs: []string{"/ip4/127.0.0.1/udp/0/quic-v1"}, PSK: psk, Reach: &ReachConfig{}}); err == nil {
		t.Errorf("a private host listens on QUIC")
	}
}

// Advertised addresses fit an announcement: announced ones first, then
// public, private, circuit and loopback ones, without duplicates.
func TestAdvertisedOrderAndCap(t *testing.T) {
	var found []ma.Multiaddr
	for i := range 20 {
		found = append(found, ma.StringCast(fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", 5000+i)))
		found = append(found, ma.StringCast(fmt.Sprintf("/ip4/10.0.0.%d/tcp/4001", i+1)))
	}
	found = append(found, ma.StringCast("/ip4/8.8.4.4/tcp/4001"))
	circuit := ma.StringCast("/ip4/10.9.9.9/tcp/4001/p2p/12D3KooWBXu3uGPMkjjxViK6autSnFH5QaKJgTwW8CaSxYSD6yYL/p2p-circuit")
	ann := ma.StringCast("/ip4/203.0.113.7/tcp/4001")
	out := advertised([]ma.Multiaddr{ann, ann}, found, []ma.Multiaddr{circuit})
	if len(out) != maxAddrs {
		t.Fatalf("%d addresses, want %d", len(out), maxAddrs)
	}
	if !out[0].Equal(ann) || !out[1].Equal(ma.StringCast("/ip4/8.8.4.4/tcp/4001")) {
		t.Errorf("order: %v", out[:2])
	}
	if !out[22].Equal(circuit) {
		t.Errorf("the circuit address comes at %v, want after the 20 private ones", out[22])
	}
	for _, a := range out[23:] {
		if !strings.HasPrefix(a.String(), "/ip4/127.0.0.1/") {
			t.Errorf("%s after the circuit address", a)
		}
	}
}

// Circuit addresses are dialed after the direct ones have had their
// chance, at once when there is no direct one.
func TestPreferDirect(t *testing.T) {
	circuit := ma.StringCast("/ip4/10.9.9.9/tcp/4001/p2p/12D3KooWBXu3uGPMkjjxViK6autSnFH5QaKJgTwW8CaSxYSD6yYL/p2p-circuit")
	direct := ma.StringCast("/ip4/10.0.0.2/tcp/4001")
	quic := ma.StringCast("/ip4/10.0.0.2/udp/4001/quic-v1")
	ranked := preferDirect([]ma.Multiaddr{circuit, direct, quic})
	var lastDirect, relay time.Duration
	for _, r := range ranked {
		if isCircuit(r.Addr) {
			relay = r.Delay
		} else {
			lastDirect = max(lastDirect, r.Delay)
		}
	}
	if relay < lastDirect+500*time.Millisecond {
		t.Errorf("relay dialed at %v, direct ones until %v", relay, lastDirect)
	}
	if only := preferDirect([]ma.Multiaddr{circuit}); len(only) != 1 || only[0].Delay != 0 {
		t.Errorf("a lone circuit address waits: %v", only)
	}
}

func TestCheckAnnounce(t *testing.T) {
	for _, c := range []struct {
		in, want string
	}{
		{"/ip4/203.0.113.7/tcp/4001", ""},
		{"/dns4/node.example.org/udp/4001/quic-v1", ""},
		{"203.0.113.7:4001", "is not a multiaddr"},
		{"/ip4/203.0.113.7/tcp/4001/p2p/12D3KooWBXu3uGPMkjjxViK6autSnFH5QaKJgTwW8CaSxYSD6yYL", "names a peer"},
	} {
		_, err := CheckAnnounce(c.in)
		if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: err %v, want %q", c.in, err, c.want)
		}
	}
}

// unboundedSettings are the daemon test settings on rcv1 for a run that
// lasts until the test stops it.
func unboundedSettings(t *testing.T) (*dataset.Dataset, node.Settings) {
	t.Helper()
	train, _, err := dataset.Builtin("rcv1")
	if err != nil {
		t.Fatal(err)
	}
	set := daemonSettings(train)
	set.Iterations = 1 << 20
	return train, set
}

// A node whose only peer becomes unreachable (still running, but neither
// can connect to the other) says so at warning level and in its metrics.
func TestAloneWhenPeersUnreachable(t *testing.T) {
	train, set := unboundedSettings(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	hb := newTestHost(t)
	allow := NewAllowList(hb.h.ID())
	ha, err := NewHost(HostConfig{ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"}, Allow: allow})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ha.Close() })
	var logs logBuffer
	a := startDaemon(t, ctx, set, train.Shard(0, 2).Rows, nil, ha)
	a.cfg.MinMembers, a.cfg.DeadAfter, a.cfg.MinIteration = 2, time.Second, 5*time.Millisecond
	a.cfg.Metrics = NewMetrics()
	a.log = logs.logger()
	done := make(chan error, 2)
	go func() { _, err := a.Run(ctx); done <- err }()
	reply, err := Join(ctx, hb, ha.Addrs()[0], JoinRequest{Mesh: "test", Member: MemberID(hb.h.ID(), 1), Settings: set}, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := startDaemon(t, ctx, reply.Settings, train.Shard(1, 2).Rows, reply, hb)
	b.cfg.MinMembers, b.cfg.MinIteration = 2, 5*time.Millisecond
	go func() { _, err := b.Run(ctx); done <- err }()
	metric := func(read func(metricsSnapshot) float64) float64 {
		a.cfg.Metrics.mu.Lock()
		defer a.cfg.Metrics.mu.Unlock()
		return read(a.cfg.Metrics.s)
	}
	eventually(t, "the two train together", func() bool { return metric(func(s metricsSnapshot) float64 { return s.clock }) >= 5 })
	if d := metric(func(s metricsSnapshot) float64 { return s.connDirect }); d != 1 {
		t.Errorf("sketchmesh_connections{path=direct} %v, want 1", d)
	}

	allow.Remove(hb.h.ID())
	_ = ha.h.Network().ClosePeer(hb.h.ID())
	eventually(t, "the node says it has no reachable peer", func() bool {
		return strings.Contains(logs.String(), "level=WARN msg=\"no live peer") &&
			metric(func(s metricsSnapshot) float64 { return s.aloneSince }) > 0
	})
	cancel()
	for range 2 {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}

// Two members that cannot connect to each other (each one's allow list
// leaves the other out), but hear of each other through a third: the link
// between them is reported at warning level and counted as unreachable.
func TestUnreachableLinkIsReported(t *testing.T) {
	train, set := unboundedSettings(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	hr := newTestHost(t)
	var logs logBuffer
	hosts := []*Host{hr}
	for range 2 {
		h, err := NewHost(HostConfig{ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"}, Allow: NewAllowList(hr.h.ID()), Logger: logs.logger()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = h.Close() })
		hosts = append(hosts, h)
	}
	r := startDaemon(t, ctx, set, train.Shard(0, 3).Rows, nil, hr)
	done := make(chan error, 3)
	run := func(a *Daemon) {
		_, err := a.Run(ctx)
		done <- err
	}
	go run(r)
	var daemons []*Daemon
	for i, h := range hosts[1:] {
		reply, err := Join(ctx, h, hr.Addrs()[0], JoinRequest{Mesh: "test", Member: MemberID(h.h.ID(), 1), Settings: set}, nil)
		if err != nil {
			t.Fatal(err)
		}
		a := startDaemon(t, ctx, reply.Settings, train.Shard(i+1, 3).Rows, reply, h)
		a.cfg.Metrics = NewMetrics()
		daemons = append(daemons, a)
		go run(a)
	}
	a := daemons[0]
	eventually(t, "the link to the other member is warned of and counted as unreachable", func() bool {
		a.cfg.Metrics.mu.Lock()
		defer a.cfg.Metrics.mu.Unlock()
		return a.cfg.Metrics.s.unreachable >= 1 && a.cfg.Metrics.s.live == 3 &&
			strings.Contains(logs.String(), "level=WARN msg=\"overlay link cannot be established")
	})
	cancel()
	for range 3 {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}
