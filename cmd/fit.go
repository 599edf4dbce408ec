package cmd

import (
	"log/slog"
	"slices"

	"github.com/sketchmesh/sketchmesh/dataset"
	"github.com/sketchmesh/sketchmesh/model"
	"github.com/sketchmesh/sketchmesh/node"
)

// defaultMaxDroppedPercent is --max-dropped: a node whose data loses more
// of its non-zeros than this to the mesh's feature mapping is refused.
// A shard of the data the mesh trains on loses none (the dimension is the
// founder's largest id, and another shard's largest ids are rarely far
// above it); a tenth lost means the data is of another kind.
const defaultMaxDroppedPercent = 10

// dataFit is what a node's data loses to a mesh's settings.
type dataFit struct {
	nonzeros, dropped uint64 // features, and those with ids above the dimension
	rows, unknownRows int    // rows, and softmax rows whose label is not a class
	largestID         uint64
}

// measureFit counts what d's rows lose under s: features whose ids lie
// above the dimension (none when ids are hashed) and, for softmax, rows
// whose label is none of the classes.
func measureFit(d *dataset.Dataset, s node.Settings) dataFit {
	fit := dataFit{rows: len(d.Rows)}
	for _, r := range d.Rows {
		fit.nonzeros += uint64(len(r.Keys))
		if n := len(r.Keys); n > 0 {
			fit.largestID = max(fit.largestID, r.Keys[n-1])
		}
		if s.HashBits == 0 {
			i, _ := slices.BinarySearch(r.Keys, s.MaxFeature+1)
			fit.dropped += uint64(len(r.Keys) - i)
		}
		if s.Model == model.Softmax {
			if _, ok := slices.BinarySearch(s.Classes, r.Label); !ok {
				fit.unknownRows++
			}
		}
	}
	return fit
}

// checkFit refuses data the mesh's feature mapping would mostly drop: more
// than maxPercent of its non-zeros above the dimension, or of its rows
// labelled with classes the mesh does not have. Within the bound a loss is
// a warning, as is data that touches only the bottom of a much larger
// dimension (a9a's 123 ids in rcv1's 47,236: they fit, but are they the
// same features?).
func checkFit(d *dataset.Dataset, s node.Settings, maxPercent float64, logger *slog.Logger) error {
	fit := measureFit(d, s)
	share := func(part, whole uint64) float64 {
		if whole == 0 {
			return 0
		}
		return 100 * float64(part) / float64(whole)
	}
	if p := share(fit.dropped, fit.nonzeros); p > maxPercent {
		return badInput("%s: %d of its %d non-zeros (%.1f %%) have feature ids above the mesh's dimension %d and would be dropped (the limit is %g %%, --max-dropped): this data does not fit the mesh's feature mapping",
			d.Name, fit.dropped, fit.nonzeros, p, s.MaxFeature, maxPercent)
	} else if fit.dropped > 0 {
		logger.Warn("some feature ids lie above the mesh's dimension and are dropped", "data", d.Name, "dropped", fit.dropped,
			"nonzeros", fit.nonzeros, "dropped_percent", p, "dimension", s.MaxFeature)
	}
	if p := share(uint64(fit.unknownRows), uint64(fit.rows)); p > maxPercent {
		return badInput("%s: %d of its %d rows (%.1f %%) have labels that are none of the mesh's classes %v (the limit is %g %%, --max-dropped): this data does not fit the mesh's model",
			d.Name, fit.unknownRows, fit.rows, p, s.Classes, maxPercent)
	}
	if s.HashBits == 0 && fit.largestID > 0 && fit.largestID < s.MaxFeature/16 {
		logger.Warn("this node's data uses only the lowest feature ids of the mesh's dimension: check that it is the data the mesh trains on",
			"data", d.Name, "largest_id", fit.largestID, "dimension", s.MaxFeature)
	}
	return nil
}
