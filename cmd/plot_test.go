package cmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sketchmesh/sketchmesh/testnet"
)

// The curves start at iteration 0, the axes leave a margin around them and
// keep room right of them for the legend.
func TestLossPlotRanges(t *testing.T) {
	run := func(label string, losses ...float64) sweepRun {
		r := &testnet.Report{}
		for i, l := range losses {
			r.Curve = append(r.Curve, testnet.CurvePoint{Iteration: uint64(10 * i), WallSeconds: float64(i), TestLoss: l, BytesSent: uint64(i) << 20})
		}
		return sweepRun{Label: label, Report: r}
	}
	runs := []sweepRun{run("raw", 0.69, 0.5, 0.4, 0.35), run("sketchml", 0.69, 0.55, 0.45, 0.3)}
	p, err := lossPlot(plotAxis{"wall time (s)", func(c testnet.CurvePoint) float64 { return c.WallSeconds }}, "codec", runs)
	if err != nil {
		t.Fatal(err)
	}
	if !(p.X.Min < 0 && p.X.Max >= 1.3*3) {
		t.Errorf("X axis %v..%v: no room right of the curves (which end at 3) for the legend", p.X.Min, p.X.Max)
	}
	if !(p.Y.Min < 0.3 && p.Y.Max > 0.69) {
		t.Errorf("Y axis %v..%v: the curves (0.3..0.69) touch the frame", p.Y.Min, p.Y.Max)
	}
}

// A codec comparison draws loss against time and against bytes, and its
// header on stderr names every codec.
func TestCompareNamesEveryRunAndPlotsBytes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cmp.svg")
	code, _, errOut := runMain("testnet", "--nodes", "2", "--iterations", "20", "--compare", "raw,uniform8", "--plot", path)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	header, _, _ := strings.Cut(errOut, "\n")
	if !strings.Contains(header, "runs raw,uniform8") {
		t.Errorf("header names one codec: %s", header)
	}
	if strings.Count(errOut, "\niter ") < 2*20 {
		t.Errorf("fewer than 20 progress points per run:\n%s", errOut)
	}
	svg, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"wall time (s)", "bytes sent by all nodes (MiB)", ">raw<", ">uniform8<"} {
		if !strings.Contains(string(svg), want) {
			t.Errorf("the plot lacks %q", want)
		}
	}
}
