package halton

import (
	"encoding/json"
	"slices"
	"testing"
)

// TestReportMatchesOverlay recomputes every field from the public API.
func TestReportMatchesOverlay(t *testing.T) {
	for _, p := range []int{0, 1, 2, 3, 8, 100, 300} {
		r := Analyze(p, 0)
		o := Build(nodes(p))
		edges, outMax, inMax, links := 0, 0, 0, 0
		for _, v := range o.Members() {
			out, in := o.Out(v), o.In(v)
			edges += len(out)
			outMax, inMax = max(outMax, len(out)), max(inMax, len(in))
			links += len(out)
			for _, w := range in {
				if !slices.Contains(out, w) {
					links++
				}
			}
		}
		perNode := func(x int) float64 {
			if p == 0 {
				return 0
			}
			return float64(x) / float64(p)
		}
		want := Report{
			Nodes:                        p,
			Construction:                 "halton",
			Edges:                        edges,
			OutDegreeMax:                 outMax,
			OutDegreeMean:                perNode(edges),
			InDegreeMax:                  inMax,
			Diameter:                     o.Diameter(),
			DiameterBound:                DiameterBound(p),
			MeanHops:                     o.MeanHops(),
			Connected:                    true,
			UpdateDeliveriesPerIteration: p * (p - 1),
			MessagesPerIteration:         r.MessagesPerIteration, // checked against a simulation in TestBroadcastReachesEveryMemberOnce
			FullMeshMessagesPerIteration: p * (p - 1),
			LinksPerNode:                 perNode(links),
			FullMeshLinksPerNode:         max(p-1, 0),
			EdgesChangedJoin:             EdgesChanged(o, Build(nodes(p+1))),
			EdgesChangedLeave:            r.EdgesChangedLeave,
		}
		if r != want {
			t.Errorf("Analyze(%d, 0) =\n%+v, want\n%+v", p, r, want)
		}
		if p > 0 { // the leave must be one of the p possible leaves
			var leaves []int
			for k := range p {
				rest := append(nodes(p)[:k:k], nodes(p)[k+1:]...)
				leaves = append(leaves, EdgesChanged(o, Build(rest)))
			}
			if !slices.Contains(leaves, r.EdgesChangedLeave) {
				t.Errorf("Analyze(%d, 0): %d edges changed by a leave; a leave changes one of %v", p, r.EdgesChangedLeave, leaves)
			}
		}
		if p >= 8 && (r.MessagesPerIteration >= r.FullMeshMessagesPerIteration || r.MessagesPerIteration < r.Edges) {
			t.Errorf("P=%d: %d messages, want within [edges %d, full mesh %d)", p, r.MessagesPerIteration, r.Edges, r.FullMeshMessagesPerIteration)
		}
	}
}

func TestAnalyzeSeedNamesMembers(t *testing.T) {
	r := Analyze(40, 7)
	ids := series("s7-node-%d", 40)
	o := Build(ids)
	if r.Edges != o.Report().Edges || r.MessagesPerIteration != o.Report().MessagesPerIteration {
		t.Fatalf("Analyze(40, 7) does not describe the members s7-node-0 … s7-node-39")
	}
	if got := EdgesChanged(o, Build(append(ids, "s7-node-40"))); got != r.EdgesChangedJoin {
		t.Fatalf("join of s7-node-40 changes %d edges, Analyze says %d", got, r.EdgesChangedJoin)
	}
	if again := Analyze(40, 7); again != r {
		t.Fatalf("Analyze is not deterministic: %+v then %+v", r, again)
	}
}

func TestReportJSONFieldNames(t *testing.T) {
	b, err := json.Marshal(Analyze(32, 0))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{
		"nodes", "out_degree_max", "out_degree_mean", "diameter", "mean_hops", "connected",
		"messages_per_iteration", "full_mesh_messages_per_iteration", "edges_changed_join", "edges_changed_leave",
		"update_deliveries_per_iteration", "links_per_node", "full_mesh_links_per_node",
	} {
		if _, ok := m[k]; !ok {
			t.Errorf("JSON report lacks %q: %s", k, b)
		}
	}
	if m["nodes"] != 32.0 || m["full_mesh_messages_per_iteration"] != float64(32*31) {
		t.Errorf("JSON report: %s", b)
	}
}

// Every peer must derive the same overlay, so the link choice is part of
// the protocol: these figures change only together with hashDomain.
func TestAnalyzeGolden(t *testing.T) {
	want := Report{
		Nodes: 16, Construction: "halton", Edges: 72, OutDegreeMax: 5, OutDegreeMean: 4.5, InDegreeMax: 7,
		Diameter: 3, DiameterBound: 5, MeanHops: 431.0 / 240, Connected: true,
		UpdateDeliveriesPerIteration: 240, MessagesPerIteration: 148, FullMeshMessagesPerIteration: 240,
		LinksPerNode: 8, FullMeshLinksPerNode: 15, EdgesChangedJoin: 15, EdgesChangedLeave: 16,
	}
	if got := Analyze(16, 0); got != want {
		t.Errorf("Analyze(16, 0) =\n%+v, want\n%+v", got, want)
	}
}
