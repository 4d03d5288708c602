package redis_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/resumable-go/resumable/adapters/redis"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/internal/testkit/redistest"
	"github.com/resumable-go/resumable/stream"
)

// fill adds n small entries to key, in pipelines of 1000.
func fill(b *testing.B, rdb *goredis.Client, key string, n int) {
	b.Helper()
	for done := 0; done < n; {
		k := min(1000, n-done)
		_, err := rdb.Pipelined(context.Background(), func(p goredis.Pipeliner) error {
			for range k {
				p.XAdd(context.Background(), &goredis.XAddArgs{Stream: key, Values: []string{"k", "v"}})
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		done += k
	}
}

// keys counts the streams the benchmarks made, so that each run has its own.
var keys atomic.Int64

func newKey(b *testing.B) string { return fmt.Sprintf("%s-%d", b.Name(), keys.Add(1)) }

func benchServer(b *testing.B) *goredis.Client {
	srv := redistest.Start(b)
	rdb := goredis.NewClient(&goredis.Options{Addr: srv.Addr})
	b.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// A side is one way of consuming n entries of the stream key, which
// holds them (a group's side makes its group there first): it sets up
// what it needs, untimed, and returns the timed run.
type side func(b *testing.B, rdb *goredis.Client, key string, n int) (run func() error)

// groupSide consumes with a Group and a handler that does nothing
// (NewGroupResumer, defaults).
func groupSide(b *testing.B, rdb *goredis.Client, key string, n int) func() error {
	g, err := redis.NewGroup(rdb, key, "g", "c1", redis.WithCount(int(*readCount)))
	if err != nil {
		b.Fatal(err)
	}
	r, err := redis.NewGroupResumer(g)
	if err != nil {
		b.Fatal(err)
	}
	return func() error {
		seen := 0
		return r.Run(context.Background(), g.Handler(func(context.Context, redis.Entry) error {
			if seen++; seen == n {
				return stream.ErrStop
			}
			return nil
		}))
	}
}

// groupLoop is the plain go-redis loop a Group replaces: XREADGROUP COUNT
// 100 BLOCK 1s, then one XACK of the batch.
func groupLoop(b *testing.B, rdb *goredis.Client, key string, n int) func() error {
	ctx := context.Background()
	if err := rdb.XGroupCreate(ctx, key, "g", "0").Err(); err != nil {
		b.Fatal(err)
	}
	return func() error {
		for seen := 0; seen < n; {
			res, err := rdb.XReadGroup(ctx, &goredis.XReadGroupArgs{Group: "g", Consumer: "c1", Streams: []string{key, ">"}, Count: *readCount, Block: time.Second}).Result()
			if err != nil {
				return err
			}
			ids := make([]string, 0, len(res[0].Messages))
			for _, m := range res[0].Messages {
				ids = append(ids, m.ID)
				seen++
			}
			if err := rdb.XAck(ctx, key, "g", ids...).Err(); err != nil {
				return err
			}
		}
		return nil
	}
}

// sourceSide reads with a Source, its cursor in memory, and a handler that
// does nothing (NewResumer, defaults: its reads grow through a backlog).
func sourceSide(b *testing.B, rdb *goredis.Client, key string, n int) func() error {
	return resumerSide(b, rdb, key, n, nil)
}

// fileSide is sourceSide with its cursor in a cursor.File, as docs/redis.md
// shows it: NewResumer saves it at most every 100ms.
func fileSide(b *testing.B, rdb *goredis.Client, key string, n int) func() error {
	store, err := cursor.NewFile(filepath.Join(b.TempDir(), "cursor"), "", cursor.String())
	if err != nil {
		b.Fatal(err)
	}
	src, err := redis.NewSource(rdb, key)
	if err != nil {
		b.Fatal(err)
	}
	return runner(b, src, store, n)
}

// fixedSide is sourceSide with WithCount(-read-count): every read asks for
// as many entries as the plain loop's.
func fixedSide(b *testing.B, rdb *goredis.Client, key string, n int) func() error {
	return resumerSide(b, rdb, key, n, nil, redis.WithCount(int(*readCount)))
}

// scriptSide is fixedSide with the stream's identity read by the script
// before every read, as with large entries.
func scriptSide(b *testing.B, rdb *goredis.Client, key string, n int) func() error {
	return resumerSide(b, rdb, key, n, redis.UseScript, redis.WithCount(int(*readCount)))
}

// resumerSide is sourceSide with opts, the Source set up by tune (when not
// nil).
func resumerSide(b *testing.B, rdb *goredis.Client, key string, n int, tune func(*redis.Source), opts ...redis.Option) func() error {
	src, err := redis.NewSource(rdb, key, opts...)
	if err != nil {
		b.Fatal(err)
	}
	if tune != nil {
		tune(src)
	}
	return runner(b, src, cursor.NewMemory(""), n)
}

// runner returns the timed run of a Resumer over src (NewResumer's defaults)
// with its cursor in store and a handler that does nothing, over n
// entries.
func runner(b *testing.B, src *redis.Source, store cursor.Store[string], n int) func() error {
	r, err := redis.NewResumer(src, store)
	if err != nil {
		b.Fatal(err)
	}
	return func() error {
		seen := 0
		return r.Run(context.Background(), func(context.Context, redis.Entry) error {
			if seen++; seen == n {
				return stream.ErrStop
			}
			return nil
		})
	}
}

// connSide reads with a Source's connection alone, Recv in a loop without
// a Resumer: what the adapter adds to the plain loop, apart from the
// stream's own work.
func connSide(b *testing.B, rdb *goredis.Client, key string, n int) func() error {
	src, err := redis.NewSource(rdb, key, redis.WithCount(int(*readCount)))
	if err != nil {
		b.Fatal(err)
	}
	return func() error {
		ctx := context.Background()
		c, err := src.Open(ctx, "")
		if err != nil {
			return err
		}
		defer c.Close()
		for range n {
			if _, err := c.Recv(ctx); err != nil {
				return err
			}
		}
		return nil
	}
}

// sourceLoop is the plain go-redis loop a Source replaces: XREAD COUNT
// -read-count (100) BLOCK 1s from the last ID read.
func sourceLoop(b *testing.B, rdb *goredis.Client, key string, n int) func() error {
	return loopAt(*readCount)(b, rdb, key, n)
}

// loopAt is sourceLoop with COUNT count.
func loopAt(count int64) side {
	return func(_ *testing.B, rdb *goredis.Client, key string, n int) func() error {
		return func() error {
			ctx := context.Background()
			last := "0-0"
			for seen := 0; seen < n; {
				res, err := rdb.XRead(ctx, &goredis.XReadArgs{Streams: []string{key, last}, Count: count, Block: time.Second}).Result()
				if err != nil {
					return err
				}
				for _, m := range res[0].Messages {
					last = m.ID
					seen++
				}
			}
			return nil
		}
	}
}

// bench runs one side over b.N entries of a stream of its own.
func bench(b *testing.B, s side) {
	rdb := benchServer(b)
	key := newKey(b)
	fill(b, rdb, key, b.N)
	run := s(b, rdb, key, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	defer reportCPU(b)()
	if err := run(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkGroup consumes b.N entries with a Group and a handler that does
// nothing, beside the plain go-redis loop it replaces; BenchmarkPaired
// compares them.
func BenchmarkGroup(b *testing.B) {
	b.Run("resumable", func(b *testing.B) { bench(b, groupSide) })
	b.Run("go-redis-loop", func(b *testing.B) { bench(b, groupLoop) })
}

// BenchmarkSource reads b.N entries with a Source (its cursor in memory)
// and a handler that does nothing (with its defaults, and at
// WithCount(-read-count)), with the Source's connection alone, and with
// the plain go-redis loop it replaces; BenchmarkPaired compares them.
func BenchmarkSource(b *testing.B) {
	b.Run("resumable", func(b *testing.B) { bench(b, sourceSide) })
	b.Run("fixed", func(b *testing.B) { bench(b, fixedSide) })
	b.Run("conn", func(b *testing.B) { bench(b, connSide) })
	b.Run("go-redis-loop", func(b *testing.B) { bench(b, sourceLoop) })
}

var (
	pairs     = flag.Int("pairs", 12, "rounds of BenchmarkPaired")
	readCount = flag.Int64("read-count", 100, "COUNT of the plain loops' reads, and WithCount of the group's and of the Source's fixed sides (conn, fixed, xinfo-script) in BenchmarkGroup, BenchmarkSource and BenchmarkPaired")
)

// BenchmarkPaired runs each adapter's side and the plain loop it replaces
// alternately, -pairs rounds of b.N entries a side in one process (one
// server, a fresh stream for each run, the order reversed every other
// round, a GC before each run), and reports the medians and ranges over
// the rounds of the ratios ours/theirs: throughput (x: above 1 is faster)
// and the client's CPU time per entry (cpu-x: getrusage, below 1 is
// cheaper), redis-server's (srv-cpu-x), and each side's median CPU and
// allocations per entry. source is the Source with its defaults against
// the plain loop at -read-count (100), source-1000 against the loop at
// COUNT 1000, fixed the Source at WithCount(-read-count) against the loop
// at -read-count, file the Source with its defaults and its cursor in a
// cursor.File against the loop at -read-count. Run it with
// -benchtime=20000x or more and -pairs 30 or more: the ratios of short
// runs are noise.
func BenchmarkPaired(b *testing.B) {
	tests := []struct {
		name         string
		ours, theirs side
	}{
		{name: "source", ours: sourceSide, theirs: sourceLoop},
		{name: "source-1000", ours: sourceSide, theirs: loopAt(1000)},
		{name: "file", ours: fileSide, theirs: sourceLoop},
		{name: "fixed", ours: fixedSide, theirs: sourceLoop},
		{name: "conn", ours: connSide, theirs: sourceLoop},
		{name: "xinfo-script", ours: fixedSide, theirs: scriptSide},
		{name: "group", ours: groupSide, theirs: groupLoop},
	}
	for _, tt := range tests {
		b.Run(tt.name, func(b *testing.B) {
			rdb := benchServer(b)
			b.ReportAllocs()
			var x, cpuX, srvX, oursCPU, theirsCPU, oursAllocs, theirsAllocs []float64
			for i := range *pairs {
				first, second := tt.ours, tt.theirs
				if i%2 == 1 {
					first, second = second, first
				}
				a := measure(b, rdb, first)
				c := measure(b, rdb, second)
				if i%2 == 1 {
					a, c = c, a
				}
				x = append(x, float64(c.wall)/float64(a.wall))
				cpuX = append(cpuX, float64(a.cpu)/float64(c.cpu))
				srvX = append(srvX, float64(a.srvCPU)/float64(c.srvCPU))
				oursCPU = append(oursCPU, float64(a.cpu.Nanoseconds())/float64(b.N))
				theirsCPU = append(theirsCPU, float64(c.cpu.Nanoseconds())/float64(b.N))
				oursAllocs = append(oursAllocs, float64(a.allocs)/float64(b.N))
				theirsAllocs = append(theirsAllocs, float64(c.allocs)/float64(b.N))
			}
			slices.Sort(x)
			slices.Sort(cpuX)
			b.ReportMetric(median(x), "x")
			b.ReportMetric(x[0], "x-min")
			b.ReportMetric(x[len(x)-1], "x-max")
			b.ReportMetric(median(cpuX), "cpu-x")
			b.ReportMetric(cpuX[0], "cpu-x-min")
			b.ReportMetric(cpuX[len(cpuX)-1], "cpu-x-max")
			b.ReportMetric(median(srvX), "srv-cpu-x")
			b.ReportMetric(srvX[0], "srv-cpu-x-min")
			b.ReportMetric(srvX[len(srvX)-1], "srv-cpu-x-max")
			b.ReportMetric(median(oursCPU), "cpu-ns/entry-ours")
			b.ReportMetric(median(theirsCPU), "cpu-ns/entry-theirs")
			b.ReportMetric(median(oursAllocs), "allocs/entry-ours")
			b.ReportMetric(median(theirsAllocs), "allocs/entry-theirs")
		})
	}
}

// run is what one timed run took.
type run struct {
	wall, cpu, srvCPU time.Duration // srvCPU: redis-server's
	allocs            uint64
}

// measure runs s over b.N entries of a fresh stream, which it deletes
// after.
func measure(b *testing.B, rdb *goredis.Client, s side) run {
	b.StopTimer()
	key := newKey(b)
	fill(b, rdb, key, b.N)
	do := s(b, rdb, key, b.N)
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	allocs := ms.Mallocs
	cpu, srvCPU := cpuTime(), serverCPU(b, rdb)
	b.StartTimer()
	start := time.Now()
	err := do()
	wall := time.Since(start)
	b.StopTimer()
	cpu, srvCPU = cpuTime()-cpu, serverCPU(b, rdb)-srvCPU
	runtime.ReadMemStats(&ms)
	if err != nil {
		b.Fatal(err)
	}
	if err := rdb.Del(context.Background(), key).Err(); err != nil {
		b.Fatal(err)
	}
	b.StartTimer()
	return run{wall: wall, cpu: cpu, srvCPU: srvCPU, allocs: ms.Mallocs - allocs}
}

// serverCPU returns the CPU time redis-server used so far (INFO CPU: its
// user and system time).
func serverCPU(b *testing.B, rdb *goredis.Client) time.Duration {
	text, err := rdb.Info(context.Background(), "cpu").Result()
	if err != nil {
		b.Fatal(err)
	}
	var sum float64
	for _, line := range strings.Split(text, "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		if k == "used_cpu_sys" || k == "used_cpu_user" {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				b.Fatal(err)
			}
			sum += f
		}
	}
	return time.Duration(sum * float64(time.Second))
}

// median returns the median of sorted xs.
func median(xs []float64) float64 {
	slices.Sort(xs)
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}

// BenchmarkGroupConcurrency consumes b.N entries with a handler that takes
// 2ms, one at a time and 16 at a time.
func BenchmarkGroupConcurrency(b *testing.B) {
	rdb := benchServer(b)
	for _, n := range []int{1, 16} {
		b.Run(fmt.Sprintf("handlers=%d", n), func(b *testing.B) {
			key := newKey(b)
			fill(b, rdb, key, b.N)
			g, err := redis.NewGroup(rdb, key, "g", "c1")
			if err != nil {
				b.Fatal(err)
			}
			r, err := redis.NewGroupResumer(g, stream.WithConcurrency(n))
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			handled := make(chan struct{}, b.N)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() {
				done <- r.Run(ctx, g.Handler(func(context.Context, redis.Entry) error {
					time.Sleep(2 * time.Millisecond) // the handler's work
					handled <- struct{}{}
					return nil
				}))
			}()
			for range b.N {
				<-handled
			}
			b.StopTimer()
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				b.Fatal(err)
			}
		})
	}
}

// BenchmarkIdentity measures what the identity check adds to a Source's
// read: one op is a non-blocking XREAD from the start of a 100-entry
// stream, alone (as the plain loop reads; also in a pipeline of its own),
// in one round trip after the Source's script (EVALSHA), and after XINFO
// STREAM, whose whole reply (the first and last entries with their
// fields) go-redis parses (into its XInfoStream, or, with Do, into plain
// values); with entries of one 1-byte field, COUNT 100, and of one 16 KiB
// field, COUNT 100 and COUNT 1. It reports the client's and
// redis-server's CPU time per op.
func BenchmarkIdentity(b *testing.B) {
	rdb := benchServer(b)
	for _, shape := range []struct{ value, count int }{{1, 100}, {16 << 10, 100}, {16 << 10, 1}} {
		key := newKey(b)
		ctx := context.Background()
		_, err := rdb.Pipelined(ctx, func(p goredis.Pipeliner) error {
			for range 100 {
				p.XAdd(ctx, &goredis.XAddArgs{Stream: key, Values: []string{"k", strings.Repeat("v", shape.value)}})
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		read := func(ctx context.Context, p goredis.Cmdable) *goredis.XStreamSliceCmd {
			return p.XRead(ctx, &goredis.XReadArgs{Streams: []string{key, "0-0"}, Count: int64(shape.count), Block: -1})
		}
		for _, tt := range []struct {
			name string
			read func(ctx context.Context) error
		}{
			{name: "xread", read: func(ctx context.Context) error { return read(ctx, rdb).Err() }},
			{name: "pipelined-xread", read: func(ctx context.Context) error {
				var cmd *goredis.XStreamSliceCmd
				_, _ = rdb.Pipelined(ctx, func(p goredis.Pipeliner) error {
					cmd = read(ctx, p)
					return nil
				})
				return cmd.Err()
			}},
			{name: "script+xread", read: func(ctx context.Context) error {
				var cmd *goredis.XStreamSliceCmd
				err := redis.ReadIdentity(ctx, rdb, key, func(p goredis.Pipeliner) { cmd = read(ctx, p) })
				return errors.Join(err, cmd.Err())
			}},
			{name: "xinfo+xread", read: func(ctx context.Context) error {
				var info *goredis.XInfoStreamCmd
				var cmd *goredis.XStreamSliceCmd
				_, _ = rdb.Pipelined(ctx, func(p goredis.Pipeliner) error {
					info, cmd = p.XInfoStream(ctx, key), read(ctx, p)
					return nil
				})
				return errors.Join(info.Err(), cmd.Err())
			}},
			{name: "do-xinfo+xread", read: func(ctx context.Context) error {
				var info *goredis.Cmd
				var cmd *goredis.XStreamSliceCmd
				_, _ = rdb.Pipelined(ctx, func(p goredis.Pipeliner) error {
					info, cmd = p.Do(ctx, "XINFO", "STREAM", key), read(ctx, p)
					return nil
				})
				return errors.Join(info.Err(), cmd.Err())
			}},
		} {
			b.Run(fmt.Sprintf("%s/value=%dB/count=%d", tt.name, shape.value, shape.count), func(b *testing.B) {
				if err := tt.read(ctx); err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				runtime.GC()
				srv := serverCPU(b, rdb)
				b.ResetTimer()
				defer reportCPU(b)()
				for range b.N {
					if err := tt.read(ctx); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				b.ReportMetric(float64((serverCPU(b, rdb)-srv).Nanoseconds())/float64(b.N), "srv-cpu-ns/op")
			})
		}
	}
}
