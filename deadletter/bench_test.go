package deadletter_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/resumable-go/resumable/backoff"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/deadletter"
	"github.com/resumable-go/resumable/errclass"
	"github.com/resumable-go/resumable/stream"
)

// BenchmarkPoisonedStream runs 100,000 events through a Resumer with a
// handler retry policy that never waits and a dead-letter File: 1% of the
// events fail for good (parked after one try), 1% fail once and succeed on
// the second try. One op is the whole run. It checks that every other event
// was handled once and in order and every poison event parked exactly once,
// and reports the time per event and the share of the run spent in Park
// (its write and fsync).
func BenchmarkPoisonedStream(b *testing.B) {
	const (
		events   = 100_000
		pageSize = 1_000
	)
	log := make([]int64, events)
	for i := range log {
		log[i] = int64(i + 1)
	}
	fetch := func(_ context.Context, after int64) ([]int64, error) {
		if after >= events {
			return nil, stream.ErrEndOfStream
		}
		return log[after:min(after+pageSize, events)], nil
	}
	extract := func(e int64) (int64, error) { return e, nil }
	errPoison, errBlip := errors.New("poison"), errors.New("blip")
	dir := b.TempDir()

	var run, sink time.Duration
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		path := filepath.Join(dir, fmt.Sprintf("parked-%d.jsonl", i))
		dl, err := deadletter.Open(path, extract)
		if err != nil {
			b.Fatal(err)
		}
		park := func(ctx context.Context, e int64, err error) error {
			start := time.Now()
			err = dl.Park(ctx, e, err)
			sink += time.Since(start)
			return err
		}
		r, err := stream.New(stream.Pages(fetch), extract, cursor.NewMemory[int64](0),
			stream.WithBackoff(backoff.Constant(0)),
			stream.WithHandlerRetry(3, backoff.Constant(0)),
			stream.WithDeadLetter(park))
		if err != nil {
			b.Fatal(err)
		}
		blipped := make([]bool, events+1)
		var last, handled int64
		outOfOrder := 0
		handle := func(_ context.Context, e int64) error {
			switch {
			case e%100 == 0:
				return errclass.Permanent(errPoison)
			case e%100 == 50 && !blipped[e]:
				blipped[e] = true
				return errBlip
			}
			if e <= last {
				outOfOrder++
			}
			last = e
			handled++
			return nil
		}
		b.StartTimer()
		start := time.Now()
		err = r.Run(context.Background(), handle)
		run += time.Since(start)
		b.StopTimer()

		if err != nil {
			b.Fatalf("Run() = %v, want nil", err)
		}
		if err := dl.Close(); err != nil {
			b.Fatal(err)
		}
		st := r.Stats()
		if want := int64(events - events/100); handled != want || outOfOrder != 0 {
			b.Fatalf("handled %d events, %d out of order; want %d in order", handled, outOfOrder, want)
		}
		if st.Parked != events/100 || st.HandlerRetries != events/100 {
			b.Fatalf("Stats: Parked = %d, HandlerRetries = %d; want %d each", st.Parked, st.HandlerRetries, events/100)
		}
		parked := make(map[int64]int)
		for rec, err := range deadletter.Read[int64, int64](path) {
			if err != nil {
				b.Fatal(err)
			}
			if rec.Cursor%100 != 0 || rec.Event != rec.Cursor || rec.Tries != 1 {
				b.Fatalf("parked %+v, want only poison events, after one try", rec)
			}
			parked[rec.Cursor]++
		}
		for c, n := range parked {
			if n != 1 {
				b.Fatalf("event %d parked %d times, want once", c, n)
			}
		}
		if len(parked) != events/100 {
			b.Fatalf("%d events parked, want %d", len(parked), events/100)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(run.Nanoseconds())/float64(b.N*events), "ns/event")
	b.ReportMetric(100*sink.Seconds()/run.Seconds(), "%sink")
	b.ReportMetric(float64(sink.Nanoseconds())/float64(b.N*events/100), "ns/park")
}
