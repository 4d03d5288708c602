package kafka_test

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/resumable-go/resumable/adapters/kafka"
	"github.com/resumable-go/resumable/stream"
)

// benchCommitInterval is how often both loops of BenchmarkSerial commit:
// the first poll (the adapter: the first moved prefix) after this long
// since the last commit, and once at the end.
const benchCommitInterval = 20 * time.Millisecond

// benchClient are the franz-go options both loops of BenchmarkSerial
// fetch with (the adapter adds its own: start at the log's start, no
// reset, cooperative-sticky, which are also kgo's or the hand loop's).
func benchClient() []kgo.Opt {
	return []kgo.Opt{kgo.SessionTimeout(5 * time.Second), kgo.HeartbeatInterval(100 * time.Millisecond),
		kgo.RebalanceTimeout(10 * time.Second), kgo.FetchMaxWait(50 * time.Millisecond)}
}

// BenchmarkSerial reads a one-partition topic of 100,000 records through a
// fresh group member per pass, with a handler that does nothing: the
// adapter with one handler against the loop franz-go's examples show
// (PollFetches, handle, CommitRecords), with the same client options and
// the same commit cadence. A pass includes joining and leaving the group.
//
// "pairs" is the comparison: each of its rounds runs one pass of each, in
// turns (the adapter first in even rounds, the hand loop first in odd
// ones), and it reports the median, lowest and highest of the rounds'
// ratios (the hand loop's time over the adapter's: above 1, the adapter
// is faster), the median ratio of the CPU time the process spent (the
// cluster's share included), the median ratio of the times from the first
// record handled to the last (read-ratio: joining and leaving left out),
// and each loop's median records/s. It also prints, for each side, the
// median length and CPU time of each phase of a pass (the timeline's
// marks: client made, assignment, first batch read, first and last record
// handled, final commit, group left, closed) and the requests each phase
// made, both clients carrying the same kgo hooks. "resumable" and
// "franz-go" run one loop alone, for its allocations.
//
//	go test ./adapters/kafka -run '^$' -bench Serial/pairs -benchtime 30x
func BenchmarkSerial(b *testing.B) {
	const n = 100_000
	c := newCluster(b, 1, "orders")
	c.produce(b, records("orders", 1, n, 400)...)
	groups := 0
	resumable := func(b *testing.B) *timeline {
		groups++
		return consume(b, c, fmt.Sprintf("g%d", groups), n, kafka.WithCommitInterval(benchCommitInterval),
			kafka.WithClientOptions(benchClient()...))
	}
	franzGo := func(b *testing.B) *timeline {
		groups++
		return handWritten(b, c, fmt.Sprintf("g%d", groups), n)
	}
	b.Run("pairs", func(b *testing.B) {
		b.ReportAllocs()
		var ratios, cpuRatios, readRatios, ours, theirs []float64
		s := sides{names: [2]string{"resumable", "franz-go"}}
		for b.Loop() {
			loops := []func(*testing.B) *timeline{resumable, franzGo}
			if len(ratios)%2 == 1 {
				loops[0], loops[1] = loops[1], loops[0]
			}
			var took, cpu, read [2]time.Duration
			var tls [2]*timeline
			for i, loop := range loops {
				start, cpu0 := time.Now(), cpuTime(b)
				tls[i] = loop(b)
				took[i], cpu[i] = time.Since(start), cpuTime(b)-cpu0
			}
			if len(ratios)%2 == 1 {
				took[0], took[1] = took[1], took[0]
				cpu[0], cpu[1] = cpu[1], cpu[0]
				tls[0], tls[1] = tls[1], tls[0]
			}
			for i, tl := range tls {
				s.add(i, tl)
				wall, _ := tl.phases()
				read[i] = wall[markLast]
			}
			readRatios = append(readRatios, read[1].Seconds()/read[0].Seconds())
			ratios = append(ratios, took[1].Seconds()/took[0].Seconds())
			cpuRatios = append(cpuRatios, cpu[1].Seconds()/cpu[0].Seconds())
			ours = append(ours, n/took[0].Seconds())
			theirs = append(theirs, n/took[1].Seconds())
		}
		b.ReportMetric(median(ratios), "ratio")
		b.ReportMetric(slices.Min(ratios), "ratio-min")
		b.ReportMetric(slices.Max(ratios), "ratio-max")
		b.ReportMetric(median(cpuRatios), "cpu-ratio")
		b.ReportMetric(median(readRatios), "read-ratio")
		b.ReportMetric(median(ours), "resumable-records/s")
		b.ReportMetric(median(theirs), "franz-go-records/s")
		// Printed, not logged: a benchmark's log is cut at ten lines.
		fmt.Printf("%s: ratio %.3f (rounds %.3f to %.3f), cpu-ratio %.3f, read-ratio %.3f\n%s",
			b.Name(), median(ratios), slices.Min(ratios), slices.Max(ratios), median(cpuRatios), median(readRatios), s.table())
	})
	b.Run("resumable", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			resumable(b)
		}
		b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "records/s")
	})
	b.Run("franz-go", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			franzGo(b)
		}
		b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "records/s")
	})
}

// cpuTime returns the CPU time the process used so far (the cluster's
// share included: it runs in the process).
func cpuTime(b *testing.B) time.Duration {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		b.Fatal(err)
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}

// median returns the median of xs, which it sorts.
func median(xs []float64) float64 {
	slices.Sort(xs)
	if len(xs)%2 == 1 {
		return xs[len(xs)/2]
	}
	return (xs[len(xs)/2-1] + xs[len(xs)/2]) / 2
}

// BenchmarkWork reads 4,000 records of 400 keys on one partition, each
// handled in 2ms (a stand-in for a call to another service), with n
// handlers: Parallel Consumer's shape.
//
//	go test ./adapters/kafka -run '^$' -bench Work -benchtime 1x
func BenchmarkWork(b *testing.B) {
	const n = 4000
	c := newCluster(b, 1, "orders")
	c.produce(b, records("orders", 1, n, 400)...)
	groups := 0
	for _, handlers := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("n=%d", handlers), func(b *testing.B) {
			for b.Loop() {
				groups++
				consume(b, c, fmt.Sprintf("g%d", groups), n, stream.WithConcurrency(handlers),
					stream.WithWindow(max(64, 4*handlers)), work(2*time.Millisecond))
			}
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "records/s")
		})
	}
}

// work is an argument of consume: each handler call sleeps that long.
type work time.Duration

// consume runs a member of group until it handled n records, and returns
// its timeline; opts are stream.Options, kafka.Options or a work.
func consume(b *testing.B, c *cluster, group string, n int, opts ...any) *timeline {
	var d time.Duration
	var sopts []stream.Option
	var gopts []kafka.Option
	for _, o := range opts {
		switch o := o.(type) {
		case work:
			d = time.Duration(o)
		case stream.Option:
			sopts = append(sopts, o)
		case kafka.Option:
			gopts = append(gopts, o)
		default:
			b.Fatalf("consume: option %T", o)
		}
	}
	tl := newTimeline()
	g := c.group(b, group, []string{"orders"}, append(gopts, kafka.WithClientOptions(kgo.WithHooks(tl)))...)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var handled atomic.Int64
	err := g.Run(ctx, func(context.Context, *kgo.Record) error {
		if d > 0 {
			time.Sleep(d)
		}
		if tl.handled(int(handled.Add(1)), n) {
			cancel()
		}
		return nil
	}, sopts...)
	tl.mark(markClosed)
	if ctx.Err() == nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(g.Stats().Pauses), "pauses")
	return tl
}

// handWritten is the loop of franz-go's examples: poll, handle each
// record, commit the records polled (here at BenchmarkSerial's cadence),
// until n records were handled; then it commits and leaves the group.
func handWritten(b *testing.B, c *cluster, group string, n int) *timeline {
	tl := newTimeline()
	opts := append(benchClient(), kgo.SeedBrokers(c.addrs...), kgo.ConsumerGroup(group), kgo.ConsumeTopics("orders"),
		kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.WithHooks(tl))
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		b.Fatal(err)
	}
	defer tl.mark(markClosed)
	defer cl.Close()
	ctx := context.Background()
	handle := func(*kgo.Record) error { return nil }
	var last *kgo.Record // the last record handled and not committed
	committed := time.Now()
	for handled := 0; handled < n; {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			b.Fatal(err)
		}
		for it := fs.RecordIter(); !it.Done(); {
			r := it.Next()
			if err := handle(r); err != nil {
				b.Fatal(err)
			}
			handled, last = handled+1, r
			tl.handled(handled, n)
		}
		if last != nil && (handled >= n || time.Since(committed) >= benchCommitInterval) {
			if err := cl.CommitRecords(ctx, last); err != nil {
				b.Fatal(err)
			}
			last, committed = nil, time.Now()
		}
	}
	return tl
}
