package interop_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	r3sse "github.com/r3labs/sse/v2"
	gosse "github.com/tmaxmax/go-sse"
	r3backoff "gopkg.in/cenkalti/backoff.v1"

	"github.com/resumable-go/resumable/adapters/sse"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/stream"
)

// The benchmarks read one endless stream from one loopback server that
// writes the same 100 events over and over as fast as it can, with each
// client, in the same run. One op is one event received; events/s is the
// throughput. Server and client share the machine's cores.

// firehose serves a block of 100 events with size bytes of data each until
// the client goes away.
func firehose(size int) *httptest.Server {
	var b strings.Builder
	for i := 1; i <= 100; i++ {
		fmt.Fprintf(&b, "id: %d\nevent: tick\ndata: %s\n\n", 1000000+i, strings.Repeat("x", size))
	}
	block := b.String()
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for {
			if _, err := io.WriteString(w, block); err != nil {
				return
			}
		}
	}))
}

func BenchmarkClients(b *testing.B) {
	clients := []struct {
		name string
		read func(b *testing.B, ts *httptest.Server)
	}{
		{name: "resumable-Conn", read: readConn},
		{name: "resumable-Resumer", read: readResumer},
		{name: "tmaxmax-go-sse-Read", read: readGoSSE},
		{name: "tmaxmax-go-sse-Connection", read: readGoSSEConnection},
		{name: "r3labs-sse", read: readR3labs},
	}
	for _, size := range []int{16, 1024} {
		for _, c := range clients {
			b.Run(fmt.Sprintf("data=%dB/client=%s", size, c.name), func(b *testing.B) {
				ts := firehose(size)
				defer ts.Close()
				b.ReportAllocs()
				c.read(b, ts)
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
			})
		}
	}
}

// readConn reads with an sse.Source's Conn.
func readConn(b *testing.B, ts *httptest.Server) {
	conn, err := (&sse.Source{URL: ts.URL, Client: ts.Client()}).Open(context.Background(), "")
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		if _, err := conn.Recv(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// readResumer reads through a stream.Resumer, as users do.
func readResumer(b *testing.B, ts *httptest.Server) {
	r, err := stream.New(&sse.Source{URL: ts.URL, Client: ts.Client()}, sse.EventID, cursor.NewMemory(""))
	if err != nil {
		b.Fatal(err)
	}
	n := 0
	b.ResetTimer()
	err = r.Run(context.Background(), func(context.Context, sse.Event) error {
		if n++; n == b.N {
			return stream.ErrStop
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
}

// readGoSSE reads a response with go-sse's parser.
func readGoSSE(b *testing.B, ts *httptest.Server) {
	resp, err := ts.Client().Get(ts.URL)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	n := 0
	b.ResetTimer()
	for _, err := range gosse.Read(resp.Body, nil) {
		if err != nil {
			b.Fatal(err)
		}
		if n++; n == b.N {
			break
		}
	}
}

// readGoSSEConnection reads with go-sse's client Connection.
func readGoSSEConnection(b *testing.B, ts *httptest.Server) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, ts.URL, nil)
	if err != nil {
		b.Fatal(err)
	}
	conn := (&gosse.Client{HTTPClient: ts.Client()}).NewConnection(req)
	n := 0
	conn.SubscribeToAll(func(gosse.Event) {
		if n++; n == b.N {
			cancel()
		}
	})
	b.ResetTimer()
	if err := conn.Connect(); !errors.Is(err, context.Canceled) {
		b.Fatal(err)
	}
}

// readR3labs reads with r3labs/sse's client.
func readR3labs(b *testing.B, ts *httptest.Server) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := r3sse.NewClient(ts.URL)
	c.Connection = ts.Client()
	c.ReconnectStrategy = &r3backoff.StopBackOff{} // else it retries the cancelled request for 15 minutes
	n := 0
	b.ResetTimer()
	_ = c.SubscribeRawWithContext(ctx, func(*r3sse.Event) {
		if n++; n == b.N {
			cancel()
		}
	})
	if n < b.N {
		b.Fatalf("%d events, want %d", n, b.N)
	}
}
