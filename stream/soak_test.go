package stream_test

// The soak, off by default:
//
//	go test ./stream -run TestSoak -soak=10m -timeout=15m
//	RESUMABLE_SOAK=10m go test ./stream -run TestSoak -timeout=15m -v
//
// 100 Resumers run at full speed over flaky sources whose logs never end
// (the handler appends the next batch when it reaches the end), with random
// faults of every kind, handler failures (a new Run, on a new Resumer or the
// same one, continues) and cancellations at random moments (each Run has a
// random timeout, and some connections block until it). Every few seconds
// it logs the live heap, the goroutines and the throughput; at the end it
// checks that they stayed flat and that no event was lost.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/resumable-go/resumable/backoff"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/stream"
	"github.com/resumable-go/resumable/stream/streamtest"
)

var (
	soakFor     = flag.Duration("soak", 0, "run the soak test for this long (or set RESUMABLE_SOAK); 0 skips it")
	soakWorkers = flag.Int("soak.workers", 100, "soak: Resumers running at once")
	soakEvery   = flag.Duration("soak.every", 5*time.Second, "soak: how often to log memory and goroutines")
)

// soakBatch is how many events a worker appends when it reaches the end of
// its log.
const soakBatch = 1_000

type soakEvent = streamtest.Event[struct{}] // zero-size values: the log costs no memory

// soakCounters are shared by the workers and read by the monitor.
type soakCounters struct {
	events, runs, fresh, handlerFails, opens atomic.Int64
}

type soakSample struct {
	at         time.Duration
	heap       uint64 // live heap after a GC
	goroutines int
	events     int64
}

func soakDuration(t *testing.T) time.Duration {
	d := *soakFor
	if env := os.Getenv("RESUMABLE_SOAK"); d == 0 && env != "" {
		var err error
		if d, err = time.ParseDuration(env); err != nil {
			t.Fatalf("RESUMABLE_SOAK=%q: %v", env, err)
		}
	}
	if deadline, ok := t.Deadline(); ok && d > 0 {
		if room := time.Until(deadline) - 30*time.Second; d > room {
			t.Logf("soak capped at %v by the test timeout; pass -timeout=%v for the full %v", room.Round(time.Second), (d + 5*time.Minute).Round(time.Minute), d)
			d = room
		}
	}
	return d
}

func TestSoak(t *testing.T) {
	d := soakDuration(t)
	if d <= 0 {
		t.Skip("the soak runs with -soak=DURATION or RESUMABLE_SOAK=DURATION")
	}
	seed := rand.Uint64() >> 16
	if *propSeed != 0 {
		seed = *propSeed
	}
	t.Logf("soak: %d Resumers for %v, seed %d", *soakWorkers, d, seed)

	ctx, stop := context.WithTimeout(context.Background(), d)
	defer stop()
	var counters soakCounters
	var wg sync.WaitGroup
	errs := make(chan error, *soakWorkers)
	for w := range *soakWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := soakWorker(ctx, seed+uint64(w), &counters); err != nil {
				errs <- fmt.Errorf("worker %d (seed %d): %w", w, seed+uint64(w), err)
				stop()
			}
		}()
	}

	start := time.Now()
	var samples []soakSample
	sample := func() soakSample {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		s := soakSample{at: time.Since(start), heap: m.HeapAlloc, goroutines: runtime.NumGoroutine(), events: counters.events.Load()}
		samples = append(samples, s)
		t.Logf("soak %6v: heap %6.1f MiB, %4d goroutines, %11d events (%d runs, %d Resumers, %d Opens, %d handler failures)",
			s.at.Round(time.Second), float64(s.heap)/(1<<20), s.goroutines, s.events,
			counters.runs.Load(), counters.fresh.Load(), counters.opens.Load(), counters.handlerFails.Load())
		return s
	}
	tick := time.NewTicker(*soakEvery)
	defer tick.Stop()
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-tick.C:
			sample()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if len(samples) < 3 {
		t.Logf("soak too short to judge flatness (%d samples)", len(samples))
		return
	}
	// Flat: judged against the sample after a warm-up of a tenth of the run.
	base := samples[len(samples)/10]
	var peak soakSample
	for _, s := range samples[len(samples)/10:] {
		peak.heap = max(peak.heap, s.heap)
		peak.goroutines = max(peak.goroutines, s.goroutines)
	}
	if limit := 2*base.heap + 16<<20; peak.heap > limit {
		t.Errorf("live heap grew from %d to %d bytes (limit %d): a leak", base.heap, peak.heap, limit)
	}
	if limit := base.goroutines + *soakWorkers + 10; peak.goroutines > limit {
		t.Errorf("goroutines grew from %d to %d (limit %d): a leak", base.goroutines, peak.goroutines, limit)
	}
	last := samples[len(samples)-1]
	t.Logf("soak: %d events in %v (%.0f/s), %d runs", last.events, last.at.Round(time.Second),
		float64(last.events)/last.at.Seconds(), counters.runs.Load())
}

// soakWorker runs Resumers over one flaky source until ctx ends. It
// returns the first violation of at-least-once, in order, no gap.
func soakWorker(ctx context.Context, seed uint64, counters *soakCounters) error {
	rng := rand.New(rand.NewPCG(seed, 7))
	kinds := []streamtest.Kind{
		streamtest.FailOpen, streamtest.EndAfter, streamtest.BreakAfter, streamtest.DelayAfter,
		streamtest.ExpireAfter, streamtest.FailOpen, streamtest.EndAfter, streamtest.BreakAfter,
		streamtest.DelayAfter, streamtest.ExpireAfter, streamtest.BlockAfter, // a block now and then
	}
	// Each run gets a fresh Source over a log as long as the last one's, so
	// that its fault script is fresh and its record of Opens stays small;
	// every Resumer opens whichever is current.
	newSource := func(n int) *streamtest.Source[struct{}] {
		s := streamtest.NewSource(make([]struct{}, n), streamtest.RandomScript(rng, 200, 150, 20*time.Microsecond, kinds...)...)
		s.SetEndOfLog(streamtest.Wait)
		return s
	}
	logLen := soakBatch // the length of the current log
	src := newSource(logLen)
	current := stream.SourceFunc[soakEvent, int64](func(ctx context.Context, after int64) (stream.Conn[soakEvent], error) {
		return src.Open(ctx, after)
	})
	store := cursor.NewMemory[int64](0)
	var (
		r       *stream.Resumer[soakEvent, int64]
		highest int64 // the highest event handled successfully
	)
	resync := func(context.Context, error, func(soakEvent) error) (int64, error) {
		return r.Cursor(), nil
	}
	for ctx.Err() == nil {
		if r == nil || rng.IntN(10) < 7 {
			var err error
			r, err = stream.New(current, streamtest.Extract[struct{}], store,
				stream.WithBackoff(backoff.Constant(0)),
				stream.WithResync(resync),
				stream.WithCheckpointEvery([]int{1, 10, 100}[rng.IntN(3)]),
				stream.WithCursorOrder(func(a, b int64) int { return int(a - b) }))
			if err != nil {
				return err
			}
			counters.fresh.Add(1)
		}
		counters.runs.Add(1)
		src = newSource(logLen)
		start := r.Cursor()
		if got, _ := store.Load(context.Background()); r.Stats().Opens == 0 {
			start = got // a new Resumer starts from the Store
		}
		runCtx, cancel := context.WithTimeout(ctx, time.Duration(10+rng.IntN(490))*time.Millisecond)
		prev := start
		var herr, violation error
		err := r.Run(runCtx, func(_ context.Context, e soakEvent) error {
			if e.Seq != prev+1 || e.Seq > highest+1 {
				violation = fmt.Errorf("handled event %d after %d (highest %d): want each event in order, no gap", e.Seq, prev, highest)
				return violation
			}
			prev = e.Seq
			if e.Seq == int64(logLen) {
				logLen += soakBatch
				src.Append(make([]struct{}, soakBatch)...)
			}
			if rng.IntN(5_000) == 0 {
				herr = errors.New("soak: handler refused")
				counters.handlerFails.Add(1)
				return herr
			}
			highest = max(highest, e.Seq)
			counters.events.Add(1)
			return nil
		})
		cancel()
		counters.opens.Add(int64(len(src.Opens())))
		switch {
		case violation != nil:
			return violation
		case herr != nil && errors.Is(err, herr):
		case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		default:
			return fmt.Errorf("Run() = %v, want the handler's error or a context error", err)
		}
		if live := src.Live(); live != 0 {
			return fmt.Errorf("%d connections left open after Run returned", live)
		}
		loaded := r.Stats().Opens > 0 || r.Cursor() != 0 // else ctx ended before the Store was loaded
		if got, _ := store.Load(context.Background()); got != highest || (loaded && r.Cursor() != highest) {
			return fmt.Errorf("after Run the Store holds %d and Cursor() is %d, want %d (the highest event handled)", got, r.Cursor(), highest)
		}
	}
	return nil
}
