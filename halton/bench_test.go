package halton

import (
	"fmt"
	"testing"
)

func BenchmarkBuild(b *testing.B) {
	for _, p := range []int{64, 1024, 4096} {
		ids := make([]string, p)
		for i := range ids {
			ids[i] = fmt.Sprintf("node-%d", i)
		}
		b.Run(fmt.Sprintf("P=%d", p), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				Build(ids)
			}
		})
	}
}

func BenchmarkBuildSites(b *testing.B) {
	for _, p := range []int{64, 1024} {
		ids := make([]string, p)
		label := map[string]string{}
		for i := range ids {
			ids[i] = fmt.Sprintf("node-%d", i)
			label[ids[i]] = fmt.Sprint(i % 3)
		}
		b.Run(fmt.Sprintf("P=%d", p), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				BuildSites(ids, label)
			}
		})
	}
}

// BenchmarkForward asks one relay's next hops for every origin, as a
// relay does once per update it receives.
func BenchmarkForward(b *testing.B) {
	for _, p := range []int{1024, 4096} {
		ids := make([]string, p)
		for i := range ids {
			ids[i] = fmt.Sprintf("node-%d", i)
		}
		o := Build(ids)
		b.Run(fmt.Sprintf("P=%d", p), func(b *testing.B) {
			b.ReportAllocs()
			hops := 0
			for i := 0; b.Loop(); i++ {
				at := ids[(i*7919)%p]
				for _, origin := range ids {
					hops += len(o.Forward(origin, at))
				}
			}
			if hops == 0 {
				b.Fatal("no relay forwards anything")
			}
		})
		b.Run(fmt.Sprintf("append/P=%d", p), func(b *testing.B) {
			b.ReportAllocs()
			var next []string
			hops := 0
			for i := 0; b.Loop(); i++ {
				at := ids[(i*7919)%p]
				for _, origin := range ids {
					next = o.AppendForward(next[:0], origin, at)
					hops += len(next)
				}
			}
			if hops == 0 {
				b.Fatal("no relay forwards anything")
			}
		})
	}
}
