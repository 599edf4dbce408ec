package cmd

import (
	"errors"
	"fmt"
	"log/slog"
	"math/bits"
	"slices"

	"github.com/sketchmesh/sketchmesh/dataset"
	"github.com/sketchmesh/sketchmesh/model"
	"github.com/sketchmesh/sketchmesh/modelfile"
	"github.com/sketchmesh/sketchmesh/node"
)

// savedModel describes a view as a model file: its mapping and shape from
// the mesh's settings, its provenance from the rest.
func savedModel(s node.Settings, view []float64, meshName, member string, clock uint64, data ...string) *modelfile.Model {
	m := &modelfile.Model{
		Kind:    s.Model,
		Mapping: modelfile.Mapping{Dimension: s.MaxFeature},
		Weights: slices.Clone(view),
		Provenance: modelfile.Provenance{
			Mesh: meshName, Member: member, Clock: clock, Data: slices.DeleteFunc(slices.Clone(data), func(d string) bool { return d == "" }),
		},
	}
	if len(s.Classes) > 0 {
		m.Classes = slices.Clone(s.Classes)
	}
	if s.HashBits > 0 {
		m.Mapping.HashBits, m.Mapping.Hash = s.HashBits, dataset.HashFunction
	}
	for _, name := range node.SettingNames() {
		m.Provenance.Settings = append(m.Provenance.Settings, modelfile.Setting{Name: name, Value: s.Value(name)})
	}
	return m
}

// writeModel writes a model file, naming the flag in its error.
func writeModel(path string, m *modelfile.Model) error {
	if err := modelfile.Write(path, m); err != nil {
		return fmt.Errorf("--save-model: %w", err)
	}
	return nil
}

// fitData maps the data's feature ids the way the model will: hashed into
// 2^hashBits keys, or as they are, which needs every id to fit a model.
// An id that does not is reported with its file and line. test may be nil.
func fitData(train, test *dataset.Dataset, hashBits uint, format dataset.Format) (*dataset.Dataset, *dataset.Dataset, error) {
	if format.HashesFeatures() {
		// Hashed as read: only the dimension is the hashing's.
		train = &dataset.Dataset{Name: train.Name, Rows: train.Rows, MaxFeature: 1 << hashBits}
		if test != nil {
			test = &dataset.Dataset{Name: test.Name, Rows: test.Rows, MaxFeature: 1 << hashBits}
		}
		return train, test, nil
	}
	if hashBits > 0 {
		if err := dataset.CheckHashBits(hashBits); err != nil {
			return nil, nil, badInput("--hash-bits: %v", err)
		}
		train = train.Hashed(hashBits)
		if test != nil {
			test = test.Hashed(hashBits)
		}
		return train, test, nil
	}
	if train.MaxFeature >= model.MaxParams {
		return nil, nil, idTooLarge(train)
	}
	return train, test, nil
}

// idTooLarge says which id of d does not fit a model without hashing.
func idTooLarge(d *dataset.Dataset) error {
	where := d.Name
	if d.MaxFeatureLine > 0 {
		where = fmt.Sprintf("%s:%d", d.Name, d.MaxFeatureLine)
	}
	return badInput("%s: feature id %d does not fit a model without hashing (at most %d weights); give --hash-bits B (e.g. 18) to hash every id into 2^B weights",
		where, d.MaxFeature, model.MaxParams)
}

// modelError turns an error building a model from d into bad input,
// naming the id that makes it too large.
func modelError(d *dataset.Dataset, err error) error {
	if errors.Is(err, model.ErrTooLarge) {
		return idTooLarge(d)
	}
	return usageError{err}
}

// hashBitsHelp is the help text of --hash-bits.
const hashBitsHelp = "hash every feature id (any 64-bit integer) into 2^B weights with " + dataset.HashFunction + " (1-30; 0 = ids are weights, which must fit a model)"

// formatHelp is the help text of --format.
const formatHelp = "data format: auto (detected from the first lines: gzip or plain, then libsvm, criteo or vw), libsvm, criteo (label, 13 integer and 26 categorical tab-separated columns) or vw (Vowpal Wabbit text); criteo and vw need --hash-bits"

// Dense weights sized by the largest id cost 8 bytes per id and class on
// every node, whether the data uses the ids or not. Past sparseIDsDim,
// data whose non-zeros are fewer than the dimension / sparseIDsRatio would
// rather be hashed.
const (
	sparseIDsDim   = 1 << 22
	sparseIDsRatio = 16
)

// warnSparseIDs says when the model's dimension comes from a few large ids
// that hashing would fold into far fewer weights (a 20-million id in a
// small file made each node hold 160 MB of weights).
func warnSparseIDs(logger *slog.Logger, train *dataset.Dataset, nodes int) {
	if train.MaxFeature <= sparseIDsDim {
		return
	}
	if nnz := train.NNZ(); uint64(nnz) < train.MaxFeature/sparseIDsRatio {
		bits := max(10, min(dataset.MaxHashBits, 2+uint(bits.Len64(uint64(nnz)))))
		logger.Warn("the model's dimension is the largest feature id, far above what the data uses: consider --hash-bits",
			"data", train.Name, "largest_id", train.MaxFeature, "nonzeros", nnz, "weights_mib_per_node", (train.MaxFeature+1)*8>>20,
			"nodes", nodes, "suggested_hash_bits", bits)
	}
}
