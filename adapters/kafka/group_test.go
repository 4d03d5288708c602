package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/resumable-go/resumable/adapters/kafka"
	"github.com/resumable-go/resumable/backoff"
	"github.com/resumable-go/resumable/errclass"
	"github.com/resumable-go/resumable/stream"
)

// Under WithConcurrency, records of one key never overlap and come in
// offset order; every record is handled once, and the final commit is the
// end of every partition.
func TestGroupOrderPerKeyUnderConcurrency(t *testing.T) {
	const n, keys = 2000, 20
	c := newCluster(t, 4, "orders")
	c.produce(t, records("orders", 4, n, keys)...)
	g := c.group(t, "billing", []string{"orders"}, kafka.WithFetchBuffer(16))

	var (
		l       log
		mu      sync.Mutex
		busy    = map[string]bool{} // partition/key in the handler
		overlap atomic.Int64
		last    = map[string]int64{} // partition/key → last offset handled
		regress atomic.Int64
	)
	r := start(g, func(ctx context.Context, rec *kgo.Record) error {
		k := fmt.Sprintf("%d/%s", rec.Partition, rec.Key)
		mu.Lock()
		if busy[k] {
			overlap.Add(1)
		}
		busy[k] = true
		if o, ok := last[k]; ok && rec.Offset <= o {
			regress.Add(1)
		}
		last[k] = rec.Offset
		mu.Unlock()
		time.Sleep(50 * time.Microsecond) // work, so that handlers overlap
		mu.Lock()
		busy[k] = false
		mu.Unlock()
		l.add("a", rec)
		return nil
	}, stream.WithConcurrency(8))
	eventually(t, "every record handled", func() bool { return l.len() >= n })
	if err := r.stop(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run() = %v, want %v", err, context.Canceled)
	}
	if p := g.Partitions(); p != nil {
		t.Errorf("Partitions() after Run = %v, want none", p)
	}
	if overlap.Load() != 0 || regress.Load() != 0 {
		t.Errorf("records of one key overlapped %d times and went backwards %d times, want 0 and 0", overlap.Load(), regress.Load())
	}
	if got := l.len(); got != n {
		t.Errorf("handled %d records, want %d (each once)", got, n)
	}
	if diff := cmp.Diff(c.ends(t, "orders"), c.committed(t, "billing", "orders")); diff != "" {
		t.Errorf("committed offsets (-end +committed):\n%s", diff)
	}
}

// A slow record holds its partition's commit at its own offset while the
// records after it finish; once it finishes, the commit jumps to the end.
func TestGroupCommitsOnlyThePrefix(t *testing.T) {
	c := newCluster(t, 1, "orders")
	recs := records("orders", 1, 10, 10)
	recs[3].Key = []byte("slow")
	c.produce(t, recs...)
	g := c.group(t, "billing", []string{"orders"})

	release := make(chan struct{})
	var l log
	r := start(g, func(ctx context.Context, rec *kgo.Record) error {
		if string(rec.Key) == "slow" {
			<-release
		}
		l.add("a", rec)
		return nil
	}, stream.WithConcurrency(4))
	defer func() {
		if err := r.stop(); !errors.Is(err, context.Canceled) {
			t.Errorf("Run() = %v, want %v", err, context.Canceled)
		}
	}()
	eventually(t, "the records but the slow one handled", func() bool { return l.len() == 9 })
	eventually(t, "the commit at the slow record", func() bool {
		at := c.committed(t, "billing", "orders")[0]
		if at > 3 {
			t.Fatalf("committed offset %d while offset 3 is in the handler, want at most 3", at)
		}
		// The broker holds the commit before the member records it.
		p := g.Partitions()
		return at == 3 && len(p) == 1 && p[0].Committed == 3
	})
	want := []kafka.PartitionStats{{Topic: "orders", Partition: 0, HighWatermark: 10, Handled: 3, Committed: 3, Lag: 7, InFlight: 7}}
	if diff := cmp.Diff(want, g.Partitions()); diff != "" {
		t.Errorf("Partitions() (-want +got):\n%s", diff)
	}
	close(release)
	eventually(t, "the commit at the end", func() bool { return c.committed(t, "billing", "orders")[0] == 10 })
	eventually(t, "no lag", func() bool { p := g.Partitions(); return len(p) == 1 && p[0].Lag == 0 && p[0].InFlight == 0 })
}

// A record that always fails is retried in place, then produced to the
// dead-letter topic with its key, value and headers naming where it came
// from; the partition is committed past it.
func TestGroupDeadLetter(t *testing.T) {
	c := newCluster(t, 2, "orders", "orders.parked")
	recs := records("orders", 2, 40, 8)
	poison := map[string]bool{}
	for _, i := range []int{5, 17, 30} {
		recs[i].Value = fmt.Appendf(nil, "poison %d", i)
		poison[string(recs[i].Value)] = true
	}
	c.produce(t, recs...)
	g := c.group(t, "billing", []string{"orders"})

	var l log
	var tries atomic.Int64
	r := start(g, func(ctx context.Context, rec *kgo.Record) error {
		if poison[string(rec.Value)] {
			tries.Add(1)
			return errors.New("poison")
		}
		l.add("a", rec)
		return nil
	}, stream.WithConcurrency(4),
		stream.WithHandlerRetry(3, backoff.Constant(time.Millisecond)),
		stream.WithDeadLetter(kafka.DeadLetter(c.cl, "orders.parked")))
	eventually(t, "the commit at the end", func() bool {
		return cmp.Equal(c.ends(t, "orders"), c.committed(t, "billing", "orders"))
	})
	if err := r.stop(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run() = %v, want %v", err, context.Canceled)
	}
	if got, want := l.len(), 40-len(poison); got != want {
		t.Errorf("handled %d records, want %d", got, want)
	}
	if got := tries.Load(); got != 3*int64(len(poison)) {
		t.Errorf("poison tries = %d, want %d", got, 3*len(poison))
	}

	// The dead-letter topic holds the poison records, and only them.
	parked := consumeAll(t, c, "orders.parked", len(poison))
	for _, p := range parked {
		if !poison[string(p.Value)] {
			t.Errorf("parked %q, not a poison record", p.Value)
		}
		h := map[string]string{}
		for _, kv := range p.Headers {
			h[kv.Key] = string(kv.Value)
		}
		var i int
		fmt.Sscanf(string(p.Value), "poison %d", &i)
		want := map[string]string{
			kafka.HeaderTopic: "orders", kafka.HeaderPartition: fmt.Sprint(i % 2),
			kafka.HeaderOffset: fmt.Sprint(i / 2), kafka.HeaderError: h[kafka.HeaderError],
		}
		if diff := cmp.Diff(want, h); diff != "" || string(p.Key) != string(recs[i].Key) || h[kafka.HeaderError] == "" {
			t.Errorf("parked record %d: key %q (want %q), headers (-want +got):\n%s", i, p.Key, recs[i].Key, diff)
		}
	}
}

// consumeAll reads the n records of topic, from the start, and checks that
// there are no more.
func consumeAll(t *testing.T, c *cluster, topic string, n int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.addrs...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var got []*kgo.Record
	ends := c.ends(t, topic)
	var total int64
	for _, e := range ends {
		total += e
	}
	if total != int64(n) {
		t.Errorf("topic %s holds %d records, want %d", topic, total, n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for int64(len(got)) < total {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		got = append(got, fs.Records()...)
	}
	return got
}

// A graceful stop commits exactly what was handled: the next Run starts
// right after it, handling nothing twice and skipping nothing.
func TestGroupRestartResumesFromCommittedOffsets(t *testing.T) {
	const n = 200
	c := newCluster(t, 2, "orders")
	c.produce(t, records("orders", 2, n, 7)...)

	var first log
	ctx, cancel := context.WithCancel(context.Background())
	g := c.group(t, "billing", []string{"orders"})
	err := g.Run(ctx, func(_ context.Context, rec *kgo.Record) error {
		first.add("first", rec)
		if first.len() == n/3 {
			cancel() // the records in flight finish and are committed
		}
		return nil
	}, stream.WithConcurrency(4))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run() = %v, want %v", err, context.Canceled)
	}
	committed := c.committed(t, "billing", "orders")

	var second log
	g2 := c.group(t, "billing", []string{"orders"})
	r := start(g2, func(_ context.Context, rec *kgo.Record) error {
		second.add("second", rec)
		return nil
	}, stream.WithConcurrency(4))
	eventually(t, "the rest handled", func() bool { return first.len()+second.len() >= n })
	if err := r.stop(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run() = %v, want %v", err, context.Canceled)
	}

	seen := map[[2]int64]string{}
	for _, h := range append(first.snapshot(), second.snapshot()...) {
		k := [2]int64{int64(h.partition), h.offset}
		if was, ok := seen[k]; ok {
			t.Errorf("partition %d offset %d handled by %s and %s", h.partition, h.offset, was, h.member)
		}
		seen[k] = h.member
		if h.member == "second" && h.offset < committed[h.partition] {
			t.Errorf("second run handled partition %d offset %d, below the committed %d", h.partition, h.offset, committed[h.partition])
		}
	}
	if len(seen) != n {
		t.Errorf("handled %d distinct records, want %d", len(seen), n)
	}
}

// A committed offset that retention deleted is reported as an expired
// cursor, never silently reset.
func TestGroupOffsetOutOfRange(t *testing.T) {
	c := newCluster(t, 1, "orders")
	c.produce(t, records("orders", 1, 10, 1)...)
	var os kadm.Offsets
	os.AddOffset("orders", 0, 2, -1)
	if _, err := c.adm.CommitOffsets(context.Background(), "billing", os); err != nil {
		t.Fatal(err)
	}
	var del kadm.Offsets
	del.AddOffset("orders", 0, 8, -1)
	if _, err := c.adm.DeleteRecords(context.Background(), del); err != nil {
		t.Fatal(err)
	}
	g := c.group(t, "billing", []string{"orders"})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var l log
	err := g.Run(ctx, func(_ context.Context, rec *kgo.Record) error {
		l.add("a", rec)
		return nil
	})
	if !errors.Is(err, errclass.ErrExpired) {
		t.Fatalf("Run() = %v, want an error matching %v", err, errclass.ErrExpired)
	}
	if l.len() != 0 {
		t.Errorf("handled %d records after a lost offset, want 0", l.len())
	}
	if got := c.committed(t, "billing", "orders")[0]; got != 2 {
		t.Errorf("committed offset = %d, want 2 (untouched)", got)
	}
}

// A partition whose stream is stuck (its window full behind one record)
// stops fetching, and the member's other partitions go on meanwhile.
func TestGroupPausesAStuckPartition(t *testing.T) {
	const n = 400
	c := newCluster(t, 2, "orders")
	recs := records("orders", 2, n, 20)
	recs[0].Key = []byte("stuck") // partition 0, offset 0
	c.produce(t, recs...)
	g := c.group(t, "billing", []string{"orders"}, kafka.WithFetchBuffer(8))

	release := make(chan struct{})
	var l log
	r := start(g, func(ctx context.Context, rec *kgo.Record) error {
		if string(rec.Key) == "stuck" {
			<-release
		}
		l.add("a", rec)
		return nil
	}, stream.WithConcurrency(2), stream.WithWindow(4))
	eventually(t, "partition 1 handled while partition 0 is stuck", func() bool {
		p1 := 0
		for _, h := range l.snapshot() {
			if h.partition == 1 {
				p1++
			}
		}
		return p1 == n/2
	})
	eventually(t, "fetching partition 0 paused", func() bool { return g.Stats().Pauses > 0 })
	for _, h := range l.snapshot() {
		if h.partition == 0 && h.offset > 4 {
			t.Errorf("partition 0 offset %d handled while offset 0 is stuck and the window is 4", h.offset)
		}
	}
	close(release)
	eventually(t, "every record handled", func() bool { return l.len() >= n })
	if err := r.stop(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run() = %v, want %v", err, context.Canceled)
	}
	if diff := cmp.Diff(c.ends(t, "orders"), c.committed(t, "billing", "orders")); diff != "" {
		t.Errorf("committed offsets (-end +committed):\n%s", diff)
	}
}

// RunBatch hands over runs of a partition's consecutive records and
// commits after each batch.
func TestGroupRunBatch(t *testing.T) {
	const n = 300
	c := newCluster(t, 2, "orders")
	c.produce(t, records("orders", 2, n, 10)...)
	g := c.group(t, "billing", []string{"orders"})

	var mu sync.Mutex
	next := map[int32]int64{} // partition → the next offset expected
	var batches, total atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- g.RunBatch(ctx, func(_ context.Context, rs []*kgo.Record) error {
			mu.Lock()
			defer mu.Unlock()
			for _, r := range rs {
				if r.Partition != rs[0].Partition || r.Offset != next[r.Partition] {
					t.Errorf("batch: partition %d offset %d, want partition %d offset %d", r.Partition, r.Offset, rs[0].Partition, next[rs[0].Partition])
				}
				next[r.Partition] = r.Offset + 1
			}
			batches.Add(1)
			total.Add(int64(len(rs)))
			return nil
		}, stream.WithBatch(50, 0))
	}()
	eventually(t, "the commit at the end", func() bool {
		return cmp.Equal(c.ends(t, "orders"), c.committed(t, "billing", "orders"))
	})
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("RunBatch() = %v, want %v", err, context.Canceled)
	}
	if total.Load() != n || batches.Load() < n/50 {
		t.Errorf("%d records in %d batches, want %d in at least %d", total.Load(), batches.Load(), n, n/50)
	}
}

func TestGroupRunBatchRefusesConcurrency(t *testing.T) {
	g, err := kafka.NewGroup([]string{"127.0.0.1:1"}, "g", []string{"t"})
	if err != nil {
		t.Fatal(err)
	}
	handle := func(context.Context, []*kgo.Record) error { return nil }
	if err := g.RunBatch(context.Background(), handle, stream.WithConcurrency(4)); !errors.Is(err, stream.ErrInvalidOption) {
		t.Errorf("RunBatch(WithConcurrency(4)) = %v, want an error matching %v", err, stream.ErrInvalidOption)
	}
}
