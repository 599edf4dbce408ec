package cmd

import (
	"context"
	"encoding/json"
	"fmt"
	"image/color"
	"io"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/sketchmesh/sketchmesh/testnet"
)

// sweepRun is one configuration of a sweep and its report.
type sweepRun struct {
	Label  string          `json:"label"`
	Report *testnet.Report `json:"report"`
	// Iterations and seconds until node 0's test loss first reached the
	// target; absent when it never did.
	IterationsToTarget *uint64  `json:"iterations_to_target,omitempty"`
	SecondsToTarget    *float64 `json:"seconds_to_target,omitempty"`
}

// sweepReport is the JSON of a sweep: the same testnet run once per value.
type sweepReport struct {
	Parameter  string     `json:"parameter"`
	TargetLoss float64    `json:"target_loss"`
	Runs       []sweepRun `json:"runs"`
}

// parseList splits a comma-separated flag value.
func parseList(flagName, v string) ([]string, error) {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return nil, badInput("--%s %q: want a comma-separated list", flagName, v)
	}
	return out, nil
}

func parseStalenessList(v string) ([]int, error) {
	items, err := parseList("sweep-staleness", v)
	if err != nil {
		return nil, err
	}
	out := make([]int, len(items))
	for i, s := range items {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return nil, badInput("--sweep-staleness: %q is not a staleness >= 0", s)
		}
		out[i] = n
	}
	return out, nil
}

// runSweep runs cfg once per variant, prints progress per run on stderr and a
// side-by-side table (or the JSON) on stdout, and draws the loss curves.
func runSweep(ctx context.Context, base testnet.Config, param string, labels []string, apply func(*testnet.Config, int),
	targetLoss float64, plotPath string, asJSON bool, stdout, stderr io.Writer) error {
	rep := sweepReport{Parameter: param}
	for i, label := range labels {
		cfg := base
		apply(&cfg, i)
		fmt.Fprintf(stderr, "== %s %s\n", param, label)
		cfg.Progress = func(p testnet.Progress) { printProgress(stderr, cfg.Iterations, p) }
		r, err := testnet.Run(ctx, cfg)
		if err != nil {
			return fmt.Errorf("%s %s: %w", param, label, err)
		}
		rep.Runs = append(rep.Runs, sweepRun{Label: label, Report: r})
	}
	rep.TargetLoss = targetLoss
	if rep.TargetLoss <= 0 {
		// By default the target is just above the first run's final loss, so
		// every run is measured against the baseline it is compared to.
		rep.TargetLoss = 1.01 * rep.Runs[0].Report.FinalTestLoss
	}
	for i := range rep.Runs {
		run := &rep.Runs[i]
		for _, p := range run.Report.Curve {
			if p.TestLoss <= rep.TargetLoss {
				it, sec := p.Iteration, p.WallSeconds
				run.IterationsToTarget, run.SecondsToTarget = &it, &sec
				break
			}
		}
	}
	if plotPath != "" {
		if err := plotCurves(plotPath, param, rep.Runs); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "wrote %s\n", plotPath)
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	printSweep(stdout, rep)
	return nil
}

func printSweep(w io.Writer, rep sweepReport) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%s\ttest acc\ttest loss\tsent/node/iter\tratio\titer/s\twall\tblocked/node\tmax stale\titers to loss %.4f\ttime to loss\t\n", rep.Parameter, rep.TargetLoss)
	for _, run := range rep.Runs {
		r := run.Report
		toIt, toSec := "never", "never"
		if run.IterationsToTarget != nil {
			toIt = strconv.FormatUint(*run.IterationsToTarget, 10)
			toSec = fmt.Sprintf("%.2fs", *run.SecondsToTarget)
		}
		fmt.Fprintf(tw, "%s\t%s\t%.4f\t%s\t%.2f\t%.1f\t%.2fs\t%.2fs\t%d\t%s\t%s\t\n",
			run.Label, pct(r.FinalTestAccuracy), r.FinalTestLoss, humanBytes(r.BytesSentPerNodePerIteration),
			r.CompressionRatio, r.IterationsPerSecond, r.WallSeconds, r.BlockedSecondsPerNode, r.StalenessObservedMax, toIt, toSec)
	}
	_ = tw.Flush()
}

// plotCurves draws node 0's test loss against wall time, one line per run,
// as SVG, PNG or PDF by the file's extension.
func plotCurves(path, param string, runs []sweepRun) error {
	ext := strings.ToLower(filepath.Ext(path))
	switch ext {
	case ".svg", ".png", ".pdf":
	default:
		return badInput("--plot %q: want a .svg, .png or .pdf file", path)
	}
	p := plot.New()
	p.Title.Text = "test loss against wall time"
	p.X.Label.Text = "wall time (s)"
	p.Y.Label.Text = "test loss"
	p.Legend.Top = true
	for i, run := range runs {
		pts := make(plotter.XYs, 0, len(run.Report.Curve))
		for _, c := range run.Report.Curve {
			if !math.IsNaN(c.TestLoss) {
				pts = append(pts, plotter.XY{X: c.WallSeconds, Y: c.TestLoss})
			}
		}
		line, err := plotter.NewLine(pts)
		if err != nil {
			return fmt.Errorf("plot %s %s: %w", param, run.Label, err)
		}
		line.Color = plotutil.Color(i)
		if line.Color == nil {
			line.Color = color.Black
		}
		line.Width = vg.Points(1.5)
		p.Add(line)
		p.Legend.Add(param+" "+run.Label, line)
	}
	if err := p.Save(16*vg.Centimeter, 10*vg.Centimeter, path); err != nil {
		return fmt.Errorf("write plot %s: %w", path, err)
	}
	return nil
}
