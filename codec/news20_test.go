package codec

import (
	"bufio"
	"compress/gzip"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// news20Path is the binary news20 training set beside the repository (see
// the shared data README); benchmarks that need it skip when it is absent.
var news20Path = filepath.Join("..", "..", "shared", "data", "news20", "news20.binary.train.libsvm.gz")

var news20 struct {
	once sync.Once
	u    Sparse
	err  error
}

// news20Gradient is the logistic-regression gradient at w=0 over a seeded
// 10% mini-batch of news20: keys are the union of the batch's features,
// values the batch-averaged gradient (1/B)·Σ (σ(0) − y01)·x.
func news20Gradient(tb testing.TB) Sparse {
	tb.Helper()
	news20.once.Do(func() { news20.u, news20.err = loadNews20Gradient(news20Path, 0.1, 1) })
	if os.IsNotExist(news20.err) {
		tb.Skipf("news20 data not found at %s: skipping", news20Path)
	}
	if news20.err != nil {
		tb.Fatal(news20.err)
	}
	return news20.u
}

func loadNews20Gradient(path string, frac float64, seed uint64) (Sparse, error) {
	f, err := os.Open(path)
	if err != nil {
		return Sparse{}, err
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return Sparse{}, err
	}
	type row struct {
		y   float64
		idx []uint64
		val []float64
	}
	var rows []row
	sc := bufio.NewScanner(gz)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) == 0 {
			continue
		}
		y, err := strconv.ParseFloat(fs[0], 64)
		if err != nil {
			return Sparse{}, fmt.Errorf("label %q: %w", fs[0], err)
		}
		r := row{y: y}
		for _, t := range fs[1:] {
			k, v, ok := strings.Cut(t, ":")
			if !ok {
				return Sparse{}, fmt.Errorf("feature %q", t)
			}
			i, err1 := strconv.ParseUint(k, 10, 64)
			x, err2 := strconv.ParseFloat(v, 64)
			if err1 != nil || err2 != nil {
				return Sparse{}, fmt.Errorf("feature %q", t)
			}
			r.idx = append(r.idx, i)
			r.val = append(r.val, x)
		}
		rows = append(rows, r)
	}
	if err := sc.Err(); err != nil {
		return Sparse{}, err
	}
	rng := rand.New(rand.NewPCG(seed, 0))
	perm := rng.Perm(len(rows))
	b := int(float64(len(rows)) * frac)
	g := map[uint64]float64{}
	for _, pi := range perm[:b] {
		r := rows[pi]
		y01 := 0.0
		if r.y > 0 {
			y01 = 1
		}
		for j, i := range r.idx {
			g[i] += (0.5 - y01) * r.val[j] / float64(b)
		}
	}
	u := Sparse{Keys: make([]uint64, 0, len(g))}
	for k := range g {
		u.Keys = append(u.Keys, k)
	}
	slices.Sort(u.Keys)
	u.Values = make([]float32, len(u.Keys))
	for i, k := range u.Keys {
		u.Values[i] = float32(g[k])
	}
	return u, nil
}

// news20Codecs are the registered codecs plus the sketchml variants the
// documentation quotes.
func news20Codecs(tb testing.TB) []struct {
	name string
	c    Codec
} {
	out := []struct {
		name string
		c    Codec
	}{}
	for _, n := range Names() {
		c, _ := ByName(n)
		out = append(out, struct {
			name string
			c    Codec
		}{n, c})
	}
	variant := func(name string, f func(*SketchMLConfig)) {
		cfg := DefaultSketchMLConfig()
		f(&cfg)
		c, err := NewSketchML(cfg)
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, struct {
			name string
			c    Codec
		}{name, c})
	}
	variant("sketchml-paper", func(c *SketchMLConfig) {
		c.KeyCoding, c.CellCoding, c.GroupLayout = KeyCodingDeltaBinary, CellCodingPacked, GroupsEqualWidth
	})
	variant("sketchml-paper-midpoint", func(c *SketchMLConfig) {
		c.KeyCoding, c.CellCoding, c.Representative, c.GroupLayout = KeyCodingDeltaBinary, CellCodingPacked, RepresentativeSplitMidpoint, GroupsEqualWidth
	})
	variant("sketchml-midpoint", func(c *SketchMLConfig) { c.Representative = RepresentativeSplitMidpoint })
	variant("sketchml-width", func(c *SketchMLConfig) { c.GroupLayout = GroupsEqualWidth })
	variant("sketchml-paper-energy", func(c *SketchMLConfig) {
		c.KeyCoding, c.CellCoding = KeyCodingDeltaBinary, CellCodingPacked
	})
	variant("sketchml-target-0.5", func(c *SketchMLConfig) { c.TargetError = 0.5 })
	out = append(out, struct {
		name string
		c    Codec
	}{"uniform8-nearest", Uniform8{}})
	return out
}

// BenchmarkNews20 measures every codec on the news20 gradient: size and
// error metrics from Measure (reported on the encode run), and encode and
// decode throughput over wall and CPU time. Run with -cpu 1 for one core:
//
//	go test ./codec -run '^$' -bench News20 -cpu 1
func BenchmarkNews20(b *testing.B) {
	u := news20Gradient(b)
	for _, nc := range news20Codecs(b) {
		frame, err := nc.c.Encode(nil, u)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(nc.name+"/encode", func(b *testing.B) {
			m, err := Measure(nc.c, u)
			if err != nil {
				b.Fatal(err)
			}
			out := make([]byte, 0, len(frame))
			c0, t0 := cpuTime(), time.Now()
			for b.Loop() {
				out, _ = nc.c.Encode(out[:0], u)
			}
			reportRates(b, u.Len(), time.Since(t0), cpuTime()-c0)
			b.ReportMetric(m.RatioVs12B, "ratio12")
			b.ReportMetric(m.BytesPerKey, "keyB/key")
			b.ReportMetric(m.RelL2Error, "relL2")
			b.ReportMetric(float64(m.SignFlips), "flips")
			b.ReportMetric(float64(m.Overestimates), "over")
			b.ReportMetric(float64(m.PadBytes), "padB")
		})
		b.Run(nc.name+"/decode", func(b *testing.B) {
			c0, t0 := cpuTime(), time.Now()
			for b.Loop() {
				if _, err := Decode(frame); err != nil {
					b.Fatal(err)
				}
			}
			reportRates(b, u.Len(), time.Since(t0), cpuTime()-c0)
		})
	}
}
