package mesh

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// The Grafana dashboard queries only metrics a node exports, under their
// exact names, and the README describes each of its panels.
func TestGrafanaDashboardMatchesMetrics(t *testing.T) {
	data, err := os.ReadFile("../docs/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Title  string `json:"title"`
		Panels []struct {
			Title       string `json:"title"`
			Description string `json:"description"`
			Targets     []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("docs/grafana-dashboard.json: %v", err)
	}
	exported := map[string]bool{}
	descs := make(chan *prometheus.Desc, 64)
	NewMetrics().Describe(descs)
	close(descs)
	fqName := regexp.MustCompile(`fqName: "([a-z_]+)"`)
	for d := range descs {
		exported[fqName.FindStringSubmatch(d.String())[1]] = true
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	name := regexp.MustCompile(`sketchmesh_[a-z_]+`)
	used := map[string]bool{}
	if len(dash.Panels) == 0 {
		t.Fatal("the dashboard has no panels")
	}
	for _, p := range dash.Panels {
		if p.Title == "" || p.Description == "" || len(p.Targets) == 0 {
			t.Errorf("panel %q: a title, a description and a query are needed", p.Title)
		}
		if !strings.Contains(string(readme), "**"+p.Title+"**") {
			t.Errorf("panel %q is not described in the README (as **%s**)", p.Title, p.Title)
		}
		for _, q := range p.Targets {
			names := name.FindAllString(q.Expr, -1)
			if len(names) == 0 {
				t.Errorf("panel %q: query %q names no sketchmesh metric", p.Title, q.Expr)
			}
			for _, n := range names {
				used[n] = true
				if !exported[n] {
					t.Errorf("panel %q queries %s, which no node exports", p.Title, n)
				}
			}
		}
	}
	for _, want := range []string{"sketchmesh_clock", "sketchmesh_staleness", "sketchmesh_blocked_seconds_total", "sketchmesh_bytes_total",
		"sketchmesh_compression_ratio", "sketchmesh_frames_rejected_total", "sketchmesh_members_by_state", "sketchmesh_connections",
		"sketchmesh_test_loss", "sketchmesh_test_accuracy"} {
		if !used[want] {
			t.Errorf("no panel shows %s", want)
		}
	}
}
