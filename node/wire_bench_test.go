package node

import (
	"fmt"
	"testing"
)

// BenchmarkEncodeEnvelope writes a relay's envelope of 300 updates of
// 170-byte frames, the size of a simulated mesh's at P = 10,000 (each
// envelope carries a few hundred relays), and reads it back.
func BenchmarkEncodeEnvelope(b *testing.B) {
	updates := make([]Update, 300)
	for i := range updates {
		frame := make([]byte, 170)
		for j := range frame {
			frame[j] = byte(i + j)
		}
		updates[i] = Update{Origin: fmt.Sprintf("n%05d", i), Clock: uint64(100 + i%3), Frame: frame}
	}
	b.Run("encode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = EncodeEnvelope(updates)
		}
	})
	data := EncodeEnvelope(updates)
	table := NewSlotTable(len(updates))
	for _, u := range updates {
		table.intern(u.Origin)
	}
	for _, c := range []struct {
		name   string
		origin func([]byte) string
	}{{"decode", nil}, {"decode-interned", table.origin}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			var into []Update
			for b.Loop() {
				var err error
				if into, err = decodeEnvelopeInto(into[:0], data, c.origin); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
