package cmd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sketchmesh/sketchmesh/codec"
	"github.com/sketchmesh/sketchmesh/dataset"
	"github.com/sketchmesh/sketchmesh/model"
	"github.com/sketchmesh/sketchmesh/node"
	"github.com/sketchmesh/sketchmesh/sfb"
)

// benchPoint is one gradient the codecs are measured on.
type benchPoint struct {
	Label string `json:"label"`
	Pairs int    `json:"pairs"`
}

// codecResult aggregates one codec over every gradient: byte counts and
// flips are sums, ratios are over the sums, the error is the mean.
type codecResult struct {
	Name          string  `json:"name"`
	Pairs         int     `json:"pairs"`
	Bytes         int     `json:"bytes"`
	RatioVs12B    float64 `json:"ratio_vs_12b"`
	RatioVs8B     float64 `json:"ratio_vs_8b"`
	BytesPerKey   float64 `json:"bytes_per_key"`
	RelL2Error    float64 `json:"rel_l2_error"`
	SignFlips     int     `json:"sign_flips"`
	Overestimates int     `json:"overestimates"`
	// EncodeMPairsS and DecodeMPairsS are millions of pairs per CPU-second
	// of one encode or decode on one core, as timeCodec takes it.
	EncodeMPairsS  float64 `json:"encode_mpairs_per_cpu_s"`
	DecodeMPairsS  float64 `json:"decode_mpairs_per_cpu_s"`
	FactorBytes    int     `json:"factor_bytes,omitempty"`
	FactorsSmaller int     `json:"factors_smaller,omitempty"`
	// PerPoint has the measurement of each gradient.
	PerPoint []codec.Measurement `json:"per_point"`
	// perPointDecode is each gradient's decode rate, Mpairs per CPU-second.
	perPointDecode []float64
}

// benchRow is one codec on one gradient, as --rows prints it.
type benchRow struct {
	Dataset       string  `json:"dataset"`
	Model         string  `json:"model"`
	Point         string  `json:"point"`
	Codec         string  `json:"codec"`
	Pairs         int     `json:"pairs"`
	Bytes         int     `json:"bytes"`
	RatioVs12B    float64 `json:"ratio_vs_12b"`
	RelL2Error    float64 `json:"rel_l2_error"`
	SignFlips     int     `json:"sign_flips"`
	DecodeMPairsS float64 `json:"decode_mpairs_per_cpu_s"`
}

type codecBenchReport struct {
	Dataset string        `json:"dataset"`
	Model   string        `json:"model"`
	Batch   int           `json:"batch_rows"`
	Points  []benchPoint  `json:"points"`
	Codecs  []codecResult `json:"codecs"`
}

func runCodecBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("codec-bench", "codec-bench [flags]", "Measures every codec on real mini-batch gradients, taken at the first iteration and after 1, 5 and 20 epochs of single-node training.", stderr)
	data := fs.String("data", "rcv1", "training data: a built-in set ("+strings.Join(dataset.BuiltinNames(), ", ")+") or a LIBSVM file (plain or .gz); with --rows, a comma-separated list of them")
	modelName := fs.String("model", "lr", "model whose gradients are measured: "+modelNames(false)+" (softmax also measures sufficient factor frames)")
	batch := fs.Float64("batch", 0.1, "mini-batch: a fraction of the data when below 1, else a row count")
	codecs := fs.String("codecs", strings.Join(codec.Names(), ","), "codecs to measure, comma-separated; each a name with optional sketchml options, e.g. sketchml:layout=width (see codec.ParseSpec)")
	seed := fs.Uint64("seed", 1, "seed of the mini-batch sampling")
	asJSON := fs.Bool("json", false, "print one JSON report on stdout instead of the table")
	asRows := fs.Bool("rows", false, "print one JSON object per line for each codec on each gradient (dataset, point, codec, bytes, ratio, error, decode Mpairs per CPU-second) instead of the table")
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	if err := oneOf("model", *modelName, model.KindNames()...); err != nil {
		return err
	}
	names, err := parseList("codecs", *codecs)
	if err != nil {
		return err
	}
	var cdcs []namedCodec
	for _, n := range names {
		c, err := codec.ParseSpec(n)
		if err != nil {
			return usageError{fmt.Errorf("--codecs: %w", err)}
		}
		cdcs = append(cdcs, namedCodec{n, c})
	}
	if err := node.CheckBatch(*batch); err != nil {
		return settingError(err)
	}
	if *asRows {
		sets, err := parseList("data", *data)
		if err != nil {
			return err
		}
		enc := json.NewEncoder(stdout)
		for _, set := range sets {
			rep, err := benchDataset(ctx, set, *modelName, *batch, *seed, cdcs, stderr)
			if err != nil {
				return err
			}
			for _, c := range rep.Codecs {
				for i, m := range c.PerPoint {
					row := benchRow{Dataset: rep.Dataset, Model: rep.Model, Point: rep.Points[i].Label, Codec: c.Name, Pairs: m.Pairs,
						Bytes: m.Bytes, RatioVs12B: m.RatioVs12B, RelL2Error: m.RelL2Error, SignFlips: m.SignFlips, DecodeMPairsS: c.perPointDecode[i]}
					if err := enc.Encode(row); err != nil {
						return err
					}
				}
			}
		}
		return nil
	}
	rep, err := benchDataset(ctx, *data, *modelName, *batch, *seed, cdcs, stderr)
	if err != nil {
		return err
	}
	points := rep.Points
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "codec\tbytes\tratio vs 12B\tratio vs 8B\tbytes/key\trel L2 error\tsign flips\toverestimates\tencode Mpairs/cpu-s\tdecode Mpairs/cpu-s\t")
	for _, r := range rep.Codecs {
		fmt.Fprintf(tw, "%s\t%d\t%.2f\t%.2f\t%.3f\t%.4f\t%d\t%d\t%.1f\t%.1f\t\n", r.Name, r.Bytes, r.RatioVs12B, r.RatioVs8B, r.BytesPerKey, r.RelL2Error, r.SignFlips, r.Overestimates, r.EncodeMPairsS, r.DecodeMPairsS)
	}
	_ = tw.Flush()
	if *modelName == "softmax" {
		fmt.Fprintln(stdout, "\nsufficient factors (plain-SGD update of the same batches) against the matrix delta:")
		for _, r := range rep.Codecs {
			fmt.Fprintf(stdout, "  %-10s factors %d bytes, delta %d bytes; factors smaller at %d of %d points\n", r.Name, r.FactorBytes, r.Bytes, r.FactorsSmaller, len(points))
		}
	}
	fmt.Fprintf(stdout, "\n%d gradients (%s), %d pairs in all, from %s\n", len(points), pointLabels(points), rep.Codecs[0].Pairs, rep.Dataset)
	return nil
}

// benchDataset measures every codec on the gradients of one data set.
func benchDataset(ctx context.Context, data, modelName string, batch float64, seed uint64, cdcs []namedCodec, stderr io.Writer) (codecBenchReport, error) {
	train, err := dataset.Load(data)
	if err != nil {
		return codecBenchReport{}, usageError{fmt.Errorf("--data: %w", err)}
	}
	mdl, err := model.NewModel(model.Kind(modelName), 0, train)
	if err != nil {
		return codecBenchReport{}, usageError{err}
	}
	rows := node.BatchRows(batch, len(train.Rows))
	fmt.Fprintf(stderr, "codec-bench: %s gradients on %s (%d rows, %d features), %d rows a batch\n", modelName, train.Name, len(train.Rows), train.MaxFeature, rows)

	points, grads, factors, err := benchGradients(ctx, mdl, train, rows, seed)
	if err != nil {
		return codecBenchReport{}, err
	}
	rep := codecBenchReport{Dataset: train.Name, Model: modelName, Batch: rows, Points: points}
	for _, c := range cdcs {
		res, err := measureCodec(c.name, c.codec, grads, factors)
		if err != nil {
			return codecBenchReport{}, err
		}
		rep.Codecs = append(rep.Codecs, res)
	}
	return rep, nil
}

func pointLabels(ps []benchPoint) string {
	labels := make([]string, len(ps))
	for i, p := range ps {
		labels[i] = p.Label
	}
	return strings.Join(labels, ", ")
}

// benchGradients trains one node with plain SGD over all the data and takes
// the mini-batch gradient at the first iteration and after 1, 5 and 20
// epochs; for softmax it also returns each gradient's sufficient factors.
func benchGradients(ctx context.Context, mdl *model.Model, train *dataset.Dataset, rows int, seed uint64) ([]benchPoint, []codec.Sparse, []*sfb.Factors, error) {
	opt, err := model.NewOptimizer(model.Adam, 0.01, mdl.NumParams())
	if err != nil {
		return nil, nil, nil, err
	}
	core, err := node.New(node.Config{ID: "bench", Members: []string{"bench"}, Model: mdl, Optimizer: opt, Codec: codec.Raw{},
		Iterations: math.MaxUint64, BatchSize: rows, Seed: seed, Shard: train.Rows})
	if err != nil {
		return nil, nil, nil, err
	}
	perEpoch := uint64(max(1, len(train.Rows)/rows))
	var points []benchPoint
	var grads []codec.Sparse
	var factors []*sfb.Factors
	var scratch model.Scratch
	shuffled := train.Shuffled(int64(seed))
	for i, epochs := range []uint64{0, 1, 5, 20} {
		for core.Clock() < epochs*perEpoch {
			if err := ctx.Err(); err != nil {
				return nil, nil, nil, err
			}
			if err := core.Train(); err != nil {
				return nil, nil, nil, err
			}
		}
		batch := shuffled.Rows[(i*rows)%len(shuffled.Rows):]
		batch = batch[:min(rows, len(batch))]
		g, _ := mdl.Gradient(core.View(), batch, &scratch)
		u := codec.Sparse{Keys: append([]uint64{}, g.Keys...), Values: make([]float32, len(g.Values))}
		for j, v := range g.Values {
			u.Values[j] = float32(v)
		}
		label := "first iteration"
		if epochs > 0 {
			label = fmt.Sprintf("after %d epoch%s", epochs, map[bool]string{true: "s"}[epochs > 1])
		}
		points = append(points, benchPoint{Label: label, Pairs: len(u.Keys)})
		grads = append(grads, u)
		if mdl.Config().Kind == model.Softmax {
			f := node.SGDFactors(mdl, core.View(), batch, 1)
			factors = append(factors, &f)
		}
	}
	return points, grads, factors, nil
}

// namedCodec is a codec with the specification it was selected by.
type namedCodec struct {
	name  string
	codec codec.Codec
}

// measureCodec measures c on every gradient, timing encode and decode.
func measureCodec(name string, c codec.Codec, grads []codec.Sparse, factors []*sfb.Factors) (codecResult, error) {
	r := codecResult{Name: name}
	var keyBytes int
	var keyKnown = true
	var encTime, decTime time.Duration
	for i, g := range grads {
		m, err := codec.Measure(c, g)
		if err != nil {
			return r, fmt.Errorf("%s: %w", name, err)
		}
		m.Name = name
		r.PerPoint = append(r.PerPoint, m)
		r.Pairs += m.Pairs
		r.Bytes += m.Bytes
		r.RelL2Error += m.RelL2Error / float64(len(grads))
		r.SignFlips += m.SignFlips
		r.Overestimates += m.Overestimates
		if m.KeyBytes < 0 {
			keyKnown = false
		}
		keyBytes += m.KeyBytes
		enc, dec, err := timeCodec(c, g)
		if err != nil {
			return r, err
		}
		encTime += enc
		decTime += dec
		r.perPointDecode = append(r.perPointDecode, float64(m.Pairs)/dec.Seconds()/1e6)
		if factors != nil {
			frame, err := sfb.Encode(c, *factors[i])
			if err != nil {
				return r, fmt.Errorf("%s factors: %w", name, err)
			}
			r.FactorBytes += len(frame)
			if len(frame) < m.Bytes {
				r.FactorsSmaller++
			}
		}
	}
	r.RatioVs12B = 12 * float64(r.Pairs) / float64(r.Bytes)
	r.RatioVs8B = 8 * float64(r.Pairs) / float64(r.Bytes)
	if keyKnown {
		r.BytesPerKey = float64(keyBytes) / float64(r.Pairs)
	} else {
		r.BytesPerKey = float64(r.Bytes) / float64(r.Pairs)
	}
	r.EncodeMPairsS = float64(r.Pairs) / encTime.Seconds() / 1e6
	r.DecodeMPairsS = float64(r.Pairs) / decTime.Seconds() / 1e6
	return r, nil
}

// timeCodec returns the CPU time of one encode and one decode of g, on
// the thread that runs them (wall time where the system does not say, see
// threadCPUTime): after one untimed run of each, the median over
// timingWindows windows of at least timingWindow and three runs each. One
// short window of wall time moved by 2–3× between runs on a shared
// machine.
func timeCodec(c codec.Codec, g codec.Sparse) (enc, dec time.Duration, err error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	frame, err := c.Encode(nil, g)
	if err != nil {
		return 0, 0, err
	}
	if _, err = codec.Decode(frame); err != nil {
		return 0, 0, err
	}
	enc, err = medianRun(func() error {
		frame, err = c.Encode(frame[:0], g)
		return err
	})
	if err != nil {
		return 0, 0, err
	}
	dec, err = medianRun(func() error {
		_, err := codec.Decode(frame)
		return err
	})
	return enc, dec, err
}

// timingWindows and timingWindow set how timeCodec times: the median of
// windows of at least this long.
const (
	timingWindows = 5
	timingWindow  = 20 * time.Millisecond
)

// medianRun returns the median, over timingWindows windows, of the thread's
// CPU time (or wall time, where it is not known) of one call of f.
func medianRun(f func() error) (time.Duration, error) {
	// A collection first, so that the windows do not sweep what the
	// gradients' training left.
	runtime.GC()
	per := make([]time.Duration, 0, timingWindows)
	for range timingWindows {
		reps := 0
		c0, t0 := threadCPUTime(), time.Now()
		for time.Since(t0) < timingWindow || reps < 3 {
			if err := f(); err != nil {
				return 0, err
			}
			reps++
		}
		took := threadCPUTime() - c0
		if took <= 0 {
			took = time.Since(t0)
		}
		per = append(per, took/time.Duration(reps))
	}
	slices.Sort(per)
	return per[len(per)/2], nil
}
