package codec

import (
	"fmt"
	"testing"
	"time"
)

// benchUpdate is a realistic sparse gradient: 50,000 keys from a range of
// 10^6 with Laplace-distributed values.
func benchUpdate() Sparse { return laplaceUpdate(7, 50000, 1_000_000, 1e-3) }

// benchCodecs are the registered codecs plus the sketchml configurations
// doc.go quotes.
func benchCodecs(tb testing.TB) []namedCodec {
	cs := []namedCodec{}
	for _, n := range Names() {
		c, _ := ByName(n)
		cs = append(cs, namedCodec{n, c})
	}
	paper := sketchOnly()
	paper.KeyCoding, paper.CellCoding, paper.GroupLayout = KeyCodingDeltaBinary, CellCodingPacked, GroupsEqualWidth
	c, err := NewSketchML(paper)
	if err != nil {
		tb.Fatal(err)
	}
	return append(cs, namedCodec{"sketchml-paper", c})
}

type namedCodec struct {
	name string
	c    Codec
}

// reportRates reports pairs per second over wall and CPU time.
func reportRates(b *testing.B, pairs int, wall, cpu time.Duration) {
	total := float64(pairs) * float64(b.N)
	b.ReportMetric(total/wall.Seconds()/1e6, "Mpairs/s")
	if cpu > 0 {
		b.ReportMetric(total/cpu.Seconds()/1e6, "Mpairs/cpu-s")
	}
}

func BenchmarkEncode(b *testing.B) {
	u := benchUpdate()
	for _, nc := range benchCodecs(b) {
		b.Run(nc.name, func(b *testing.B) {
			frame, err := nc.c.Encode(nil, u)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(12 * u.Len()))
			c0, t0 := cpuTime(), time.Now()
			for b.Loop() {
				frame, _ = nc.c.Encode(frame[:0], u)
			}
			reportRates(b, u.Len(), time.Since(t0), cpuTime()-c0)
		})
	}
}

func BenchmarkDecode(b *testing.B) {
	u := benchUpdate()
	for _, nc := range benchCodecs(b) {
		b.Run(nc.name, func(b *testing.B) {
			frame, err := nc.c.Encode(nil, u)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(12 * u.Len()))
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

// BenchmarkDecodeSizes decodes sketchml frames of the sizes real updates
// have, where the per-frame costs (header, representatives, code tables,
// the bitmap over the keys' range) weigh: a9a's 117 of 123 features, a
// few hundred, and rcv1's few thousand keys over 2^18. "sketchml" is what
// the registered codec writes (a uniform8 frame where that serves better,
// as for these Laplace values), "sketch" the sketch frame alone.
func BenchmarkDecodeSizes(b *testing.B) {
	for _, nc := range []namedCodec{{"sketchml", mustSketchML(b, DefaultSketchMLConfig())}, {"sketch", mustSketchML(b, sketchOnly())}} {
		for _, size := range []struct {
			pairs    int
			keyRange uint64
		}{{117, 123}, {600, 1200}, {3000, 1 << 18}} {
			u := laplaceUpdate(7, size.pairs, size.keyRange, 1e-3)
			frame, err := nc.c.Encode(nil, u)
			if err != nil {
				b.Fatal(err)
			}
			b.Run(fmt.Sprintf("%s/pairs=%d/range=%d", nc.name, size.pairs, size.keyRange), func(b *testing.B) {
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
}
