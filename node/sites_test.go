package node

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/sketchmesh/sketchmesh/halton"
)

// newSitePnet is newPnet for any number of members (shards are reused
// past four) with an overlay builder.
func newSitePnet(t *testing.T, ids []string, iters uint64, overlay func(live []string, site map[string]string) Router) *pnet {
	n := &pnet{t: t, nodes: map[string]*Node{}, auth: macAuth{mesh: "m"}, iters: iters,
		sync: SyncConfig{HeartbeatTicks: 2, SuspectTicks: 10, DeadTicks: 30}}
	for i, id := range ids {
		cfg := n.config(id, i%4, ids, nil)
		cfg.Overlay = overlay
		n.add(id, cfg)
	}
	return n
}

// Each member's site label travels in its signed hellos; every member
// builds the overlay over the labels it heard (Config.Overlay), so once the
// hellos are in, all hold the same two-site overlay and train to the same
// view with every update applied once.
func TestSitesTravelInHellosAndShapeTheOverlay(t *testing.T) {
	ids := []string{"a/1", "b/1", "c/1", "d/1", "e/1", "f/1"}
	want := map[string]string{}
	n := newSitePnet(t, ids, 12, func(live []string, site map[string]string) Router { return halton.BuildSites(live, site) })
	for i, id := range ids {
		s := n.nodes[id]
		want[id] = []string{"east", "west"}[i%2]
		if err := s.SetSite(want[id]); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.nodes["a/1"].SetSite("bad label"); err == nil || n.nodes["a/1"].Sites()["a/1"] != "east" {
		t.Fatalf("SetSite with a space: err %v, site now %q", err, n.nodes["a/1"].Sites()["a/1"])
	}
	for _, id := range ids {
		if r := n.nodes[id].currentRouter().(*halton.SiteOverlay); r.Sites() != 1 {
			t.Fatalf("%s built %d sites before hearing any label", id, r.Sites())
		}
	}
	for range 3 {
		n.round()
	}
	for _, id := range ids {
		s := n.nodes[id]
		if got := s.Sites(); !maps.Equal(got, want) {
			t.Fatalf("%s heard sites %v, want %v", id, got, want)
		}
		if r := s.currentRouter().(*halton.SiteOverlay); r.Sites() != 2 || r.Site("a/1") != "east" {
			t.Fatalf("%s relays along %d sites", id, r.Sites())
		}
	}
	// A relabelled member is heard, and everyone rebuilds.
	if err := n.nodes["b/1"].SetSite("east"); err != nil {
		t.Fatal(err)
	}
	want["b/1"] = "east"
	n.round()
	n.round()
	for _, id := range ids {
		if got := n.nodes[id].Sites(); !maps.Equal(got, want) {
			t.Fatalf("after b/1 moved, %s heard sites %v, want %v", id, got, want)
		}
	}
	n.runUntilDone(400)
	n.checkSameViews()
	for _, id := range ids {
		if snap, applied, held := n.nodes[id].Ledger(); snap+applied != held || applied != uint64(len(ids))*12 {
			t.Fatalf("%s: ledger %d + %d applied, %d held", id, snap, applied, held)
		}
	}
}

// The site label is part of what a hello's signature covers, and only a
// hello carries one.
func TestSiteIsSignedAndOnlyInHellos(t *testing.T) {
	ids := []string{"a/1", "b/1"}
	n := newPnet(t, ids, 4)
	hello := Announcement{Kind: KindHello, Member: "b/1", Seq: 9, Site: "west"}
	signed := n.sign(hello, "b/1")
	a, err := DecodeAnnouncement(signed)
	if err != nil || a.Site != "west" {
		t.Fatalf("decoded %+v, %v", a, err)
	}
	a.Site = "east"
	n.nodes["a/1"].Receive("b/1", EncodeAnnouncement(a))
	if got := n.nodes["a/1"].Stats().Rejected[RejectForgedAnnouncement]; got != 1 || n.nodes["a/1"].Sites()["b/1"] != "" {
		t.Fatalf("a relabelled hello: %d forged, site %q", got, n.nodes["a/1"].Sites()["b/1"])
	}
	n.nodes["a/1"].Receive("b/1", signed)
	if got := n.nodes["a/1"].Sites()["b/1"]; got != "west" {
		t.Fatalf("site of b/1 is %q after its hello, want west", got)
	}
	for name, bad := range map[string]Announcement{
		"a leave with a site": {Kind: KindLeave, Member: "b/1", Signer: "b/1", Site: "west"},
		"a control byte":      {Kind: KindHello, Member: "b/1", Signer: "b/1", Site: "we\x01st"},
		"an oversized label":  {Kind: KindHello, Member: "b/1", Signer: "b/1", Site: strings.Repeat("s", MaxSiteBytes+1)},
	} {
		if _, err := DecodeAnnouncement(EncodeAnnouncement(bad)); err == nil {
			t.Errorf("%s decoded", name)
		}
	}
}

// Members that disagree about the overlay (each relays along its own,
// site-aware or flat, from labels of its own) still apply every update
// exactly once and end with the same view: receivers drop the duplicates
// the disagreement causes, and retransmission pulls what it withholds.
func TestDisagreeingOverlaysNeitherDuplicateNorLoseUpdates(t *testing.T) {
	ids := make([]string, 9)
	for i := range ids {
		ids[i] = fmt.Sprintf("m%d/1", i)
	}
	rng := rand.New(rand.NewPCG(15, 3))
	for _, agree := range []bool{true, false} {
		n := newSitePnet(t, ids, 10, nil)
		shared := map[string]string{}
		for i, id := range ids {
			shared[id] = fmt.Sprint(i % 3)
		}
		for _, id := range ids {
			labels := shared
			if !agree {
				labels = map[string]string{}
				for _, m := range ids {
					labels[m] = fmt.Sprint(rng.IntN(3))
				}
				if rng.IntN(4) == 0 {
					labels = nil // this one relays along the flat overlay
				}
			}
			n.nodes[id].SetRouter(halton.BuildSites(ids, labels))
		}
		n.runUntilDone(600)
		n.checkSameViews()
		var duplicates uint64
		for _, id := range ids {
			s := n.nodes[id]
			snap, applied, held := s.Ledger()
			if snap+applied != held || applied != uint64(len(ids))*10 {
				t.Fatalf("agree=%v: %s ledger %d + %d applied, %d held", agree, id, snap, applied, held)
			}
			duplicates += s.Stats().Rejected[RejectDuplicate]
		}
		if agree != (duplicates == 0) {
			t.Fatalf("agree=%v: %d duplicates dropped", agree, duplicates)
		}
	}
}

// A core builds its overlay when it routes, not on each change of
// membership it hears: a mesh starting hears P - 1 first hellos, each a
// change of labels. What it routes along is still the overlay over the
// live set and the labels it holds at that moment.
func TestOverlayIsBuiltWhenRoutedOver(t *testing.T) {
	ids := make([]string, 8)
	for i := range ids {
		ids[i] = fmt.Sprintf("m%d/1", i)
	}
	builds := map[string]int{}
	n := newSitePnet(t, ids, 6, func(live []string, site map[string]string) Router {
		return halton.BuildSites(live, site)
	})
	for i, id := range ids {
		if err := n.nodes[id].SetSite(fmt.Sprint(i % 2)); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range ids {
		s := n.nodes[id]
		s.SetOverlay(func(live []string, site map[string]string) Router {
			builds[s.ID()]++
			return halton.BuildSites(live, site)
		})
		if builds[id] != 0 {
			t.Fatalf("%s built its overlay %d times before routing", id, builds[id])
		}
	}
	// Every member hears the others' first hellos in the first rounds:
	// seven changes of labels each, and one route per node per round.
	for range 3 {
		n.round()
	}
	for _, id := range ids {
		// Built on each change, it would be 1 + 7 builds.
		if builds[id] == 0 || builds[id] >= len(ids) {
			t.Fatalf("%s built its overlay %d times in 3 rounds, want 1 to %d", id, builds[id], len(ids)-1)
		}
	}
	n.round()
	for _, id := range ids {
		s := n.nodes[id]
		got, want := s.currentRouter(), halton.BuildSites(slices.DeleteFunc(s.Live(), s.Leaving), s.Sites())
		if got.(*halton.SiteOverlay).Sites() != 2 {
			t.Fatalf("%s relays along %d sites", id, got.(*halton.SiteOverlay).Sites())
		}
		for _, origin := range ids {
			if !slices.Equal(got.Forward(origin, id), want.Forward(origin, id)) {
				t.Fatalf("%s relays %s's updates to %v, the overlay over what it holds to %v", id, origin, got.Forward(origin, id), want.Forward(origin, id))
			}
		}
	}
	n.runUntilDone(400)
	n.checkSameViews()
}
