package cmd

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/sketchmesh/sketchmesh/dataset"
	"github.com/sketchmesh/sketchmesh/model"
	"github.com/sketchmesh/sketchmesh/modelfile"
)

// predictReport is predict's JSON. Metrics that do not apply to the model
// are absent.
type predictReport struct {
	Model   string   `json:"model"`
	Data    string   `json:"data"`
	Rows    int      `json:"rows"`
	Loss    float64  `json:"loss"`
	LogLoss *float64 `json:"log_loss,omitempty"`
	// Accuracy, Loss and LogLoss are defined as in the testnet and run
	// reports, so a model file reproduces its node's figures.
	Accuracy *float64 `json:"accuracy,omitempty"`
	AUC      *float64 `json:"auc,omitempty"`
	MacroF1  *float64 `json:"macro_f1,omitempty"`
	RMSE     *float64 `json:"rmse,omitempty"`
	// NonzerosOutside counts the features of the data the model has no
	// weight for (ids above its dimension), which the scores ignore.
	NonzerosOutside uint64  `json:"nonzeros_outside_model"`
	Nonzeros        uint64  `json:"nonzeros"`
	WallSeconds     float64 `json:"wall_seconds"`
}

// maxOutsideShare is the share of non-zeros beyond the model's dimension
// above which predict refuses the data as not the model's kind of data.
const maxOutsideShare = 0.5

func runPredict(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("predict", "predict --model FILE --data FILE [--out FILE] [--json]",
		"Scores every row of the data with a saved model, reading the data as a stream: one score per line "+
			"(the probability of class 1 for lr, the margin for svm, the value for linear; for softmax the predicted "+
			"label, then each class's probability, tab-separated), then the metrics: accuracy, log loss, AUC (lr, svm), "+
			"macro-F1 (softmax), RMSE (linear).", stderr)
	modelPath := fs.String("model", "", "model file written by --save-model (required)")
	dataPath := fs.String("data", "", "data to score: a LIBSVM file (plain or .gz), or a built-in split such as rcv1.test (required)")
	outPath := fs.String("out", "", "write the scores to this file, atomically (default: stdout, or nowhere with --json)")
	asJSON := fs.Bool("json", false, "print the metrics as one JSON object on stdout")
	format := fs.String("format", "auto", "data format: auto (detected from the first lines), libsvm, criteo or vw (criteo and vw need a model trained with --hash-bits)")
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	switch {
	case *modelPath == "":
		return badInput("--model is required: a file written by testnet or run --save-model")
	case *dataPath == "":
		return badInput("--data is required: the rows to score")
	}
	mf, err := modelfile.Read(*modelPath)
	if err != nil {
		return usageError{fmt.Errorf("--model: %w", err)}
	}
	mdl, err := mf.Build()
	if err != nil {
		return usageError{fmt.Errorf("--model %s: %w", *modelPath, err)}
	}
	dataFmt, err := resolveFormat(*format, *dataPath)
	if err != nil {
		return err
	}
	if dataFmt.HashesFeatures() && mf.Mapping.HashBits == 0 {
		return badInput("--format %s: %s reads as %s, whose features are strings that must be hashed, and the model was trained without --hash-bits", *format, *dataPath, dataFmt)
	}
	sc, err := dataset.OpenScannerWith(*dataPath, dataset.Options{Format: dataFmt, HashBits: mf.Mapping.HashBits})
	if err != nil {
		return usageError{fmt.Errorf("--data: %w", err)}
	}
	defer sc.Close()

	var scores io.Writer = io.Discard
	var out *atomicFile
	switch {
	case *outPath != "":
		if out, err = createAtomic(*outPath); err != nil {
			return usageError{fmt.Errorf("--out: %w", err)}
		}
		defer out.abort()
		scores = out
	case !*asJSON:
		scores = stdout
	}
	bw := bufio.NewWriterSize(scores, 64<<10)
	rep, err := predictStream(ctx, sc, mf, mdl, bw)
	if err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("writing scores: %w", err)
	}
	if out != nil {
		if err := out.commit(); err != nil {
			return fmt.Errorf("--out: %w", err)
		}
	}
	rep.Model, rep.Data = *modelPath, *dataPath
	if *asJSON {
		return json.NewEncoder(stdout).Encode(rep)
	}
	summary := stderr
	if out != nil {
		summary = stdout
	}
	printPredict(summary, rep)
	return nil
}

// predictStream scores the rows of sc, writing one line per row to w, and
// returns the metrics.
func predictStream(ctx context.Context, sc *dataset.Scanner, mf *modelfile.Model, mdl *model.Model, w *bufio.Writer) (*predictReport, error) {
	start := time.Now()
	hasher := mf.Mapping.Hasher()
	if sc.HashedAsRead() {
		hasher = &dataset.Hasher{}
	}
	ev := mdl.NewEvaluator(mf.Weights)
	dim := mf.Mapping.Dimension
	rep := &predictReport{}
	firstOutside := 0
	var line []byte
	for sc.Scan() {
		if sc.Line()%4096 == 0 && ctx.Err() != nil {
			return nil, fmt.Errorf("predict interrupted: %w", ctx.Err())
		}
		row := hasher.Row(sc.Row())
		rep.Nonzeros += uint64(len(row.Keys))
		for i := len(row.Keys) - 1; i >= 0 && row.Keys[i] > dim; i-- {
			rep.NonzerosOutside++
			if firstOutside == 0 {
				firstOutside = sc.Line()
			}
		}
		outs := ev.Add(&row)
		line = line[:0]
		if mdl.Config().Kind == model.Softmax {
			best := 0
			for c, p := range outs {
				if p > outs[best] {
					best = c
				}
			}
			line = strconv.AppendFloat(line, mf.Classes[best], 'g', -1, 64)
			for _, p := range outs {
				line = append(line, '\t')
				line = strconv.AppendFloat(line, p, 'g', -1, 64)
			}
		} else {
			line = strconv.AppendFloat(line, outs[0], 'g', -1, 64)
		}
		line = append(line, '\n')
		if _, err := w.Write(line); err != nil {
			return nil, fmt.Errorf("writing scores: %w", err)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, usageError{fmt.Errorf("--data: %w", err)}
	}
	if rep.Nonzeros > 0 && float64(rep.NonzerosOutside) > maxOutsideShare*float64(rep.Nonzeros) {
		return nil, badInput("--data: %s:%d: %d of %d non-zeros (%.0f %%) have ids above the model's %d features: this data does not fit the model (hashed %v)",
			sc.Name(), firstOutside, rep.NonzerosOutside, rep.Nonzeros, 100*float64(rep.NonzerosOutside)/float64(rep.Nonzeros), dim, mf.Mapping.HashBits > 0)
	}
	met := ev.Metrics()
	if met.Rows == 0 {
		return nil, badInput("--data: %s holds no rows", sc.Name())
	}
	rep.Rows, rep.Loss = met.Rows, met.Loss
	rep.Accuracy, rep.AUC, rep.MacroF1, rep.RMSE = present(met.Accuracy), present(met.AUC), present(met.MacroF1), present(met.RMSE)
	if k := mdl.Config().Kind; k == model.LogisticRegression || k == model.Softmax {
		rep.LogLoss = present(met.Loss)
	}
	rep.WallSeconds = time.Since(start).Seconds()
	return rep, nil
}

// present maps NaN (no such figure) to an absent JSON field.
func present(v float64) *float64 {
	if math.IsNaN(v) {
		return nil
	}
	return &v
}

func printPredict(w io.Writer, r *predictReport) {
	fmt.Fprintf(w, "%d rows of %s scored in %.2f s: loss %.6f", r.Rows, r.Data, r.WallSeconds, r.Loss)
	for _, m := range []struct {
		name string
		v    *float64
		pct  bool
	}{{"accuracy", r.Accuracy, true}, {"AUC", r.AUC, false}, {"macro-F1", r.MacroF1, false}, {"RMSE", r.RMSE, false}} {
		switch {
		case m.v == nil:
		case m.pct:
			fmt.Fprintf(w, ", %s %.2f %%", m.name, 100**m.v)
		default:
			fmt.Fprintf(w, ", %s %.4f", m.name, *m.v)
		}
	}
	fmt.Fprintln(w)
	if r.NonzerosOutside > 0 {
		fmt.Fprintf(w, "%d of %d non-zeros have ids above the model's dimension and were ignored\n", r.NonzerosOutside, r.Nonzeros)
	}
}

func runExport(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("export", "export --model FILE [--format json|tsv] [--out FILE]",
		"Writes a saved model for people and other tools: JSON (kind, classes, feature mapping, provenance, and one dense "+
			"weight array per class, index 0 the bias) or TSV (class, key, weight; non-zero weights only, key 0 the bias).", stderr)
	modelPath := fs.String("model", "", "model file written by --save-model (required)")
	format := fs.String("format", "json", "output format: json or tsv")
	outPath := fs.String("out", "", "write to this file, atomically (default: stdout)")
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	if *modelPath == "" {
		return badInput("--model is required: a file written by testnet or run --save-model")
	}
	if err := oneOf("format", *format, "json", "tsv"); err != nil {
		return err
	}
	mf, err := modelfile.Read(*modelPath)
	if err != nil {
		return usageError{fmt.Errorf("--model: %w", err)}
	}
	var w io.Writer = stdout
	var out *atomicFile
	if *outPath != "" {
		if out, err = createAtomic(*outPath); err != nil {
			return usageError{fmt.Errorf("--out: %w", err)}
		}
		defer out.abort()
		w = out
	}
	if *format == "json" {
		err = mf.WriteJSON(w)
	} else {
		err = mf.WriteTSV(w)
	}
	if err != nil {
		return err
	}
	if out != nil {
		return out.commit()
	}
	return nil
}

// atomicFile is an output written to a temporary file and renamed over its
// path once complete, so a failed or interrupted command leaves no half
// file behind.
type atomicFile struct {
	*os.File
	path string
	done bool
}

func createAtomic(path string) (*atomicFile, error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return nil, err
	}
	return &atomicFile{File: f, path: path}, nil
}

func (a *atomicFile) commit() error {
	err := a.Sync()
	if cerr := a.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(a.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(a.Name(), a.path)
	}
	if err != nil {
		return errors.Join(err, os.Remove(a.Name()))
	}
	a.done = true
	return nil
}

// abort removes the temporary file unless commit renamed it.
func (a *atomicFile) abort() {
	if !a.done {
		a.Close()
		os.Remove(a.Name())
	}
}
