package dataset

import (
	"fmt"
	"math/bits"
	"math/rand/v2"
	"slices"
)

// Row is one example: its label and its sparse features (keys strictly
// ascending, 1-based feature ids).
//
// Rows produced by Read share one backing array for their features, each
// with its capacity capped at its length, so appending to one row's slices
// copies instead of overwriting the next row.
type Row struct {
	Label  float64
	Keys   []uint64
	Values []float32
}

// Dataset is a list of examples.
type Dataset struct {
	Name       string // file name or built-in name, used in reports and errors
	Rows       []Row
	MaxFeature uint64 // largest feature id seen (0 if none)
	// MaxFeatureLine is the line of the file where MaxFeature first
	// occurs, for messages about ids too large to use; 0 when unknown
	// (built by hand, shuffled, sharded or hashed).
	MaxFeatureLine int
}

// pcgStream is the fixed second PCG seed word. Only the caller's seed varies,
// so a seed alone determines the permutation.
const pcgStream = 0x9e3779b97f4a7c15

// Shuffled returns a new Dataset with the rows in a random order determined
// by seed. The permutation depends only on seed and the number of rows: it is
// drawn from a PCG source with an explicit Fisher–Yates shuffle, so it is the
// same on every platform and Go release. The rows' feature slices are shared
// with d, not copied.
func (d *Dataset) Shuffled(seed int64) *Dataset {
	rows := slices.Clone(d.Rows)
	src := rand.NewPCG(uint64(seed), pcgStream)
	for i := len(rows) - 1; i > 0; i-- {
		j := uniform(src, uint64(i)+1)
		rows[i], rows[j] = rows[j], rows[i]
	}
	return &Dataset{Name: d.Name, Rows: rows, MaxFeature: d.MaxFeature, MaxFeatureLine: d.MaxFeatureLine}
}

// uniform returns a uniform integer in [0, n), n > 0, by Lemire's
// multiply-and-reject method. It is written out rather than calling
// rand.Rand.IntN or Shuffle because the standard library does not promise to
// keep those algorithms across releases; deriving indices here ties the
// permutation to the PCG output stream alone (a test pins it).
func uniform(src rand.Source, n uint64) uint64 {
	hi, lo := bits.Mul64(src.Uint64(), n)
	if lo < n {
		thresh := -n % n
		for lo < thresh {
			hi, lo = bits.Mul64(src.Uint64(), n)
		}
	}
	return hi
}

// Shard returns rows i, i+n, i+2n, ... of d as a new Dataset named
// "name[i/n]". The n shards of a dataset together hold each row exactly once;
// round robin (rather than contiguous ranges) keeps every shard's class mix
// close to the whole when the file is sorted by class, although sorted files
// should still be shuffled first.
//
// MaxFeature is the largest id in the shard's own rows, which can be below
// d's: nodes that must agree on a model dimension should take it from the
// unsharded training set. The rows' feature slices are shared with d.
//
// Shard panics unless 0 <= i < n, which is a programming error.
func (d *Dataset) Shard(i, n int) *Dataset {
	if n <= 0 || i < 0 || i >= n {
		panic(fmt.Sprintf("dataset: Shard(%d, %d): need 0 <= i < n", i, n))
	}
	total := len(d.Rows)
	rows := make([]Row, 0, max(0, (total-i+n-1)/n))
	var maxFeature uint64
	for j := i; j < total; j += n {
		r := d.Rows[j]
		rows = append(rows, r)
		if k := len(r.Keys); k > 0 {
			maxFeature = max(maxFeature, r.Keys[k-1])
		}
		if j >= total-n {
			break // j+n would be past the end (and could overflow int)
		}
	}
	return &Dataset{Name: fmt.Sprintf("%s[%d/%d]", d.Name, i, n), Rows: rows, MaxFeature: maxFeature}
}

// Labels returns the distinct labels, sorted ascending.
func (d *Dataset) Labels() []float64 {
	seen := make(map[float64]struct{})
	for _, r := range d.Rows {
		seen[r.Label] = struct{}{}
	}
	labels := make([]float64, 0, len(seen))
	for l := range seen {
		labels = append(labels, l)
	}
	slices.Sort(labels)
	return labels
}

// NNZ returns the total number of stored features.
func (d *Dataset) NNZ() int {
	n := 0
	for _, r := range d.Rows {
		n += len(r.Keys)
	}
	return n
}
