package prom_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/resumable-go/resumable/backoff"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/errclass"
	"github.com/resumable-go/resumable/metrics/prom"
	"github.com/resumable-go/resumable/stream"
	"github.com/resumable-go/resumable/stream/streamtest"
)

// TestExposition pins the names, help texts, labels and values of every
// series for a short run: a failed Open, a connection that ends cleanly
// after one event, then one that delivers a bookmark and an event before the
// stream ends.
func TestExposition(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCollector(t)
		h, detach := prom.Hooks[int64](c, "orders")
		src := streamtest.NewSource([]string{"a", bookmark, "b"},
			streamtest.Step{Kind: streamtest.FailOpen},
			streamtest.Step{Kind: streamtest.EndAfter, K: 1})
		r, err := stream.New(src, extract, cursor.NewMemory[int64](0),
			stream.WithBackoff(backoff.Constant(100*time.Millisecond)), stream.WithHooks(h))
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Run(t.Context(), func(context.Context, event) error { return nil }); err != nil {
			t.Fatalf("Run() = %v, want nil", err)
		}
		// The stream ended for good while connected: OnStop says it is no
		// longer connected, before any detach.
		const want = `
# HELP resumable_clean_ends_total Connections that ended without a failure (io.EOF from the server).
# TYPE resumable_clean_ends_total counter
resumable_clean_ends_total{name="orders"} 1
# HELP resumable_connected Streams with an open connection.
# TYPE resumable_connected gauge
resumable_connected{name="orders"} 0
# HELP resumable_events_total Events handled and committed, a completed resync's replay included.
# TYPE resumable_events_total counter
resumable_events_total{name="orders"} 2
# HELP resumable_failures_total Failures of Open, Recv or the Store, by the classifier's verdict.
# TYPE resumable_failures_total counter
resumable_failures_total{action="expired",name="orders"} 0
resumable_failures_total{action="fail",name="orders"} 0
resumable_failures_total{action="retry",name="orders"} 1
# HELP resumable_handler_retries_total Handler calls retried in place (WithHandlerRetry).
# TYPE resumable_handler_retries_total counter
resumable_handler_retries_total{name="orders"} 0
# HELP resumable_in_flight_events Events read but not yet committed, as of each stream's last commit (WithConcurrency).
# TYPE resumable_in_flight_events gauge
resumable_in_flight_events{name="orders"} 0
# HELP resumable_last_commit_age_seconds Seconds since a cursor was last committed, as seen by scrapes: low by at most the time between two scrapes.
# TYPE resumable_last_commit_age_seconds gauge
resumable_last_commit_age_seconds{name="orders"} 0
# HELP resumable_opens_total Connections opened.
# TYPE resumable_opens_total counter
resumable_opens_total{name="orders"} 2
# HELP resumable_parked_total Events handed to the dead letter and committed (WithDeadLetter).
# TYPE resumable_parked_total counter
resumable_parked_total{name="orders"} 0
# HELP resumable_progress_events_total Progress-only events committed (bookmarks, heartbeats).
# TYPE resumable_progress_events_total counter
resumable_progress_events_total{name="orders"} 1
# HELP resumable_reconnect_delay_seconds Wait before each reopen of a connection.
# TYPE resumable_reconnect_delay_seconds histogram
resumable_reconnect_delay_seconds_bucket{name="orders",le="0"} 1
resumable_reconnect_delay_seconds_bucket{name="orders",le="0.1"} 2
resumable_reconnect_delay_seconds_bucket{name="orders",le="0.25"} 2
resumable_reconnect_delay_seconds_bucket{name="orders",le="0.5"} 2
resumable_reconnect_delay_seconds_bucket{name="orders",le="1"} 2
resumable_reconnect_delay_seconds_bucket{name="orders",le="2.5"} 2
resumable_reconnect_delay_seconds_bucket{name="orders",le="5"} 2
resumable_reconnect_delay_seconds_bucket{name="orders",le="10"} 2
resumable_reconnect_delay_seconds_bucket{name="orders",le="30"} 2
resumable_reconnect_delay_seconds_bucket{name="orders",le="60"} 2
resumable_reconnect_delay_seconds_bucket{name="orders",le="120"} 2
resumable_reconnect_delay_seconds_bucket{name="orders",le="300"} 2
resumable_reconnect_delay_seconds_bucket{name="orders",le="600"} 2
resumable_reconnect_delay_seconds_bucket{name="orders",le="+Inf"} 2
resumable_reconnect_delay_seconds_sum{name="orders"} 0.1
resumable_reconnect_delay_seconds_count{name="orders"} 2
# HELP resumable_resyncs_total Resyncs completed after an expired cursor.
# TYPE resumable_resyncs_total counter
resumable_resyncs_total{name="orders"} 0
# HELP resumable_save_errors_total Cursor Store saves that failed.
# TYPE resumable_save_errors_total counter
resumable_save_errors_total{name="orders"} 0
# HELP resumable_saves_total Cursor Store saves that succeeded.
# TYPE resumable_saves_total counter
resumable_saves_total{name="orders"} 3
# HELP resumable_streams Streams attached and not detached.
# TYPE resumable_streams gauge
resumable_streams{name="orders"} 1
`
		if err := testutil.CollectAndCompare(c, strings.NewReader(want)); err != nil {
			t.Errorf("CollectAndCompare() = %v", err)
		}
		detach()
		if n := testutil.CollectAndCount(c); n != 0 {
			t.Errorf("CollectAndCount() after detach = %d, want 0", n)
		}
	})
}

// TestCountersMatchStats runs a stream through every kind of event the
// hooks report (failed Opens, a clean end, a broken connection, an expired
// cursor and its resync, a failed save, a final Fail and the final save)
// and checks each counter against the Resumer's own Stats, and the delay
// histogram against a second set of hooks of the test's own.
func TestCountersMatchStats(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		errFatal := errors.New("test: fatal")
		c := newCollector(t)
		h, detach := prom.Hooks[int64](c, "orders")
		defer detach()
		retries := 0
		src := streamtest.NewSource([]string{"a", "b", bookmark, "c", "d", "e", bookmark, "f", "g", "h"},
			streamtest.Step{Kind: streamtest.FailOpen},
			streamtest.Step{Kind: streamtest.EndAfter, K: 2},
			streamtest.Step{Kind: streamtest.BreakAfter, K: 1},
			streamtest.Step{Kind: streamtest.ExpireAfter, K: 0},
			streamtest.Step{Kind: streamtest.Deliver}, // ends when saving 8 fails
			streamtest.Step{Kind: streamtest.FailOpen, Err: errFatal},
		)
		resync := func(_ context.Context, _ error, emit func(event) error) (int64, error) {
			for _, v := range []string{"x", "y"} {
				if err := emit(event{Value: v}); err != nil {
					return 0, err
				}
			}
			return 5, nil
		}
		r, err := stream.New(src, extract, &flakyStore{Memory: cursor.NewMemory[int64](0), failAt: 8},
			stream.WithHooks(h),
			stream.WithHooks(stream.Hooks[int64]{OnRetry: func(stream.RetryEvent[int64]) { retries++ }}),
			stream.WithResync(resync),
			stream.WithClassifier(errclass.Is(errFatal, errclass.Decision{Action: errclass.Fail})))
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Run(t.Context(), func(context.Context, event) error { return nil }); !errors.Is(err, errFatal) {
			t.Fatalf("Run() = %v, want %v", err, errFatal)
		}
		st := r.Stats()
		const n = `{name="orders"}`
		want := map[string]float64{
			"events_total" + n:                               float64(st.Events),
			"progress_events_total" + n:                      float64(st.Progress),
			"opens_total" + n:                                float64(st.Opens),
			"clean_ends_total" + n:                           float64(st.CleanEnds),
			`failures_total{action="retry",name="orders"}`:   float64(st.Retried),
			`failures_total{action="fail",name="orders"}`:    float64(st.Failed),
			`failures_total{action="expired",name="orders"}`: float64(st.Expired),
			"resyncs_total" + n:                              float64(st.Resyncs),
			"saves_total" + n:                                float64(st.Saves),
			"save_errors_total" + n:                          float64(st.SaveErrors),
			"reconnect_delay_seconds_count" + n:              float64(retries),
			"connected" + n:                                  0, // the last Open failed
			"streams" + n:                                    1,
			"last_commit_age_seconds" + n:                    0,
			"handler_retries_total" + n:                      float64(st.HandlerRetries),
			"parked_total" + n:                               float64(st.Parked),
			"in_flight_events" + n:                           0,
		}
		if diff := cmp.Diff(want, values(t, c)); diff != "" {
			t.Errorf("metrics (-want +got):\n%s", diff)
		}
		// Every kind of event happened, so the comparison above compared
		// non-zero counts.
		for name, v := range map[string]uint64{
			"Events": st.Events, "Progress": st.Progress, "Opens": st.Opens, "CleanEnds": st.CleanEnds,
			"Retried": st.Retried, "Failed": st.Failed, "Expired": st.Expired, "Resyncs": st.Resyncs,
			"Saves": st.Saves, "SaveErrors": st.SaveErrors,
		} {
			if v == 0 {
				t.Errorf("Stats().%s = 0, want > 0: the script no longer exercises it", name)
			}
		}
	})
}

// TestCommitAge checks the stall gauge: it counts from the first attach,
// drops to zero at the first scrape after a commit, and grows while nothing
// is committed. Time is fake (synctest), so the values are exact.
func TestCommitAge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCollector(t)
		h, detach := prom.Hooks[int64](c, "orders")
		defer detach()
		age := func() float64 {
			t.Helper()
			return values(t, c)[`last_commit_age_seconds{name="orders"}`]
		}
		steps := []struct {
			name   string
			sleep  time.Duration
			commit bool
			want   float64
		}{
			{name: "nothing committed since the attach", sleep: 10 * time.Second, want: 10},
			{name: "a commit before the scrape", sleep: 5 * time.Second, commit: true, want: 0},
			{name: "quiet after the commit", sleep: 7 * time.Second, want: 7},
			{name: "a progress-only commit counts", sleep: 3 * time.Second, commit: true, want: 0},
			{name: "quiet again", sleep: time.Minute, want: 60},
		}
		for i, s := range steps {
			time.Sleep(s.sleep)
			if s.commit {
				h.OnCommit(stream.CommitEvent[int64]{Cursor: int64(i), Progress: i%2 == 1})
			}
			if got := age(); got != s.want {
				t.Errorf("%s: age = %v, want %v", s.name, got, s.want)
			}
		}
	})
}

// TestGaugesAndDetach drives the hooks of two streams sharing a name, as a
// Resumer would, and checks what connected, streams and events count.
func TestGaugesAndDetach(t *testing.T) {
	type op uint8
	const (
		connect op = iota
		cleanEnd
		failedOpen
		commit
		detach
	)
	c := newCollector(t)
	hooks, detaches := make(map[string]stream.Hooks[int64]), make(map[string]func())
	for _, s := range []string{"a", "b"} {
		hooks[s], detaches[s] = prom.Hooks[int64](c, "pods")
	}
	steps := []struct {
		name   string
		stream string
		op     op
		want   [3]float64 // connected, streams, events
	}{
		{name: "a connects", stream: "a", op: connect, want: [3]float64{1, 2, 0}},
		{name: "b connects", stream: "b", op: connect, want: [3]float64{2, 2, 0}},
		{name: "a reconnects without an end (Run returned on cancellation, then ran again)", stream: "a", op: connect, want: [3]float64{2, 2, 0}},
		{name: "a commits", stream: "a", op: commit, want: [3]float64{2, 2, 1}},
		{name: "b commits", stream: "b", op: commit, want: [3]float64{2, 2, 2}},
		{name: "a's connection ends", stream: "a", op: cleanEnd, want: [3]float64{1, 2, 2}},
		{name: "a's next Open fails", stream: "a", op: failedOpen, want: [3]float64{1, 2, 2}},
		{name: "b detaches while connected, its events kept", stream: "b", op: detach, want: [3]float64{0, 1, 2}},
		{name: "b detaches again", stream: "b", op: detach, want: [3]float64{0, 1, 2}},
		{name: "b connects after its detach: not counted", stream: "b", op: connect, want: [3]float64{0, 1, 2}},
		{name: "b commits after its detach: not counted", stream: "b", op: commit, want: [3]float64{0, 1, 2}},
		{name: "a commits", stream: "a", op: commit, want: [3]float64{0, 1, 3}},
	}
	for _, s := range steps {
		h := hooks[s.stream]
		switch s.op {
		case connect:
			h.OnConnect(stream.ConnectEvent[int64]{})
		case cleanEnd:
			h.OnDisconnect(stream.DisconnectEvent[int64]{Clean: true, Opened: true})
		case failedOpen:
			h.OnDisconnect(stream.DisconnectEvent[int64]{Decision: errclass.Decision{Action: errclass.Retry}})
		case commit:
			h.OnCommit(stream.CommitEvent[int64]{})
		case detach:
			detaches[s.stream]()
		}
		v := values(t, c)
		got := [3]float64{v[`connected{name="pods"}`], v[`streams{name="pods"}`], v[`events_total{name="pods"}`]}
		if got != s.want {
			t.Errorf("%s: connected, streams, events = %v, want %v", s.name, got, s.want)
		}
	}
	detaches["a"]()
	if n := testutil.CollectAndCount(c); n != 0 {
		t.Errorf("CollectAndCount() after the last detach = %d, want 0", n)
	}
}

// TestManyShortLivedStreams attaches and detaches ten thousand streams, each
// under its own name, and checks that no series is left behind; then does
// the same with names shared by several streams at once.
func TestManyShortLivedStreams(t *testing.T) {
	c := newCollector(t)
	keep, detachKeep := prom.Hooks[string](c, "long-lived")
	defer detachKeep()
	keep.OnCommit(stream.CommitEvent[string]{})
	for i := range 10_000 {
		h, detach := prom.Hooks[string](c, fmt.Sprintf("job-%d", i))
		h.OnConnect(stream.ConnectEvent[string]{})
		h.OnCommit(stream.CommitEvent[string]{})
		detach()
	}
	var detaches []func()
	for i := range 300 {
		h, detach := prom.Hooks[string](c, fmt.Sprintf("tenant-%d", i%3))
		h.OnConnect(stream.ConnectEvent[string]{})
		detaches = append(detaches, detach)
	}
	got := values(t, c)
	want := map[string]float64{
		`connected{name="tenant-0"}`: 100, `connected{name="tenant-1"}`: 100, `connected{name="tenant-2"}`: 100,
		`connected{name="long-lived"}`:    0,
		`events_total{name="long-lived"}`: 1,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	for _, d := range detaches {
		d()
	}
	// 17 series per name: 12 counters (failures has 3), 4 gauges and a histogram.
	if n := testutil.CollectAndCount(c); n != 17 {
		t.Errorf("CollectAndCount() = %d, want 17 (the long-lived stream's series only)", n)
	}
}

// TestConcurrentStreams runs Resumers on many goroutines under two names and
// checks that the counts add up (and, under -race, that the hooks and
// scrapes race with nothing).
func TestConcurrentStreams(t *testing.T) {
	const streams, events = 16, 200
	c := newCollector(t)
	log := make([]string, events)
	// Keep both names attached until the totals are checked.
	_, d0 := prom.Hooks[int64](c, "shard-0")
	_, d1 := prom.Hooks[int64](c, "shard-1")
	defer d0()
	defer d1()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	scraped := make(chan struct{})
	go func() { // scrape while the streams run
		defer close(scraped)
		for {
			select {
			case <-stop:
				return
			default:
				testutil.CollectAndCount(c)
			}
		}
	}()
	for i := range streams {
		wg.Go(func() {
			h, detach := prom.Hooks[int64](c, fmt.Sprintf("shard-%d", i%2))
			defer detach()
			src := streamtest.NewSource(log, streamtest.Step{Kind: streamtest.EndAfter, K: events / 2})
			r, err := stream.New(src, extract, cursor.NewMemory[int64](0), stream.WithHooks(h), stream.WithCheckpointEvery(0))
			if err != nil {
				t.Error(err)
				return
			}
			if err := r.Run(context.Background(), func(context.Context, event) error { return nil }); err != nil {
				t.Errorf("Run() = %v, want nil", err)
			}
		})
	}
	wg.Wait()
	close(stop)
	<-scraped
	got := values(t, c)
	for _, name := range []string{"shard-0", "shard-1"} {
		want := map[string]float64{
			`events_total{name="` + name + `"}`:     streams / 2 * events,
			`opens_total{name="` + name + `"}`:      streams / 2 * 2,
			`clean_ends_total{name="` + name + `"}`: streams / 2,
			`saves_total{name="` + name + `"}`:      streams / 2 * 2,
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s = %v, want %v", k, got[k], v)
			}
		}
	}
}

func TestNewCollectorInvalid(t *testing.T) {
	for _, ns := range []string{"my-app", "1app", "a b"} {
		c, err := prom.NewCollector(ns)
		if !errors.Is(err, stream.ErrInvalidOption) || !strings.HasPrefix(fmt.Sprint(err), "prom: ") || c != nil {
			t.Errorf("NewCollector(%q) = %v, %v, want nil, an error matching %v that starts with \"prom: \"", ns, c, err, stream.ErrInvalidOption)
		}
	}
}

func TestNamespace(t *testing.T) {
	c := newCollector(t, "app_streams")
	h, detach := prom.Hooks[int64](c, "orders")
	defer detach()
	h.OnRetry(stream.RetryEvent[int64]{Delay: 5 * time.Second})
	const want = `
# HELP app_streams_streams Streams attached and not detached.
# TYPE app_streams_streams gauge
app_streams_streams{name="orders"} 1
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "app_streams_streams"); err != nil {
		t.Errorf("CollectAndCompare() = %v", err)
	}
	if n := testutil.CollectAndCount(c, "app_streams_reconnect_delay_seconds"); n != 1 {
		t.Errorf("CollectAndCount(reconnect_delay_seconds) = %d, want 1", n)
	}
	bare := newCollector(t, "")
	_, detachBare := prom.Hooks[int64](bare, "orders")
	defer detachBare()
	const wantBare = `
# HELP streams Streams attached and not detached.
# TYPE streams gauge
streams{name="orders"} 1
`
	if err := testutil.CollectAndCompare(bare, strings.NewReader(wantBare), "streams"); err != nil {
		t.Errorf("CollectAndCompare() without a namespace = %v", err)
	}
}

// TestNilCollector checks that a nil Collector gives hooks a Resumer
// accepts and that count nothing.
func TestNilCollector(t *testing.T) {
	h, detach := prom.Hooks[int64](nil, "orders")
	detach()
	detach()
	src := streamtest.NewSource([]string{"a"})
	r, err := stream.New(src, extract, cursor.NewMemory[int64](0), stream.WithHooks(h))
	if err != nil {
		t.Fatalf("New() = %v", err)
	}
	if err := r.Run(t.Context(), func(context.Context, event) error { return nil }); err != nil {
		t.Errorf("Run() = %v, want nil", err)
	}
}

// TestInvalidUTF8Name checks that a name with bad bytes still gathers.
func TestInvalidUTF8Name(t *testing.T) {
	c := newCollector(t)
	h, detach := prom.Hooks[int64](c, "bad\xffname")
	defer detach()
	h.OnCommit(stream.CommitEvent[int64]{})
	if got := values(t, c)["events_total{name=\"bad\uFFFDname\"}"]; got != 1 {
		t.Errorf("events_total = %v, want 1", got)
	}
}

// Handler retries and parked events are counted as Stats counts them, under
// concurrency too, and nothing stays in flight once Run returned.
func TestHandlerFailuresCounted(t *testing.T) {
	c, err := prom.NewCollector("")
	if err != nil {
		t.Fatal(err)
	}
	h, detach := prom.Hooks[int64](c, "orders")
	defer detach()
	var inFlight []int
	src := streamtest.NewSource([]string{"a", "poison", "b", "flaky", "c", "d"})
	var mu sync.Mutex
	tries := map[string]int{}
	r, err := stream.New(src, extract, cursor.NewMemory[int64](0),
		stream.WithHooks(h),
		stream.WithHooks(stream.Hooks[int64]{OnCommit: func(e stream.CommitEvent[int64]) { inFlight = append(inFlight, e.InFlight) }}),
		stream.WithConcurrency(2),
		stream.WithHandlerRetry(3, backoff.Constant(0)),
		stream.WithDeadLetter(func(context.Context, event, error) error { return nil }))
	if err != nil {
		t.Fatal(err)
	}
	err = r.Run(t.Context(), func(_ context.Context, e event) error {
		mu.Lock()
		defer mu.Unlock()
		tries[e.Value]++
		switch {
		case e.Value == "poison", e.Value == "flaky" && tries[e.Value] == 1:
			return errors.New("failed")
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Run() = %v, want nil", err)
	}
	st := r.Stats()
	if st.HandlerRetries != 3 || st.Parked != 1 {
		t.Fatalf("Stats() = %d handler retries, %d parked; want 3, 1", st.HandlerRetries, st.Parked)
	}
	got := values(t, c)
	for k, want := range map[string]float64{
		`handler_retries_total{name="orders"}`: 3,
		`parked_total{name="orders"}`:          1,
		`in_flight_events{name="orders"}`:      0,
	} {
		if got[k] != want {
			t.Errorf("%s = %v, want %v", k, got[k], want)
		}
	}
	if len(inFlight) != 6 {
		t.Errorf("%d commits, want 6", len(inFlight))
	}
}

// TestBatchCountsEvents checks that under RunBatch the counters count the
// events of each batch and the progress-only events folded into it, not
// the batches (issue 41, defect 15).
func TestBatchCountsEvents(t *testing.T) {
	c := newCollector(t)
	h, detach := prom.Hooks[int64](c, "batches")
	defer detach()
	src := streamtest.NewSource([]string{"a", bookmark, "b", "c", bookmark, bookmark, "d", bookmark})
	r, err := stream.New(src, extract, cursor.NewMemory[int64](0), stream.WithHooks(h), stream.WithBatch(3, 0))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.RunBatch(t.Context(), func(context.Context, []event) error { return nil }); err != nil {
		t.Fatalf("RunBatch() = %v, want nil", err)
	}
	st := r.Stats()
	if st.Events != 4 || st.Progress != 4 {
		t.Errorf("Stats() Events = %d, Progress = %d, want 4 and 4", st.Events, st.Progress)
	}
	got := values(t, c)
	const n = `{name="batches"}`
	if got["events_total"+n] != 4 || got["progress_events_total"+n] != 4 {
		t.Errorf("events_total = %v, progress_events_total = %v, want 4 and 4", got["events_total"+n], got["progress_events_total"+n])
	}
}
