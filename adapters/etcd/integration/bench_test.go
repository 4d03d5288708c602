package integration_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/resumable-go/resumable/adapters/etcd"
	"github.com/resumable-go/resumable/adapters/etcd/internal/cluster"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/stream"
)

// BenchmarkClusterResumer measures events per second through a Resumer
// over the Source from a three-member etcd of real processes on this
// machine, the cursor in memory. "catch-up" reads history written before
// (etcd serves a watcher that is behind 1,000 revisions per 100 ms); "live"
// reads while eight writers write as fast as they can, one key per
// revision: there the rate is etcd's write rate.
func BenchmarkClusterResumer(b *testing.B) {
	c := cluster.Start(b, 3)
	cl := c.Client(b)
	for _, tc := range []struct {
		name   string
		perRev int
		live   bool
	}{
		{name: "catch-up/events-per-revision=1", perRev: 1},
		{name: "catch-up/events-per-revision=100", perRev: 100},
		{name: "live/events-per-revision=1", perRev: 1, live: true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			prefix := fmt.Sprintf("/bench/%d/", time.Now().UnixNano())
			start := revision(b, cl)
			write := func(from, step int) {
				for i := from; i < b.N; i += step {
					ops := make([]clientv3.Op, 0, tc.perRev)
					for j := i; j < min(i+tc.perRev, b.N); j++ {
						ops = append(ops, clientv3.OpPut(fmt.Sprintf("%sk%07d", prefix, j), "value-of-about-thirty-bytes..."))
					}
					if _, err := cl.Txn(context.Background()).Then(ops...).Commit(); err != nil {
						b.Error(err)
						return
					}
				}
			}
			var writers sync.WaitGroup
			if tc.live {
				b.ResetTimer()
				for w := range 8 {
					writers.Go(func() { write(w*tc.perRev, 8*tc.perRev) })
				}
			} else {
				write(0, tc.perRev)
				b.ResetTimer()
			}
			r, err := etcd.NewResumer(c.Client(b), prefix, cursor.NewMemory(etcd.Cursor{Revision: start}))
			if err != nil {
				b.Fatal(err)
			}
			n := 0
			err = r.Run(context.Background(), func(context.Context, etcd.Event) error {
				if n++; n == b.N {
					return stream.ErrStop
				}
				return nil
			})
			b.StopTimer()
			writers.Wait()
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// BenchmarkClusterSaveFenced measures a fenced Save (as NewOwnerStore
// makes it) against the three-member cluster, and reports its latency's
// 50th and 99th percentiles.
func BenchmarkClusterSaveFenced(b *testing.B) {
	c := cluster.Start(b, 3)
	cl := c.Client(b)
	ctx := context.Background()
	resp, err := cl.Put(ctx, "/bench/owner", "me")
	if err != nil {
		b.Fatal(err)
	}
	fence := clientv3.Compare(clientv3.CreateRevision("/bench/owner"), "=", resp.Header.Revision)
	s, err := etcd.NewStore(cl, "/bench/cursor", cursor.JSON[etcd.Cursor](), etcd.Cursor{}, etcd.WithFence(fence))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := s.Load(ctx); err != nil {
		b.Fatal(err)
	}
	lat := make([]time.Duration, 0, b.N)
	i := 0
	for b.Loop() {
		i++
		t0 := time.Now()
		if err := s.Save(ctx, etcd.Cursor{Revision: int64(i), Index: 1}); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

func revision(b *testing.B, c *clientv3.Client) int64 {
	resp, err := c.Get(context.Background(), "/", clientv3.WithCountOnly())
	if err != nil {
		b.Fatal(err)
	}
	return resp.Header.Revision
}
