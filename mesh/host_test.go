package mesh

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/sketchmesh/sketchmesh/node"
)

func newTestHost(t *testing.T) *Host {
	t.Helper()
	h, err := NewHost(HostConfig{ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	return h
}

func TestSendReceiveInOrder(t *testing.T) {
	a, b := newTestHost(t), newTestHost(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := a.Connect(ctx, peer.AddrInfo{ID: b.Libp2p().ID(), Addrs: b.Libp2p().Addrs()}); err != nil {
		t.Fatal(err)
	}
	const n = 200
	for i := 0; i < n; i++ {
		a.Send(b.ID(), []byte(fmt.Sprintf("message %d", i)))
	}
	if err := a.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		select {
		case m := <-b.Inbox():
			if m.From != a.ID() || string(m.Data) != fmt.Sprintf("message %d", i) {
				t.Fatalf("message %d: from %s data %q", i, m.From, m.Data)
			}
		case <-ctx.Done():
			t.Fatalf("only %d of %d messages arrived", i, n)
		}
	}
	tr := a.Traffic()
	if tr.MessagesSent != n || tr.SendFailures != 0 {
		t.Fatalf("traffic %+v", tr)
	}
	if got := b.Traffic().BytesReceived; got != tr.BytesSent {
		t.Fatalf("received %d bytes, sent %d", got, tr.BytesSent)
	}
}

func TestReadMessageRefusesOversizedLength(t *testing.T) {
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], node.MaxEnvelopeBytes+1)
	_, err := readMessage(bytes.NewReader(hdr[:]))
	if !errors.Is(err, errTooLarge) {
		t.Fatalf("err = %v, want errTooLarge", err)
	}
	binary.BigEndian.PutUint32(hdr[:], 10)
	_, err = readMessage(bytes.NewReader(append(hdr[:], 1, 2, 3)))
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("truncated message: err = %v", err)
	}
	if _, err := readMessage(bytes.NewReader(nil)); !errors.Is(err, io.EOF) {
		t.Fatalf("clean end: err = %v, want io.EOF", err)
	}
}

// A peer that sends an absurd length header has its stream reset and
// counted; the host keeps serving others.
func TestHostileStreamIsResetAndCounted(t *testing.T) {
	victim, attacker := newTestHost(t), newTestHost(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := attacker.Connect(ctx, peer.AddrInfo{ID: victim.Libp2p().ID(), Addrs: victim.Libp2p().Addrs()}); err != nil {
		t.Fatal(err)
	}
	s, err := attacker.Libp2p().NewStream(ctx, victim.Libp2p().ID(), UpdateProtocol)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write([]byte{0xff, 0xff, 0xff, 0xff}); err != nil {
		t.Fatal(err)
	}
	for victim.Traffic().BadStreams == 0 {
		select {
		case <-ctx.Done():
			t.Fatal("oversized length not counted")
		case <-time.After(5 * time.Millisecond):
		}
	}
	attacker.Send(victim.ID(), []byte("still here"))
	select {
	case m := <-victim.Inbox():
		if string(m.Data) != "still here" {
			t.Fatalf("got %q", m.Data)
		}
	case <-ctx.Done():
		t.Fatal("host stopped serving after a hostile stream")
	}
}
