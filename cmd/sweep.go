package cmd

import (
	"context"
	"encoding/json"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgpdf"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/sketchmesh/sketchmesh/testnet"
)

// sweepRun is one configuration of a sweep and its report.
type sweepRun struct {
	Label  string          `json:"label"`
	Report *testnet.Report `json:"report"`
	// Iterations (optimizer steps), seconds and bytes sent by all nodes
	// until node 0's test loss first reached the target; absent when it
	// never did.
	IterationsToTarget *uint64  `json:"iterations_to_target,omitempty"`
	SecondsToTarget    *float64 `json:"seconds_to_target,omitempty"`
	BytesToTarget      *uint64  `json:"bytes_to_target,omitempty"`
}

// compareParam is the sweep parameter of --compare: each run is an item
// as written.
const compareParam = "run"

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
				it, sec, b := p.Iteration, p.WallSeconds, p.BytesSent
				run.IterationsToTarget, run.SecondsToTarget, run.BytesToTarget = &it, &sec, &b
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
	fmt.Fprintf(tw, "%s\ttest acc\ttest loss\tsent/node/iter\tratio\titer/s\twall\tblocked/node\tmax stale\titers to loss %.4f\ttime to loss\tbytes to loss\t\n", rep.Parameter, rep.TargetLoss)
	for _, run := range rep.Runs {
		r := run.Report
		toIt, toSec, toBytes := "never", "never", "never"
		if run.IterationsToTarget != nil {
			toIt = strconv.FormatUint(*run.IterationsToTarget, 10)
			toSec = fmt.Sprintf("%.2fs", *run.SecondsToTarget)
			toBytes = humanBytes(float64(*run.BytesToTarget))
		}
		fmt.Fprintf(tw, "%s\t%s\t%.4f\t%s\t%.2f\t%.1f\t%.2fs\t%.2fs\t%d\t%s\t%s\t%s\t\n",
			run.Label, pct(r.FinalTestAccuracy), r.FinalTestLoss, humanBytes(r.BytesSentPerNodePerIteration),
			r.CompressionRatio, r.IterationsPerSecond, r.WallSeconds, r.BlockedSecondsPerNode, r.StalenessObservedMax, toIt, toSec, toBytes)
	}
	_ = tw.Flush()
}

// plotAxis is what a panel of the plot puts on its X axis.
type plotAxis struct {
	label string
	value func(testnet.CurvePoint) float64
}

// plotCurves draws node 0's test loss against wall time, one line per run,
// as SVG, PNG or PDF by the file's extension; a codec comparison adds a
// second panel, test loss against the bytes the mesh sent.
func plotCurves(path, param string, runs []sweepRun) error {
	ext := strings.ToLower(filepath.Ext(path))
	switch ext {
	case ".svg", ".png", ".pdf":
	default:
		return badInput("--plot %q: want a .svg, .png or .pdf file", path)
	}
	axes := []plotAxis{{"wall time (s)", func(c testnet.CurvePoint) float64 { return c.WallSeconds }}}
	if param != "staleness" {
		axes = append(axes, plotAxis{"bytes sent by all nodes (MiB)", func(c testnet.CurvePoint) float64 { return float64(c.BytesSent) / (1 << 20) }})
	}
	plots := make([]*plot.Plot, len(axes))
	for i, ax := range axes {
		p, err := lossPlot(ax, param, runs)
		if err != nil {
			return err
		}
		plots[i] = p
	}
	width, height := vg.Length(len(plots))*16*vg.Centimeter, 10*vg.Centimeter
	var canvas interface {
		vg.CanvasSizer
		io.WriterTo
	}
	switch ext {
	case ".svg":
		canvas = vgsvg.New(width, height)
	case ".pdf":
		canvas = vgpdf.New(width, height)
	default:
		canvas = vgimg.PngCanvas{Canvas: vgimg.New(width, height)}
	}
	tiles := draw.Tiles{Rows: 1, Cols: len(plots), PadX: vg.Centimeter, PadTop: 2 * vg.Millimeter, PadBottom: 2 * vg.Millimeter,
		PadLeft: 2 * vg.Millimeter, PadRight: 2 * vg.Millimeter}
	cells := plot.Align([][]*plot.Plot{plots}, tiles, draw.New(canvas))
	for i, p := range plots {
		p.Draw(cells[0][i])
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("write plot: %w", err)
	}
	if _, err := canvas.WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("write plot %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write plot %s: %w", path, err)
	}
	return nil
}

// lossPlot draws test loss against ax, one line with its points per run.
// The curves start at iteration 0; the axes leave a margin around them,
// and the X axis keeps a third more room on the right, where the legend
// goes, so that it never covers a curve.
func lossPlot(ax plotAxis, param string, runs []sweepRun) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "test loss against " + strings.SplitN(ax.label, " (", 2)[0]
	p.X.Label.Text = ax.label
	p.Y.Label.Text = "test loss"
	p.Legend.Top = true
	xMax, yMin, yMax := 0.0, math.Inf(1), math.Inf(-1)
	for i, run := range runs {
		pts := make(plotter.XYs, 0, len(run.Report.Curve))
		for _, c := range run.Report.Curve {
			if !math.IsNaN(c.TestLoss) && !math.IsInf(c.TestLoss, 0) {
				pts = append(pts, plotter.XY{X: ax.value(c), Y: c.TestLoss})
				xMax, yMin, yMax = max(xMax, ax.value(c)), min(yMin, c.TestLoss), max(yMax, c.TestLoss)
			}
		}
		line, points, err := plotter.NewLinePoints(pts)
		if err != nil {
			return nil, fmt.Errorf("plot %s %s: %w", param, run.Label, err)
		}
		line.Color = plotutil.Color(i)
		if line.Color == nil {
			line.Color = color.Black
		}
		line.Width = vg.Points(1.5)
		points.Color, points.Shape, points.Radius = line.Color, plotutil.Shape(i), vg.Points(2)
		p.Add(line, points)
		name := param + " " + run.Label
		if param == compareParam {
			name = run.Label
		}
		p.Legend.Add(name, line, points)
	}
	if math.IsInf(yMin, 0) {
		return nil, badInput("--plot: no finite test loss to draw")
	}
	xMax = max(xMax, 1e-9)
	margin := max(0.05*(yMax-yMin), 1e-3*math.Abs(yMax), 1e-9)
	p.X.Min, p.X.Max = -0.02*xMax, 1.35*xMax
	p.Y.Min, p.Y.Max = yMin-margin, yMax+margin
	return p, nil
}
