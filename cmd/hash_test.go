package cmd

import (
	"bufio"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sketchmesh/sketchmesh/dataset"
)

// writeRemapped writes d as LIBSVM with every feature id replaced by
// ids[id], keys re-sorted as the format requires.
func writeRemapped(t *testing.T, path string, d *dataset.Dataset, ids map[uint64]uint64) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(f)
	type feature struct {
		id  uint64
		val float32
	}
	for _, r := range d.Rows {
		fs := make([]feature, len(r.Keys))
		for i, k := range r.Keys {
			fs[i] = feature{ids[k], r.Values[i]}
		}
		slices.SortFunc(fs, func(a, b feature) int {
			if a.id < b.id {
				return -1
			}
			return 1
		})
		w.WriteString(strconv.FormatFloat(r.Label, 'g', -1, 64))
		for _, x := range fs {
			w.WriteString(" " + strconv.FormatUint(x.id, 10) + ":" + strconv.FormatFloat(float64(x.val), 'g', -1, 32))
		}
		w.WriteByte('\n')
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

func testnetAccuracy(t *testing.T, args ...string) float64 {
	t.Helper()
	code, out, errOut := runMain(append([]string{"testnet", "--json"}, args...)...)
	if code != 0 {
		t.Fatalf("%v: exit %d: %s", args, code, errOut)
	}
	var rep struct {
		Accuracy float64 `json:"final_test_accuracy"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	return rep.Accuracy
}

// A copy of a9a whose every feature id is a random 64-bit integer trains
// with --hash-bits 18 to within a point of the original; without hashing
// it is refused, naming the file, the line and the way out. Both runs are
// bulk-synchronous, so they compare the ids alone: with the default
// staleness bound the order updates arrive in moved either run by up to a
// point from one run to the next.
func TestRandom64BitIdsTrainWithHashing(t *testing.T) {
	train, test, err := dataset.Builtin("a9a")
	if err != nil {
		t.Fatal(err)
	}
	train = &dataset.Dataset{Name: "a9a", Rows: train.Rows[:8000], MaxFeature: train.MaxFeature}
	rng := rand.New(rand.NewPCG(16, 64))
	ids := map[uint64]uint64{}
	for k := uint64(1); k <= max(train.MaxFeature, test.MaxFeature); k++ {
		ids[k] = rng.Uint64() | 1<<63 // far beyond any dimension
	}
	dir := t.TempDir()
	origTrain, origTest := filepath.Join(dir, "a9a.libsvm"), filepath.Join(dir, "a9a.t.libsvm")
	randTrain, randTest := filepath.Join(dir, "a9a-random-ids.libsvm"), filepath.Join(dir, "a9a-random-ids.t.libsvm")
	identity := map[uint64]uint64{}
	for k := range ids {
		identity[k] = k
	}
	writeRemapped(t, origTrain, train, identity)
	writeRemapped(t, origTest, test, identity)
	writeRemapped(t, randTrain, train, ids)
	writeRemapped(t, randTest, test, ids)

	common := []string{"--nodes", "2", "--iterations", "150", "--batch", "0.05", "--lr", "0.05", "--staleness", "0"}
	original := testnetAccuracy(t, append(common, "--data", origTrain, "--test-data", origTest)...)
	hashed := testnetAccuracy(t, append(common, "--data", randTrain, "--test-data", randTest, "--hash-bits", "18")...)
	t.Logf("a9a test accuracy: original ids %.4f, random 64-bit ids hashed into 2^18 %.4f", original, hashed)
	if math.Abs(original-hashed) > 0.01 || original < 0.8 {
		t.Errorf("original ids %.4f, random ids hashed %.4f: want within a point, above 80 %%", original, hashed)
	}

	code, out, errOut := runMain("testnet", "--data", randTrain, "--test-data", randTest)
	if code != 2 || out != "" || !strings.Contains(errOut, randTrain+":") || !strings.Contains(errOut, "does not fit a model without hashing") ||
		!strings.Contains(errOut, "--hash-bits") || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
		t.Errorf("random ids without hashing: exit %d, stderr %q", code, errOut)
	}
	if code, _, errOut := runMain("testnet", "--data", origTrain, "--hash-bits", "31"); code != 2 || !strings.Contains(errOut, "--hash-bits: hash bits 31: want 1 to 30") {
		t.Errorf("--hash-bits 31: exit %d, %q", code, errOut)
	}
}
