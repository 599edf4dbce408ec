package cmd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/sketchmesh/sketchmesh/halton"
)

func runTopology(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("topology", "topology [flags]", "Builds the Halton overlay for P members and measures it against a full mesh.", stderr)
	nodes := fs.Int("nodes", 64, "number of members P (1-65536)")
	seed := fs.Int64("seed", 1, "seed of the synthetic member ids and of the joining and leaving member")
	sites := fs.Int("sites", 1, "spread the members round robin over this many sites and build the site-aware overlay (1 = the flat overlay; it is also flat past ⌈log2 P⌉+1 sites)")
	asJSON := fs.Bool("json", false, "print one JSON report on stdout instead of the table")
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	if *nodes < 1 || *nodes > 1<<16 {
		return badInput("--nodes %d: want 1 to 65536", *nodes)
	}
	if *sites < 1 || *sites > *nodes {
		return badInput("--sites %d: want 1 to --nodes (%d)", *sites, *nodes)
	}
	r := halton.Analyze(*nodes, *seed)
	var flat halton.Report
	if *sites > 1 {
		r, flat = halton.AnalyzeSites(*nodes, *seed, *sites)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if *sites > 1 {
			return enc.Encode(struct {
				Sites halton.Report `json:"sites"`
				Flat  halton.Report `json:"flat"`
			}{r, flat})
		}
		return enc.Encode(r)
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "members\t%d\t\n", r.Nodes)
	fmt.Fprintf(tw, "construction\t%s\t\n", r.Construction)
	if r.Sites > 1 {
		fmt.Fprintf(tw, "sites\t%d\t\n", r.Sites)
	}
	fmt.Fprintf(tw, "connected\t%v\t\n", r.Connected)
	fmt.Fprintf(tw, "out-degree max / mean\t%d / %.2f\t(bound ⌈log2 P⌉+1)\n", r.OutDegreeMax, r.OutDegreeMean)
	fmt.Fprintf(tw, "diameter\t%d hops\t(bound %d)\n", r.Diameter, r.DiameterBound)
	fmt.Fprintf(tw, "mean hops\t%.2f\t\n", r.MeanHops)
	fmt.Fprintf(tw, "links per node\t%.2f\t(full mesh %d)\n", r.LinksPerNode, r.FullMeshLinksPerNode)
	fmt.Fprintf(tw, "messages per iteration\t%d\t(full mesh %d)\n", r.MessagesPerIteration, r.FullMeshMessagesPerIteration)
	if *sites == 1 {
		fmt.Fprintf(tw, "edges changed by a join / leave\t%d / %d\t\n", r.EdgesChangedJoin, r.EdgesChangedLeave)
	} else {
		fmt.Fprintf(tw, "inter-site links per update\t%.2f\t(flat overlay %.2f)\n", r.InterSiteLinksPerUpdate, flat.InterSiteLinksPerUpdate)
		fmt.Fprintf(tw, "inter-site links on the worst path\t%d\t(flat overlay %d)\n", r.InterSiteHopsMax, flat.InterSiteHopsMax)
		fmt.Fprintf(tw, "flat overlay: diameter / mean hops\t%d / %.2f\t\n", flat.Diameter, flat.MeanHops)
		fmt.Fprintf(tw, "flat overlay: messages per iteration\t%d\t\n", flat.MessagesPerIteration)
	}
	return tw.Flush()
}
