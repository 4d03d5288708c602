package sse

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
)

// repeat is a reader that returns block over and over.
type repeat struct {
	block string
	off   int
}

func (r *repeat) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		c := copy(p[n:], r.block[r.off:])
		n += c
		r.off = (r.off + c) % len(r.block)
	}
	return n, nil
}

// eventBlock returns n events of size bytes of data each, with seven-digit
// ids (each event's ID differs from the one before, as in real streams; Go
// converts one-byte strings without allocating, which would flatter us).
func eventBlock(n, size int) string {
	var b strings.Builder
	data := strings.Repeat("x", size)
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "id: %d\nevent: tick\ndata: %s\n\n", 1000000+i, data)
	}
	return b.String()
}

// BenchmarkParse measures the parser alone, per event, on input in memory:
// the two allocations are the event's own strings, its ID and its Data (the
// Type string is reused while it repeats).
func BenchmarkParse(b *testing.B) {
	for _, size := range []int{16, 1024} {
		b.Run(fmt.Sprintf("data=%dB", size), func(b *testing.B) {
			block := eventBlock(100, size)
			p := newParser(&repeat{block: block}, "", defaultMaxEventSize, new(atomic.Int64))
			b.SetBytes(int64(len(block) / 100))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := p.next(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}
