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
