package sse_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/resumable-go/resumable/adapters/sse"
)

// firehose serves block over and over until the client goes away.
func firehose(block string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for {
			if _, err := io.WriteString(w, block); err != nil {
				return
			}
		}
	}
}

// BenchmarkRecvLoopback measures events per second through a Conn from an
// httptest server on the loopback interface that writes as fast as it can
// (the server shares the machine's cores). One op is one event.
func BenchmarkRecvLoopback(b *testing.B) {
	for _, size := range []int{16, 1024} {
		b.Run(fmt.Sprintf("data=%dB", size), func(b *testing.B) {
			var sb strings.Builder
			for i := 1; i <= 100; i++ {
				fmt.Fprintf(&sb, "id: %d\nevent: tick\ndata: %s\n\n", 1000000+i, strings.Repeat("x", size))
			}
			ts := httptest.NewServer(firehose(sb.String()))
			defer ts.Close()
			conn, err := (&sse.Source{URL: ts.URL, Client: ts.Client()}).Open(context.Background(), "")
			if err != nil {
				b.Fatal(err)
			}
			defer conn.Close()
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := conn.Recv(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}
