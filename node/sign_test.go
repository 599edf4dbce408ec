package node

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/sketchmesh/sketchmesh/codec"
	"github.com/sketchmesh/sketchmesh/wire"
)

// macAuth is a test Authenticator: each member's "key" is a secret every
// test node knows, which is enough to exercise the core's rules.
type macAuth struct{ mesh string }

func (a macAuth) mac(origin string, clock uint64, frame []byte) []byte {
	m := hmac.New(sha256.New, []byte("key of "+origin))
	m.Write(SignedBytes(a.mesh, origin, clock, frame))
	return m.Sum(nil)
}

func (a macAuth) Sign(origin string, clock uint64, frame []byte) ([]byte, error) {
	return a.mac(origin, clock, frame), nil
}

func (a macAuth) Verify(origin string, clock uint64, frame, sig []byte) error {
	if !hmac.Equal(sig, a.mac(origin, clock, frame)) {
		return fmt.Errorf("%w: %s clock %d", ErrBadSignature, origin, clock)
	}
	return nil
}

func (a macAuth) SignMessage(msg []byte) ([]byte, error) {
	return nil, errors.New("macAuth signs for any member: use memberAuth")
}

func (a macAuth) msgMAC(signer string, msg []byte) []byte {
	m := hmac.New(sha256.New, []byte("key of "+signer))
	m.Write(MessageBytes(a.mesh, msg))
	return m.Sum(nil)
}

func (a macAuth) VerifyMessage(signer string, msg, sig []byte) error {
	if !hmac.Equal(sig, a.msgMAC(signer, msg)) {
		return fmt.Errorf("%w: message of %s", ErrBadSignature, signer)
	}
	return nil
}

// memberAuth is macAuth bound to one member, which SignMessage signs as.
type memberAuth struct {
	macAuth
	self string
}

func (a memberAuth) SignMessage(msg []byte) ([]byte, error) { return a.msgMAC(a.self, msg), nil }

// chain relays every update along members in order: a → b → c.
type chain []string

func (c chain) Forward(origin, at string) []string {
	for i, m := range c {
		if m == at && i+1 < len(c) && c[i+1] != origin {
			return []string{c[i+1]}
		}
	}
	return nil
}

func newSigned(t *testing.T, p int, auth Authenticator, router Router, robust func() *Robust) ([]*Node, []string) {
	t.Helper()
	return newNodesWith(t, p, SyncConfig{}, func(c *Config) {
		c.Staleness, c.Iterations, c.Auth, c.Router = 1, 20, auth, router
		if robust != nil {
			c.Robust = robust()
		}
	})
}

func rawFrame(t *testing.T, keys []uint64, vals []float32) []byte {
	t.Helper()
	f, err := codec.Raw{}.Encode(nil, codec.Sparse{Keys: keys, Values: vals})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// poisonFrame returns a raw frame of keys 1 and 2 holding bad as the value
// of key 2: the raw encoder refuses non-finite values, so the frame is
// patched after encoding.
func poisonFrame(t *testing.T, bad float32) []byte {
	t.Helper()
	const marker = float32(1.25)
	f := rawFrame(t, []uint64{1, 2}, []float32{0.5, marker})
	var mb, bb [4]byte
	binary.LittleEndian.PutUint32(mb[:], math.Float32bits(marker))
	binary.LittleEndian.PutUint32(bb[:], math.Float32bits(bad))
	i := bytes.Index(f, mb[:])
	if i < 0 {
		binary.BigEndian.PutUint32(mb[:], math.Float32bits(marker))
		binary.BigEndian.PutUint32(bb[:], math.Float32bits(bad))
		if i = bytes.Index(f, mb[:]); i < 0 {
			t.Fatal("marker value not found in the raw frame")
		}
	}
	copy(f[i:], bb[:])
	return f
}

func signed(a Authenticator, origin string, clock uint64, frame []byte) Update {
	sig, _ := a.Sign(origin, clock, frame)
	return Update{Origin: origin, Clock: clock, Frame: frame, Sig: sig}
}

// A signed update reaches the end of a relay chain with the origin's
// signature byte for byte; any change to origin, clock, frame, mesh or
// signature is refused as bad_signature before the frame is decoded, and
// nothing of it is applied or relayed.
func TestSignedUpdatesRelayUnchangedAndForgeriesFail(t *testing.T) {
	auth := macAuth{mesh: "m1"}
	ids := []string{"node-00", "node-01", "node-02"}
	nodes, _ := newSigned(t, 3, auth, chain(ids), nil)
	a, b, c := nodes[0], nodes[1], nodes[2]
	if err := a.Train(); err != nil {
		t.Fatal(err)
	}
	msgs := a.Ready().Messages
	if len(msgs) != 1 || msgs[0].To != ids[1] {
		t.Fatalf("a sent %v, want one message to b", msgs)
	}
	sent, err := DecodeEnvelope(msgs[0].Data)
	if err != nil || len(sent) != 1 {
		t.Fatalf("a's envelope: %v, %v", sent, err)
	}
	orig := sent[0]
	if auth.Verify(orig.Origin, orig.Clock, orig.Frame, orig.Sig) != nil {
		t.Fatal("a's own signature does not verify")
	}
	b.Receive(ids[0], msgs[0].Data)
	relayed := b.Ready().Messages
	if len(relayed) != 1 || relayed[0].To != ids[2] {
		t.Fatalf("b relayed %v, want one message to c", relayed)
	}
	if !bytes.Equal(relayed[0].Data, msgs[0].Data) {
		t.Fatal("the relayed envelope differs from the origin's")
	}

	flip := bytes.Clone(orig.Frame)
	flip[len(flip)-1] ^= 1
	forgedSig := bytes.Clone(orig.Sig)
	forgedSig[0] ^= 1
	cases := map[string]Update{
		"frame altered":      {Origin: orig.Origin, Clock: orig.Clock, Frame: flip, Sig: orig.Sig},
		"clock moved":        {Origin: orig.Origin, Clock: orig.Clock + 1, Frame: orig.Frame, Sig: orig.Sig},
		"origin forged":      {Origin: ids[1], Clock: orig.Clock, Frame: orig.Frame, Sig: orig.Sig},
		"signature missing":  {Origin: orig.Origin, Clock: orig.Clock, Frame: orig.Frame},
		"signature altered":  {Origin: orig.Origin, Clock: orig.Clock, Frame: orig.Frame, Sig: forgedSig},
		"signed for mesh m2": signed(macAuth{mesh: "m2"}, orig.Origin, orig.Clock, orig.Frame),
		"signed by another":  {Origin: orig.Origin, Clock: orig.Clock, Frame: orig.Frame, Sig: auth.mac(ids[1], orig.Clock, orig.Frame)},
	}
	for name, u := range cases {
		before := c.Stats()
		c.Receive(ids[1], EncodeEnvelope([]Update{u}))
		after := c.Stats()
		if got := after.Rejected[RejectBadSignature] - before.Rejected[RejectBadSignature]; got != 1 {
			t.Errorf("%s: bad_signature +%d, want +1 (rejected %v)", name, got, after.Rejected)
		}
		if after.UpdatesApplied != before.UpdatesApplied || c.HasReady() {
			t.Errorf("%s: applied or relayed", name)
		}
	}
	// The genuine update still applies after all the forgeries.
	c.Receive(ids[1], relayed[0].Data)
	if st := c.Stats(); st.UpdatesApplied != 1 || !c.VectorClock().Has(ids[0], 1) {
		t.Fatalf("genuine update after forgeries: applied %d", st.UpdatesApplied)
	}
}

// A retained update is resent with its signature, so a node that lost it
// can verify the resend.
func TestSyncResendsSignatures(t *testing.T) {
	auth := macAuth{mesh: "m"}
	nodes, ids := newSigned(t, 2, auth, nil, nil)
	a, b := nodes[0], nodes[1]
	for _, n := range nodes {
		if err := n.Train(); err != nil {
			t.Fatal(err)
		}
	}
	_ = a.Ready() // a's update to b is lost
	a.Receive(ids[1], b.Ready().Messages[0].Data)
	if err := b.Train(); err != nil { // b runs ahead to its gate (s = 1)
		t.Fatal(err)
	}
	_ = b.Ready()
	reqs := b.SyncRequest()
	if len(reqs) != 1 || reqs[0].To != ids[0] {
		t.Fatalf("b's requests %v", reqs)
	}
	a.Receive(ids[1], reqs[0].Data)
	answer := a.Ready().Messages
	if len(answer) != 1 {
		t.Fatalf("a answered %d messages", len(answer))
	}
	ups, err := DecodeEnvelope(answer[0].Data)
	if err != nil || len(ups) != 1 || len(ups[0].Sig) == 0 {
		t.Fatalf("answer %v, %v: want one signed update", ups, err)
	}
	b.Receive(ids[0], answer[0].Data)
	if !b.VectorClock().Has(ids[0], 1) || b.Stats().Rejected[RejectBadSignature] != 0 {
		t.Fatalf("resend not applied: rejected %v", b.Stats().Rejected)
	}
	// The joiner's snapshot carries the signatures of what it retains.
	for _, u := range a.Snapshot().Pending {
		if auth.Verify(u.Origin, u.Clock, u.Frame, u.Sig) != nil {
			t.Fatalf("snapshot update %s/%d without a valid signature", u.Origin, u.Clock)
		}
	}
}

// An authenticated member's poison is refused and counted, nothing of it
// is applied, and its clock counts as heard so the gate does not wait for
// it forever; it is forwarded unchanged. In an unsigned mesh the same
// update is dropped without marking the clock, since anyone could have
// made it.
func TestPoisonedUpdates(t *testing.T) {
	nan := float32(math.NaN())
	inf := float32(math.Inf(1))
	for _, signedMesh := range []bool{true, false} {
		var auth Authenticator
		if signedMesh {
			auth = macAuth{mesh: "m"}
		}
		ids := []string{"node-00", "node-01", "node-02"}
		nodes, _ := newSigned(t, 3, auth, chain([]string{ids[1], ids[0], ids[2]}), nil)
		a := nodes[0]
		for i, bad := range []float32{nan, inf} {
			clock := uint64(i + 1)
			u := Update{Origin: ids[1], Clock: clock, Frame: poisonFrame(t, bad)}
			if auth != nil {
				u = signed(auth, u.Origin, u.Clock, u.Frame)
			}
			before := a.Stats()
			a.Receive(ids[1], EncodeEnvelope([]Update{u}))
			after := a.Stats()
			if got := after.Rejected[RejectNaN] - before.Rejected[RejectNaN]; got != 1 {
				t.Fatalf("signed %v, value %v: nan +%d, want +1 (%v)", signedMesh, bad, got, after.Rejected)
			}
			if after.UpdatesApplied != before.UpdatesApplied {
				t.Fatalf("signed %v: a poisoned update was applied", signedMesh)
			}
			if heard := a.VectorClock().Has(ids[1], clock); heard != signedMesh {
				t.Fatalf("signed %v: clock %d heard = %v", signedMesh, clock, heard)
			}
			msgs := a.Ready().Messages
			if signedMesh && (len(msgs) != 1 || msgs[0].To != ids[2]) {
				t.Fatalf("a signed poisoned update was not forwarded: %v", msgs)
			}
			if !signedMesh && len(msgs) != 0 {
				t.Fatalf("an unsigned poisoned update was forwarded")
			}
		}
		for _, x := range a.View() {
			if x != 0 {
				t.Fatalf("signed %v: the view moved: %v", signedMesh, x)
			}
		}
	}
}

// The norm bound is NormFactor times the median of accepted norms: an
// update just below passes, one above is refused as norm, and neither a
// refused update nor an empty one moves the median.
func TestNormBound(t *testing.T) {
	r, err := NewRobust(RobustConfig{NormFactor: 4, NormWindow: 3})
	if err != nil {
		t.Fatal(err)
	}
	one := codec.Sparse{Keys: []uint64{0}, Values: []float32{1}}
	scaled := func(x float32) codec.Sparse { return codec.Sparse{Keys: []uint64{0}, Values: []float32{x}} }
	if b := r.NormBound(); b != 0 {
		t.Fatalf("bound before any update %v, want 0 (none)", b)
	}
	for _, x := range []float32{1000, 2, 3} {
		if _, reason := r.check(scaled(x), 4, false); reason != "" {
			t.Fatalf("%v refused (%s) while the window fills", x, reason)
		}
	}
	// Window {1000, 2, 3}: median 3, bound 12.
	if b := r.NormBound(); b != 12 {
		t.Fatalf("bound %v, want 12", b)
	}
	if _, reason := r.check(scaled(12.5), 4, false); reason != RejectNorm {
		t.Fatalf("12.5 over a bound of 12: reason %q, want norm", reason)
	}
	r.own(codec.Sparse{Keys: []uint64{}, Values: []float32{}}, 4)
	if b := r.NormBound(); b != 12 {
		t.Fatalf("bound moved to %v by a refused or empty update", b)
	}
	r.own(one, 4) // window {1, 2, 3} (1000 fell out): median 2
	if b := r.NormBound(); b != 8 {
		t.Fatalf("bound %v after the window turned over, want 8", b)
	}
	def, _ := NewRobust(RobustConfig{})
	def.own(one, 4)
	if b := def.NormBound(); b != 100 {
		t.Fatalf("default bound %v, want 100 × the median", b)
	}
	if _, reason := def.check(scaled(101), 4, false); reason != "" {
		t.Fatal("the default bound refused an update in an unsigned mesh")
	}
	if _, reason := def.check(scaled(101), 4, true); reason != RejectNorm {
		t.Fatal("the default bound let 101 × the median through in a signed mesh")
	}
	if _, err := NewRobust(RobustConfig{NormFactor: 0.5}); err == nil {
		t.Fatal("a norm factor below 1 was accepted")
	}
	off, _ := NewRobust(RobustConfig{NormFactor: -1})
	off.own(one, 4)
	if _, reason := off.check(scaled(1e30), 4, true); reason != "" || off.NormBound() != 0 {
		t.Fatal("a negative norm factor did not turn the bound off")
	}
}

// Centered clipping pulls an outlier to distance τ from the centre, keeps
// its direction, and leaves updates within τ untouched.
func TestCenteredClipping(t *testing.T) {
	r, err := NewRobust(RobustConfig{NormFactor: -1, Clip: true, ClipFactor: 1, ClipMomentum: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	const size = 3
	// Own update (2,0,0): distance 2 from v=0, centre becomes (1,0,0).
	r.own(codec.Sparse{Keys: []uint64{0}, Values: []float32{2}}, size)
	if r.center[0] != 1 || r.dists.median() != 2 {
		t.Fatalf("centre %v, median distance %v", r.center, r.dists.median())
	}
	// Within τ = 2 of the centre: applied as sent.
	near := codec.Sparse{Keys: []uint64{0, 1}, Values: []float32{2, 1}}
	got, reason := r.check(near, size, true)
	if reason != "" || got.Dense() || !slicesEqual(got.Values, near.Values) {
		t.Fatalf("an update within τ was changed: %+v (%s)", got, reason)
	}
	// Centre now 0.5·(1,0,0) + 0.5·(2,1,0) = (1.5, 0.5, 0); distances {2, √1.5}.
	v := append([]float64(nil), r.center...)
	tau := r.dists.median()
	far := codec.Sparse{Keys: []uint64{2}, Values: []float32{100}}
	got, reason = r.check(far, size, true)
	if reason != "" || !got.Dense() || len(got.Values) != size {
		t.Fatalf("outlier: %+v (%s), want a dense clipped update", got, reason)
	}
	var d2 float64
	for i, x := range got.Values {
		d := float64(x) - v[i]
		d2 += d * d
	}
	if math.Abs(math.Sqrt(d2)-tau) > 1e-4 {
		t.Fatalf("clipped distance %v, want τ = %v", math.Sqrt(d2), tau)
	}
	if got.Values[2] <= 0 || r.Clipped() != 1 {
		t.Fatalf("clipped update %v lost the outlier's direction (clipped %d)", got.Values, r.Clipped())
	}
}

func slicesEqual(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// With signing and the default screen, honest training is unchanged: a
// signed cluster ends with the same views as an unsigned one, bit for bit,
// and nothing is refused.
func TestSignedTrainingMatchesUnsigned(t *testing.T) {
	run := func(auth Authenticator) []float64 {
		nodes, _ := newSigned(t, 3, auth, nil, nil)
		for round := 0; round < 20; round++ {
			var q []flight
			for _, n := range nodes {
				if err := n.Train(); err != nil {
					t.Fatal(err)
				}
				for _, m := range n.Ready().Messages {
					q = append(q, flight{from: n.ID(), to: m.To, data: m.Data})
				}
			}
			settle(nodes, q)
		}
		for _, n := range nodes {
			if len(n.Stats().Rejected) != 0 {
				t.Fatalf("honest run rejected %v", n.Stats().Rejected)
			}
		}
		return append([]float64(nil), nodes[0].View()...)
	}
	if !sameFloats(run(macAuth{mesh: "m"}), run(nil)) {
		t.Fatal("signing changed the trained model")
	}
}

// pendingOf returns the values of origin's update of clock that n holds
// pending (applied but not committed), nil when it holds none.
func pendingOf(n *Node, origin string, clock uint64) []float32 {
	if u, ok := n.pendingOf(clock, origin); ok {
		return u.Values
	}
	return nil
}

// Issue 14, defect 5: a validly signed update every member refused for its
// norm travels in a snapshot's Pending frames, and a joiner, which has no
// norm history, used to apply it (key 1 += 1e6 at the joiner only). The
// snapshot marks it refused, the mark survives the wire format, and the
// joiner marks it heard without applying it, and passes the mark on.
func TestJoinerDoesNotApplyRefusedUpdate(t *testing.T) {
	auth := macAuth{mesh: "m"}
	nodes, ids := newNodesWith(t, 2, SyncConfig{}, func(c *Config) {
		c.Staleness, c.Iterations, c.Auth = 1, 1000, auth
	})
	a, m := nodes[0], nodes[1]
	pn := newPartitionNet(t, nodes)
	for range 3 {
		pn.round()
	}
	c := m.Clock() + 1
	poison := signed(auth, ids[1], c, rawFrame(t, []uint64{1, 2}, []float32{1e6, -1e6}))
	a.Receive(ids[1], EncodeEnvelope([]Update{poison}))
	if got := a.Stats().Rejected[RejectNorm]; got != 1 || !a.VectorClock().Has(ids[1], c) {
		t.Fatalf("a refused %d updates for their norm and holds m's clock %d: %v; want 1 and heard",
			got, c, a.VectorClock().Has(ids[1], c))
	}
	given := a.Snapshot()
	if want := []UpdateID{{Origin: ids[1], Clock: c}}; !slices.Equal(given.Refused, want) {
		t.Fatalf("the snapshot marks %v refused, want %v", given.Refused, want)
	}
	w := wire.NewWriter()
	given.WriteTo(w)
	snap, err := ReadSnapshot(wire.NewReader(w.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Pending) != 1 || snap.Pending[0].Clock != c || !slices.Equal(snap.Refused, given.Refused) {
		t.Fatalf("read back pending %d updates and refused %v", len(snap.Pending), snap.Refused)
	}
	cfg := a.Config()
	cfg.ID, cfg.Members, cfg.Start, cfg.Robust = "node-02", nil, snap, nil
	j, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	j.Receive(ids[0], EncodeEnvelope(snap.Pending))
	if got := j.Stats().Rejected; got[RejectMarkedRefused] != 1 || len(got) != 1 {
		t.Fatalf("the joiner rejected %v, want one marked_refused", got)
	}
	if !j.VectorClock().Has(ids[1], c) {
		t.Fatalf("the joiner does not count m's clock %d as heard", c)
	}
	if pa, pj := pendingOf(a, ids[1], c), pendingOf(j, ids[1], c); pa != nil || pj != nil {
		t.Fatalf("m's update of clock %d is pending with values %v at the donor and %v at the joiner, want none at either", c, pa, pj)
	}
	if again := j.Snapshot(); !slices.Equal(again.Refused, given.Refused) {
		t.Fatalf("the joiner's own snapshot marks %v refused, want %v", again.Refused, given.Refused)
	}
}

// The robust checks' window keeps its values in order as they come and
// go: its median is the sorted ring's lower middle value after every push,
// duplicates and a wrapping ring included.
func TestWindowMedianFollowsTheRing(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 9))
	for _, size := range []int{1, 2, 5, 64} {
		w := newWindow(size)
		var ring []float64
		for i := range 300 {
			x := float64(rng.IntN(20)) // many repeats
			if i%7 == 0 {
				x = rng.NormFloat64()
			}
			w.push(x)
			ring = append(ring, x)
			if len(ring) > size {
				ring = ring[1:]
			}
			sorted := slices.Sorted(slices.Values(ring))
			if got, want := w.median(), sorted[(len(sorted)-1)/2]; got != want || w.len() != len(ring) {
				t.Fatalf("size %d, push %d: median %v of %d values, want %v of %d", size, i, got, w.len(), want, len(ring))
			}
		}
	}
	if w := newWindow(4); w.median() != 0 {
		t.Fatalf("empty window's median %v", w.median())
	}
}
