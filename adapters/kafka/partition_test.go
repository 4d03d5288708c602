package kafka

import (
	"context"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/resumable-go/resumable/stream"
)

// fetch returns n records of partition 0 from offset from on, as a fetch
// hands them over.
func fetch(from int64, n int) []*kgo.Record {
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: "orders", Offset: from + int64(i), Key: []byte("k")}
	}
	return recs
}

// offsets returns the offsets of what take returns until nothing is
// queued.
func offsets(t *testing.T, p *partition) []int64 {
	t.Helper()
	var got []int64
	for {
		r, ok, err := p.take()
		if err != nil {
			t.Fatalf("take() = %v", err)
		}
		if !ok {
			return got
		}
		got = append(got, r.Offset)
	}
}

// A partition hands each fetched record over once, in offset order: a
// fetch that repeats records queued already adds only the new ones, and
// fetches queued while the reader reads are taken after those it holds.
func TestPartitionHandsOverFetches(t *testing.T) {
	p := newPartition(nil, topicPartition{topic: "orders"}, 100, func() {})
	p.push(fetch(0, 3), 10)
	p.push(fetch(1, 4), 10) // 1 and 2 again
	if r, _, _ := p.take(); r.Offset != 0 {
		t.Fatalf("take() = offset %d, want 0", r.Offset)
	}
	p.push(fetch(5, 2), 10)
	if got := p.queued(); got != 6 {
		t.Errorf("queued() = %d, want 6", got)
	}
	got := offsets(t, p)
	want := []int64{1, 2, 3, 4, 5, 6}
	if len(got) != len(want) {
		t.Fatalf("offsets taken = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("offsets taken = %v, want %v", got, want)
		}
	}
	if got := p.queued(); got != 0 {
		t.Errorf("queued() = %d, want 0", got)
	}
}

// A fetch error is handed over once the records queued before it were
// read, and once; a stopped partition ends the stream whatever it holds.
func TestPartitionFailureAfterRecordsThenStop(t *testing.T) {
	p := newPartition(nil, topicPartition{topic: "orders"}, 100, func() {})
	p.cancel = func() {}
	p.push(fetch(0, 1), 1)
	boom := errors.New("boom")
	p.fail(boom)
	p.push(fetch(1, 1), 2) // fetched after the error, read before it
	for _, want := range []int64{0, 1} {
		if r, ok, err := p.take(); !ok || err != nil || r.Offset != want {
			t.Fatalf("take() = %v, %v, %v, want offset %d", r, ok, err, want)
		}
	}
	if _, ok, err := p.take(); !ok || !errors.Is(err, boom) {
		t.Fatalf("take() = %v, %v, want %v", ok, err, boom)
	}
	if _, ok, err := p.take(); ok || err != nil {
		t.Fatalf("take() after the error = %v, %v, want nothing", ok, err)
	}
	p.push(fetch(3, 5), 8)
	p.stop(false)
	if _, ok, err := p.take(); !ok || !errors.Is(err, stream.ErrEndOfStream) {
		t.Fatalf("take() after stop = %v, %v, want %v", ok, err, stream.ErrEndOfStream)
	}
}

// Far above the buffer the reader counts its reads in batches; from the
// buffer down it counts each, so that the poll loop waiting for room is
// woken by the read that takes the queue below the buffer, and not before.
func TestPartitionCountsReadsInBatchesAboveTheBuffer(t *testing.T) {
	const buffer, n = 100, 1000
	p := newPartition(nil, topicPartition{topic: "orders"}, buffer, func() {})
	p.push(fetch(0, n), n)
	take := func(k int) {
		t.Helper()
		for range k {
			if _, ok, err := p.take(); !ok || err != nil {
				t.Fatalf("take() = %v, %v, want a record", ok, err)
			}
		}
	}
	take(500)
	if got := p.queued(); got < 500 || got >= 500+readBatch {
		t.Errorf("queued() after 500 of %d reads = %d, want 500 to %d", n, got, 500+readBatch-1)
	}
	take(n - 500 - buffer)
	if got := p.queued(); got != buffer {
		t.Errorf("queued() at the buffer = %d, want %d", got, buffer)
	}
	select {
	case <-p.room:
		t.Fatal("room signalled with the buffer still queued")
	default:
	}
	take(1)
	if got := p.queued(); got != buffer-1 {
		t.Errorf("queued() below the buffer = %d, want %d", got, buffer-1)
	}
	select {
	case <-p.room:
	default:
		t.Fatal("room not signalled by the read that took the queue below the buffer")
	}
}

// The offset to commit is the partition's stream's committed cursor + 1,
// and nothing before that stream committed a record (its Stats.Cursor is
// then the zero value, or the loaded -1).
func TestPartitionCommitsWhatItsStreamCommitted(t *testing.T) {
	p := newPartition(nil, topicPartition{topic: "orders"}, 100, func() {})
	r, err := (&member{g: &Group{}}).resumer(p)
	if err != nil {
		t.Fatal(err)
	}
	p.r = r
	if off, ok := p.toCommit(); ok {
		t.Fatalf("toCommit() before the stream ran = %d, true, want nothing to commit", off)
	}
	p.push(fetch(0, 3), 3)
	handled := 0
	err = r.Run(context.Background(), func(context.Context, *kgo.Record) error {
		if handled++; handled == 3 {
			return stream.ErrStop
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Run() = %v, want nil", err)
	}
	if off, ok := p.toCommit(); !ok || off != 3 {
		t.Fatalf("toCommit() after 3 records = %d, %v, want 3, true", off, ok)
	}
	p.committedAt(3)
	if off, ok := p.toCommit(); ok {
		t.Fatalf("toCommit() after committing 3 = %d, true, want nothing to commit", off)
	}
}

// The per-record path allocates nothing: queueing a fetch, taking its
// records and saving each record's offset.
func TestPartitionPerRecordAllocatesNothing(t *testing.T) {
	const runs, n = 50, 200
	fetches := make([][]*kgo.Record, runs+1) // AllocsPerRun runs once more to warm up
	for i := range fetches {
		fetches[i] = fetch(int64(i*n), n)
	}
	p := newPartition(nil, topicPartition{topic: "orders"}, 4*n, func() {})
	ctx := context.Background()
	i := 0
	allocs := testing.AllocsPerRun(runs, func() {
		p.push(fetches[i], int64((i+1)*n))
		i++
		for {
			r, ok, err := p.take()
			if !ok || err != nil {
				break
			}
			_ = p.Save(ctx, r.Offset)
		}
	})
	if allocs != 0 {
		t.Errorf("allocations per fetch of %d records = %v, want 0", n, allocs)
	}
	if got, want := p.read.Load(), int64((runs+1)*n); got != want || p.queued() != 0 {
		t.Errorf("read = %d, queued = %d, want %d and 0 (every record read and counted)", got, p.queued(), want)
	}
}

// BenchmarkRecordPath is the adapter's own cost per record, with no
// cluster: a partition's stream (one handler doing nothing, the options
// Run gives it) reads fetches that a feeder queues as the poll loop does
// (the next fetch once fewer than the buffer are queued). "small" has
// fetches of 500 records and a buffer of 2,000: the queue stays below the
// buffer, where each read is counted at once. "backlog" has fetches of
// 8,192 records (a fetch of small records under kgo's default byte limits)
// and the default buffer of 512: most reads are counted in batches.
//
//	go test ./adapters/kafka -run '^$' -bench RecordPath
func BenchmarkRecordPath(b *testing.B) {
	for _, c := range []struct {
		name         string
		size, buffer int
	}{
		{name: "small", size: 500, buffer: 2000},
		{name: "backlog", size: 8192, buffer: defaultFetchBuffer},
	} {
		b.Run(c.name, func(b *testing.B) { benchRecordPath(b, c.size, c.buffer) })
	}
}

// benchRecordPath reads b.N records in fetches of size through a
// partition of buffer.
func benchRecordPath(b *testing.B, size, buffer int) {
	const ring = 16 // a fetch is reused once the stream read it
	p := newPartition(nil, topicPartition{topic: "orders"}, buffer, func() {})
	r, err := (&member{g: &Group{}}).resumer(p)
	if err != nil {
		b.Fatal(err)
	}
	fetches := make([][]*kgo.Record, ring)
	for i := range fetches {
		fetches[i] = fetch(0, size)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fed := make(chan struct{})
	b.ReportAllocs()
	b.ResetTimer()
	go func() {
		defer close(fed)
		for i := 0; i*size < b.N; i++ {
			for p.full() {
				select {
				case <-p.room:
				case <-ctx.Done():
					return
				}
			}
			f := fetches[i%ring]
			for j, rec := range f {
				rec.Offset = int64(i*size + j)
			}
			p.push(f, int64((i+1)*size))
		}
	}()
	handled := 0
	err = r.Run(ctx, func(context.Context, *kgo.Record) error {
		if handled++; handled == b.N {
			return stream.ErrStop
		}
		return nil
	})
	b.StopTimer()
	cancel()
	<-fed
	if err != nil {
		b.Fatal(err)
	}
}
