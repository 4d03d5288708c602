package etcd_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/resumable-go/resumable/adapters/etcd"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/stream"
)

// fakeWatcher is a clientv3.Watcher whose watches deliver the same response
// over and over: it measures the Source's own per-event path, without gRPC.
type fakeWatcher struct {
	resp clientv3.WatchResponse
}

func (w *fakeWatcher) Watch(ctx context.Context, _ string, _ ...clientv3.OpOption) clientv3.WatchChan {
	ch := make(chan clientv3.WatchResponse)
	go func() {
		defer close(ch)
		for {
			select {
			case ch <- w.resp:
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch
}

func (w *fakeWatcher) RequestProgress(context.Context) error { return nil }
func (w *fakeWatcher) Close() error                          { return nil }

// BenchmarkConnRecv measures Recv per event, 100 events a response (one
// revision each); it must not allocate.
func BenchmarkConnRecv(b *testing.B) {
	w := &fakeWatcher{resp: clientv3.WatchResponse{Header: &etcdserverpb.ResponseHeader{Revision: 1}}}
	for i := range 100 {
		w.resp.Events = append(w.resp.Events, &clientv3.Event{
			Type: mvccpb.PUT,
			Kv:   &mvccpb.KeyValue{Key: []byte(fmt.Sprintf("/p/k%03d", i)), Value: []byte("v"), ModRevision: int64(i + 1)},
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	conn, err := newSource(b, w, "/p/").Open(ctx, etcd.Cursor{})
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := conn.Recv(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGuard measures the ownership check made before each event.
func BenchmarkGuard(b *testing.B) {
	c, err := server.Client()
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	g, err := etcd.NewGroup(c, "bench", etcd.WithKeyPrefix(fmt.Sprintf("/bench/guard/%d/", time.Now().UnixNano())))
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	owners := make(chan *etcd.Owner, 1)
	done := make(chan error, 1)
	go func() {
		done <- g.Run(ctx, []string{"s"}, func(ctx context.Context, o *etcd.Owner) error {
			owners <- o
			<-ctx.Done()
			return ctx.Err()
		})
	}()
	o := <-owners
	handle := etcd.Guard(o, func(context.Context, etcd.Event) error { return nil })
	b.ReportAllocs()
	for b.Loop() {
		if err := handle(ctx, etcd.Event{}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	cancel()
	<-done
}

// writeEvents writes n events under prefix in transactions of perRev keys
// and returns the revision before the first.
func writeEvents(b *testing.B, c *clientv3.Client, prefix string, n, perRev int) int64 {
	b.Helper()
	ctx := context.Background()
	resp, err := c.Get(ctx, "/", clientv3.WithCountOnly())
	if err != nil {
		b.Fatal(err)
	}
	start := resp.Header.Revision
	for i := 0; i < n; i += perRev {
		ops := make([]clientv3.Op, 0, perRev)
		for j := i; j < min(i+perRev, n); j++ {
			ops = append(ops, clientv3.OpPut(fmt.Sprintf("%sk%07d", prefix, j), "value-of-about-thirty-bytes..."))
		}
		if _, err := c.Txn(ctx).Then(ops...).Commit(); err != nil {
			b.Fatal(err)
		}
	}
	return start
}

// BenchmarkResumer measures events per second through a Resumer over the
// Source from the embedded etcd, the cursor in memory: one event per
// revision, and 100 per revision (transactions).
func BenchmarkResumer(b *testing.B) {
	for _, perRev := range []int{1, 100} {
		b.Run(fmt.Sprintf("events-per-revision=%d", perRev), func(b *testing.B) {
			c, err := server.Client()
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			prefix := fmt.Sprintf("/bench/resumer/%d/", time.Now().UnixNano())
			start := writeEvents(b, c, prefix, b.N, perRev)
			r, err := stream.New(newSource(b, c, prefix), etcd.Extract, cursor.NewMemory(etcd.Cursor{Revision: start}))
			if err != nil {
				b.Fatal(err)
			}
			n := 0
			b.ReportAllocs()
			b.ResetTimer()
			err = r.Run(context.Background(), func(context.Context, etcd.Event) error {
				if n++; n == b.N {
					return stream.ErrStop
				}
				return nil
			})
			b.StopTimer()
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// BenchmarkSaveFenced measures a fenced Save (a transaction conditioned on
// an owner key's create revision, as a Group's) against the embedded etcd,
// and reports its latency's 50th and 99th percentiles.
func BenchmarkSaveFenced(b *testing.B) {
	c, err := server.Client()
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	prefix := fmt.Sprintf("/bench/save/%d/", time.Now().UnixNano())
	resp, err := c.Put(ctx, prefix+"owner", "me")
	if err != nil {
		b.Fatal(err)
	}
	fence := clientv3.Compare(clientv3.CreateRevision(prefix+"owner"), "=", resp.Header.Revision)
	s, err := etcd.NewStore(c, prefix+"cursor", etcd.CursorCodec(), etcd.Cursor{}, etcd.WithFence(fence))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := s.Load(ctx); err != nil {
		b.Fatal(err)
	}
	lat := make([]time.Duration, 0, b.N)
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		i++
		t0 := time.Now()
		if err := s.Save(ctx, etcd.Cursor{Revision: int64(i), Index: 1}); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	reportPercentiles(b, lat)
}

// reportPercentiles reports the 50th and 99th percentiles of lat in
// microseconds.
func reportPercentiles(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}
