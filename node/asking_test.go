package node

import (
	"slices"
	"testing"
)

// syncRequestsIn counts the sync requests among msgs.
func syncRequestsIn(msgs []Message) int {
	k := 0
	for _, m := range msgs {
		if IsSyncMessage(m.Data) {
			k++
		}
	}
	return k
}

// A node held at its gate asks at its ticks: the tick that finds it
// stalled starts the wait, and it asks StallTicks later and then every
// StallTicks, stretched to AskPeriods iteration periods; with a floor of 0
// Tick sends none (the driver's).
func TestTickAsksWhenStalled(t *testing.T) {
	for _, tc := range []struct {
		stall, periods int
		period         uint64 // iteration period, in ticks
		want           []uint64
	}{
		{stall: 3, want: []uint64{4, 7, 10}},
		{stall: 3, periods: 3, period: 2, want: []uint64{7}},  // 3 periods of 2 ticks
		{stall: 3, periods: 3, period: 50, want: []uint64{9}}, // capped at SuspectTicks, 8
		{stall: 0, want: nil},
	} {
		nodes, _ := newNodes(t, 2, 0, 10, SyncConfig{HeartbeatTicks: 1, SuspectTicks: 8, DeadTicks: 1000})
		a, b := nodes[0], nodes[1]
		a.SetAskTiming(tc.stall, 0, tc.periods)
		if err := a.Train(); err != nil { // clock 1: the gate waits for b's update 1
			t.Fatal(err)
		}
		a.proto.period = 1000 * tc.period
		a.Ready()
		var asks []uint64
		for range 10 {
			// b says hello and trains no more: a stays held at its gate.
			b.Tick()
			for _, h := range b.Ready().Broadcast {
				a.Receive(b.ID(), h)
			}
			before := a.SyncStats().StallAsks
			a.Tick()
			k := syncRequestsIn(a.Ready().Messages)
			if a.SyncStats().StallAsks > before {
				asks = append(asks, a.Ticks())
				if k == 0 {
					t.Fatalf("%+v: a stall ask at tick %d sent no request", tc, a.Ticks())
				}
			}
		}
		if !slices.Equal(asks, tc.want) {
			t.Errorf("%+v: asked at ticks %v, want %v", tc, asks, tc.want)
		}
	}
}

// Anti-entropy leaves every EntropyTicks, whether or not the node is
// stalled, and not at all with a floor of 0.
func TestTickSendsAntiEntropy(t *testing.T) {
	for _, tc := range []struct {
		entropy int
		want    int
	}{{4, 2}, {0, 0}} {
		nodes, ids := newNodes(t, 3, 0, 20, SyncConfig{HeartbeatTicks: 100, SuspectTicks: 1000, DeadTicks: 1000})
		a, b := nodes[0], nodes[1]
		// c's updates never arrive: a and b declare it dead and go on,
		// so a lacks c's first updates, below its gate.
		for range 4 {
			for _, n := range []*Node{a, b} {
				if err := n.Train(); err != nil {
					t.Fatal(err)
				}
				settle(nodes[:2], deliver(nodes[:2], n.ID(), n.Ready().Messages, func(to string) bool { return to == ids[2] }))
			}
			if a.Clock() == 1 {
				a.DeclareDead(ids[2])
				b.DeclareDead(ids[2])
			}
		}
		a.SetAskTiming(0, tc.entropy, 0)
		sent := 0
		for range 9 {
			a.Tick()
			sent += syncRequestsIn(a.Ready().Messages)
		}
		if sent != tc.want {
			t.Errorf("entropy %d: %d requests in 9 ticks, want %d", tc.entropy, sent, tc.want)
		}
	}
}
