package stream_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/resumable-go/resumable/backoff"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/errclass"
	"github.com/resumable-go/resumable/stream"
	"github.com/resumable-go/resumable/stream/streamtest"
)

func TestRunDeliversInOrderAndCommitsAfterHandler(t *testing.T) {
	errHandler := errors.New("handler refused")
	tests := []struct {
		name       string
		failAt     int64 // the handler fails on this event (0: never)
		wantSeen   []int64
		wantCursor int64
		wantErr    error
	}{
		{name: "all events", failAt: 0, wantSeen: seqs(1, 6), wantCursor: 6, wantErr: nil},
		{name: "handler fails on the first", failAt: 1, wantSeen: seqs(1, 1), wantCursor: 0, wantErr: errHandler},
		{name: "handler fails midway", failAt: 4, wantSeen: seqs(1, 4), wantCursor: 3, wantErr: errHandler},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := cursor.NewMemory[int64](0)
			src := streamtest.NewSource(letters(6), streamtest.Step{Kind: streamtest.BreakAfter, K: 2})
			r, err := stream.New(src, extract, store, stream.WithBackoff(backoff.Constant(0)))
			if err != nil {
				t.Fatalf("New() = %v", err)
			}
			var seen []int64
			err = r.Run(context.Background(), func(_ context.Context, e ev) error {
				seen = append(seen, e.Seq)
				if e.Seq == tt.failAt {
					return errHandler
				}
				return nil
			})
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Fatalf("Run() = %v, want %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.wantSeen, seen); diff != "" {
				t.Errorf("handled events (-want +got):\n%s", diff)
			}
			if got := r.Cursor(); got != tt.wantCursor {
				t.Errorf("Cursor() = %d, want %d", got, tt.wantCursor)
			}
			if got, _ := store.Load(context.Background()); got != tt.wantCursor {
				t.Errorf("Store.Load() = %d, want %d", got, tt.wantCursor)
			}
			if tt.failAt == 0 {
				return
			}
			// A new Resumer on the same store redelivers the failed event.
			r2, err := stream.New(streamtest.NewSource(letters(6)), extract, store)
			if err != nil {
				t.Fatalf("New() = %v", err)
			}
			seen2, err := collect(t, r2)
			if err != nil {
				t.Fatalf("second Run() = %v, want nil", err)
			}
			if diff := cmp.Diff(seqs(tt.failAt, 6), seen2); diff != "" {
				t.Errorf("redelivered events (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRunExtractorErrorStopsWithoutDelivering(t *testing.T) {
	errBad := errors.New("event has no id")
	failing := func(e ev) (int64, error) {
		if e.Seq == 3 {
			return 0, errBad
		}
		return e.Seq, nil
	}
	r, err := stream.New(streamtest.NewSource(letters(5)), failing, cursor.NewMemory[int64](0))
	if err != nil {
		t.Fatalf("New() = %v", err)
	}
	seen, err := collect(t, r)
	if !errors.Is(err, errBad) || !errors.Is(err, stream.ErrExtract) {
		t.Fatalf("Run() = %v, want an error matching %v and %v", err, errBad, stream.ErrExtract)
	}
	if diff := cmp.Diff(seqs(1, 2), seen); diff != "" {
		t.Errorf("handled events (-want +got):\n%s", diff)
	}
	if got := r.Cursor(); got != 2 {
		t.Errorf("Cursor() = %d, want 2", got)
	}
}

// userError is classified by a test classifier.
type userError struct{ code int }

func (e *userError) Error() string { return fmt.Sprintf("status %d", e.code) }

func TestFailuresAreClassifiedTheSameFromOpenAndRecv(t *testing.T) {
	errPlain := errors.New("connection reset")
	byCode := errclass.As(func(e *userError) errclass.Decision {
		switch e.code {
		case 403:
			return errclass.Decision{Action: errclass.Fail}
		case 410:
			return errclass.Decision{Action: errclass.Expired}
		}
		return errclass.Decision{} // Unknown: falls through to Default
	})
	tests := []struct {
		name        string
		err         error
		classifier  errclass.Classifier
		wantAction  errclass.Action
		wantExpired bool
	}{
		{name: "plain error retries", err: errPlain, wantAction: errclass.Retry},
		{name: "permanent fails", err: errclass.Permanent(errPlain), wantAction: errclass.Fail},
		{name: "retry-after retries", err: errclass.RetryAfter(errPlain, time.Millisecond), wantAction: errclass.Retry},
		{name: "expired marker", err: errclass.CursorExpired(errPlain), wantAction: errclass.Expired, wantExpired: true},
		{name: "user classifier fails", err: &userError{code: 403}, classifier: byCode, wantAction: errclass.Fail},
		{name: "user classifier expires an unmarked error", err: &userError{code: 410}, classifier: byCode, wantAction: errclass.Expired, wantExpired: true},
		{name: "user classifier unknown falls to default", err: &userError{code: 500}, classifier: byCode, wantAction: errclass.Retry},
		{name: "unknown falls to default markers", err: errclass.Permanent(&userError{code: 500}), classifier: byCode, wantAction: errclass.Fail},
	}
	for _, tt := range tests {
		for _, where := range []string{"open", "recv"} {
			t.Run(tt.name+"/"+where, func(t *testing.T) {
				step := streamtest.Step{Kind: streamtest.FailOpen, Err: tt.err}
				if where == "recv" {
					step = streamtest.Step{Kind: streamtest.BreakAfter, K: 1, Err: tt.err}
				}
				var decisions []errclass.Action
				r := newResumer(t, streamtest.NewSource(letters(3), step),
					stream.WithClassifier(tt.classifier),
					stream.WithHooks(stream.Hooks[int64]{OnDisconnect: func(e stream.DisconnectEvent[int64]) {
						if !e.Clean {
							decisions = append(decisions, e.Decision.Action)
						}
					}}))
				seen, err := collect(t, r)
				if diff := cmp.Diff([]errclass.Action{tt.wantAction}, decisions); diff != "" {
					t.Errorf("decisions (-want +got):\n%s", diff)
				}
				switch tt.wantAction {
				case errclass.Retry:
					if err != nil {
						t.Fatalf("Run() = %v, want nil", err)
					}
					if diff := cmp.Diff(seqs(1, 3), seen); diff != "" {
						t.Errorf("handled events (-want +got):\n%s", diff)
					}
				default:
					if !errors.Is(err, tt.err) {
						t.Fatalf("Run() = %v, want an error matching %v", err, tt.err)
					}
					if got := errors.Is(err, errclass.ErrExpired); got != tt.wantExpired {
						t.Errorf("errors.Is(Run(), ErrExpired) = %v, want %v", got, tt.wantExpired)
					}
				}
			})
		}
	}
}

// Each term of the delay rule, and which one sets the wait.
func TestDelayIsTheLargestTerm(t *testing.T) {
	tests := []struct {
		name       string
		step       streamtest.Step
		policy     backoff.Policy
		minRestart time.Duration
		maxServer  time.Duration // 0: the default cap
		wantReason string
		wantDelay  time.Duration
	}{
		{name: "backoff step", step: streamtest.Step{Kind: streamtest.FailOpen},
			policy: backoff.Constant(3 * time.Millisecond), wantReason: "backoff", wantDelay: 3 * time.Millisecond},
		{name: "server after beats backoff", step: streamtest.Step{Kind: streamtest.DelayAfter, Delay: 7 * time.Millisecond},
			policy: backoff.Constant(time.Millisecond), wantReason: "server", wantDelay: 7 * time.Millisecond},
		{name: "backoff beats server after", step: streamtest.Step{Kind: streamtest.DelayAfter, Delay: time.Millisecond},
			policy: backoff.Constant(6 * time.Millisecond), wantReason: "backoff", wantDelay: 6 * time.Millisecond},
		{name: "min restart beats both", step: streamtest.Step{Kind: streamtest.FailOpen},
			policy: backoff.Constant(time.Millisecond), minRestart: 40 * time.Millisecond, wantReason: "min-restart", wantDelay: 40 * time.Millisecond},
		{name: "no delay at all", step: streamtest.Step{Kind: streamtest.FailOpen},
			policy: backoff.Constant(0), wantReason: "none", wantDelay: 0},
		{name: "server delay capped by default", step: streamtest.Step{Kind: streamtest.DelayAfter, Delay: 24 * time.Hour},
			policy: backoff.Constant(0), wantReason: "server", wantDelay: 10 * time.Minute},
		{name: "server delay capped by the option", step: streamtest.Step{Kind: streamtest.DelayAfter, Delay: time.Hour},
			policy: backoff.Constant(0), maxServer: 2 * time.Second, wantReason: "server", wantDelay: 2 * time.Second},
		{name: "the cap does not raise a small delay", step: streamtest.Step{Kind: streamtest.DelayAfter, Delay: time.Second},
			policy: backoff.Constant(0), maxServer: 2 * time.Second, wantReason: "server", wantDelay: time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var got []stream.RetryEvent[int64]
				opts := []stream.Option{stream.WithBackoff(tt.policy), stream.WithMinRestartDelay(tt.minRestart), retries(&got)}
				if tt.maxServer > 0 {
					opts = append(opts, stream.WithMaxServerDelay(tt.maxServer))
				}
				src := streamtest.NewSource(letters(2), tt.step)
				r := newResumer(t, src, opts...)
				if _, err := collect(t, r); err != nil {
					t.Fatalf("Run() = %v, want nil", err)
				}
				if len(got) != 1 {
					t.Fatalf("got %d retries, want 1", len(got))
				}
				if got[0].Reason != tt.wantReason || got[0].Delay != tt.wantDelay {
					t.Errorf("retry = %v (%v), want %v (%v)", got[0].Delay, got[0].Reason, tt.wantDelay, tt.wantReason)
				}
				opens := src.Opens()
				if waited := opens[1].At.Sub(opens[0].At); waited != tt.wantDelay {
					t.Errorf("the second Open came %v after the first, want %v", waited, tt.wantDelay)
				}
			})
		})
	}
}

func TestMaxServerDelayZeroRemovesTheCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var got []stream.RetryEvent[int64]
		src := streamtest.NewSource(letters(1), streamtest.Step{Kind: streamtest.DelayAfter, Delay: 24 * time.Hour})
		r := newResumer(t, src, stream.WithMaxServerDelay(0), retries(&got))
		if _, err := collect(t, r); err != nil {
			t.Fatalf("Run() = %v, want nil", err)
		}
		if len(got) != 1 || got[0].Delay != 24*time.Hour {
			t.Errorf("retries = %+v, want one of 24h", got)
		}
	})
}

func TestMinRestartDelayIsNonSliding(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const minRestart = 5 * time.Second
		var got []stream.RetryEvent[int64]
		src := streamtest.NewSource(letters(3), streamtest.Step{Kind: streamtest.EndAfter, K: 1}, streamtest.Step{Kind: streamtest.EndAfter, K: 1})
		r := newResumer(t, src, stream.WithMinRestartDelay(minRestart), retries(&got))
		err := r.Run(context.Background(), func(_ context.Context, e ev) error {
			if e.Seq == 1 {
				time.Sleep(2 * minRestart) // the first connection outlives the minimum
			}
			return nil
		})
		if err != nil {
			t.Fatalf("Run() = %v, want nil", err)
		}
		want := []time.Duration{0, minRestart}
		if len(got) != 2 || got[0].Delay != want[0] || got[1].Delay != want[1] {
			t.Fatalf("retries = %+v, want delays %v", got, want)
		}
		if got[1].Reason != "min-restart" {
			t.Errorf("second retry reason = %v, want %v", got[1].Reason, "min-restart")
		}
	})
}

func TestBackoffResetsAfterProgressAndGivesUp(t *testing.T) {
	policy := &countingPolicy{limit: 2}
	errDown := errors.New("server down")
	src := streamtest.NewSource(letters(3),
		streamtest.Step{Kind: streamtest.FailOpen, Err: errDown},
		streamtest.Step{Kind: streamtest.FailOpen, Err: errDown},
		streamtest.Step{Kind: streamtest.BreakAfter, K: 1, Err: errDown}, // progress: a new streak
		streamtest.Step{Kind: streamtest.FailOpen, Err: errDown},
		streamtest.Step{Kind: streamtest.FailOpen, Err: errDown},
		// the third failure in a row gives up before this step
	)
	var got []stream.RetryEvent[int64]
	r := newResumer(t, src, stream.WithBackoff(policy), retries(&got))
	seen, err := collect(t, r)
	if !errors.Is(err, stream.ErrRetriesExhausted) || !errors.Is(err, errDown) {
		t.Fatalf("Run() = %v, want an error matching %v and %v", err, stream.ErrRetriesExhausted, errDown)
	}
	if diff := cmp.Diff(seqs(1, 1), seen); diff != "" {
		t.Errorf("handled events (-want +got):\n%s", diff)
	}
	var attempts []int
	for _, e := range got {
		attempts = append(attempts, e.Attempt)
	}
	if diff := cmp.Diff([]int{1, 2, 1, 2}, attempts); diff != "" {
		t.Errorf("attempts of the scheduled reopens (-want +got):\n%s", diff)
	}
	if nexts, _ := policy.counts(); nexts != 5 {
		t.Errorf("backoff steps drawn = %d, want 5 (the fifth gave up)", nexts)
	}
}

func TestCancellation(t *testing.T) {
	tests := []struct {
		name   string
		script []streamtest.Step
		policy backoff.Policy
	}{
		{name: "recv ignores ctx", script: []streamtest.Step{{Kind: streamtest.BlockAfter, K: 1}}, policy: backoff.Constant(0)},
		{name: "waiting for backoff", script: []streamtest.Step{{Kind: streamtest.BreakAfter, K: 1}}, policy: backoff.Constant(time.Hour)},
		{name: "waiting for server delay", script: []streamtest.Step{{Kind: streamtest.DelayAfter, K: 0, Delay: time.Hour}}, policy: backoff.Constant(0)},
		{name: "open blocks until ctx ends", script: []streamtest.Step{{Kind: streamtest.BlockOpen}}, policy: backoff.Constant(0)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				src := streamtest.NewSource(letters(3), tt.script...)
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				r := newResumer(t, src, stream.WithBackoff(tt.policy))
				done := make(chan error, 1)
				go func() { done <- r.Run(ctx, func(context.Context, ev) error { return nil }) }()
				synctest.Wait() // Run is stuck: in Recv, Open or a wait
				cancel()
				if err := <-done; !errors.Is(err, context.Canceled) {
					t.Fatalf("Run() = %v, want %v", err, context.Canceled)
				}
				if live := src.Live(); live != 0 {
					t.Errorf("%d connections left open, want 0", live)
				}
			})
		})
	}
}

func TestCancelledBeforeRun(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	src := streamtest.NewSource(letters(3))
	r := newResumer(t, src)
	if err := r.Run(ctx, func(context.Context, ev) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run() = %v, want %v", err, context.Canceled)
	}
	if n := len(src.Opens()); n != 0 {
		t.Errorf("%d Opens, want 0", n)
	}
}

func TestAll(t *testing.T) {
	errDenied := errclass.Permanent(errors.New("denied"))
	tests := []struct {
		name     string
		script   []streamtest.Step
		wantSeen []int64
		wantErr  error
	}{
		{name: "end of stream ends the loop", wantSeen: seqs(1, 4)},
		{name: "resumes across failures", script: []streamtest.Step{
			{Kind: streamtest.BreakAfter, K: 1}, {Kind: streamtest.EndAfter, K: 2},
		}, wantSeen: seqs(1, 4)},
		{name: "terminal error yielded once", script: []streamtest.Step{
			{Kind: streamtest.BreakAfter, K: 2, Err: errDenied},
		}, wantSeen: seqs(1, 2), wantErr: errDenied},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newResumer(t, streamtest.NewSource(letters(4), tt.script...))
			var seen []int64
			var errs []error
			for e, err := range r.All(context.Background()) {
				if err != nil {
					errs = append(errs, err)
					continue
				}
				seen = append(seen, e.Seq)
			}
			if diff := cmp.Diff(tt.wantSeen, seen); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			switch {
			case tt.wantErr == nil && len(errs) != 0:
				t.Errorf("All() yielded errors %v, want none", errs)
			case tt.wantErr != nil && (len(errs) != 1 || !errors.Is(errs[0], tt.wantErr)):
				t.Errorf("All() yielded errors %v, want exactly one matching %v", errs, tt.wantErr)
			}
		})
	}
}

func TestAllBreakClosesConnAndLeavesEventUncommitted(t *testing.T) {
	src := streamtest.NewSource(letters(5))
	src.SetEndOfLog(streamtest.Wait)
	store := cursor.NewMemory[int64](0)
	r, err := stream.New(src, extract, store)
	if err != nil {
		t.Fatalf("New() = %v", err)
	}
	for e, err := range r.All(context.Background()) {
		if err != nil {
			t.Fatalf("All() yielded %v", err)
		}
		if e.Seq == 3 {
			break
		}
	}
	if got := r.Cursor(); got != 2 {
		t.Errorf("Cursor() = %d, want 2", got)
	}
	if got, _ := store.Load(context.Background()); got != 2 {
		t.Errorf("Store.Load() = %d, want 2", got)
	}
	if live := src.Live(); live != 0 {
		t.Errorf("%d connections left open after break, want 0", live)
	}
	if err := r.Stats().FinalSaveError; err != nil {
		t.Errorf("Stats().FinalSaveError = %v, want nil", err)
	}
}

// A loop body that breaks out of All cannot be yielded an error: a failed
// final save is reported in Stats.
func TestAllBreakReportsAFailedFinalSave(t *testing.T) {
	errDisk := errors.New("disk full")
	store := &flakyStore{}
	src := streamtest.NewSource(letters(5))
	src.SetEndOfLog(streamtest.Wait)
	r, err := stream.New(src, extract, store, stream.WithCheckpointEvery(0))
	if err != nil {
		t.Fatalf("New() = %v", err)
	}
	for e, err := range r.All(context.Background()) {
		if err != nil {
			t.Fatalf("All() yielded %v", err)
		}
		if e.Seq == 3 {
			store.setFail(errDisk)
			break
		}
	}
	if err := r.Stats().FinalSaveError; !errors.Is(err, errDisk) {
		t.Fatalf("Stats().FinalSaveError = %v, want an error matching %v", err, errDisk)
	}
	// The next run saves the cursor, and clears the error.
	store.setFail(nil)
	for range r.All(context.Background()) {
		break
	}
	if err := r.Stats().FinalSaveError; err != nil {
		t.Errorf("Stats().FinalSaveError after a good save = %v, want nil", err)
	}
	if got, _ := store.Load(context.Background()); got != 2 {
		t.Errorf("Store.Load() = %d, want 2", got)
	}
}

func TestLogging(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	src := streamtest.NewSource(letters(4),
		streamtest.Step{Kind: streamtest.BreakAfter, K: 1, Err: errors.New("connection reset")},
		streamtest.Step{Kind: streamtest.EndAfter, K: 1},
	)
	r := newResumer(t, src, stream.WithLogger(zap.New(core)))
	if _, err := collect(t, r); err != nil {
		t.Fatalf("Run() = %v, want nil", err)
	}
	retried := logs.FilterMessage("stream failed; retrying").All()
	if len(retried) != 1 {
		t.Fatalf("got %d retry log entries, want 1: %v", len(retried), logs.All())
	}
	if got := retried[0].Level; got != zapcore.InfoLevel {
		t.Errorf("retry logged at %v, want info", got)
	}
	fields := retried[0].ContextMap()
	for _, k := range []string{"attempt", "cursor", "delay", "decision", "error", "reason"} {
		if _, ok := fields[k]; !ok {
			t.Errorf("retry log lacks field %q: %v", k, fields)
		}
	}
	for _, e := range logs.All() {
		if e.Level > zapcore.InfoLevel {
			t.Errorf("unexpected %v entry: %s %v", e.Level, e.Message, e.ContextMap())
		}
		if e.Message == "connection ended; reopening" && e.Level != zapcore.DebugLevel {
			t.Errorf("clean reconnect logged at %v, want debug", e.Level)
		}
	}
	if n := logs.FilterMessage("connection ended; reopening").Len(); n != 1 {
		t.Errorf("got %d clean reconnect entries, want 1", n)
	}
}

func TestStatsAndHooks(t *testing.T) {
	var mu sync.Mutex
	got := map[string]int{}
	count := func(k string) { mu.Lock(); got[k]++; mu.Unlock() }
	src := streamtest.NewSource(letters(4),
		streamtest.Step{Kind: streamtest.FailOpen},
		streamtest.Step{Kind: streamtest.EndAfter, K: 2},
	)
	r := newResumer(t, src, stream.WithHooks(stream.Hooks[int64]{
		OnConnect:    func(stream.ConnectEvent[int64]) { count("connect") },
		OnDisconnect: func(stream.DisconnectEvent[int64]) { count("disconnect") },
		OnRetry:      func(stream.RetryEvent[int64]) { count("retry") },
		OnCommit:     func(stream.CommitEvent[int64]) { count("commit") },
		OnSave:       func(stream.SaveEvent[int64]) { count("save") },
	}))
	if _, err := collect(t, r); err != nil {
		t.Fatalf("Run() = %v, want nil", err)
	}
	want := map[string]int{"connect": 2, "disconnect": 2, "retry": 2, "commit": 4, "save": 4}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("hook calls (-want +got):\n%s", diff)
	}
	wantStats := stream.Stats[int64]{Cursor: 4, Events: 4, Opens: 2, CleanEnds: 1, Retried: 1, Saves: 4, LastError: streamtest.ErrInjected}
	if diff := cmp.Diff(wantStats, r.Stats(), cmp.Comparer(func(a, b error) bool { return errors.Is(a, b) || errors.Is(b, a) })); diff != "" {
		t.Errorf("Stats() (-want +got):\n%s", diff)
	}
}

// Several WithHooks options add up, called in the order given.
func TestHooksAddUp(t *testing.T) {
	var calls []string
	hook := func(name string) stream.Option {
		return stream.WithHooks(stream.Hooks[int64]{OnCommit: func(stream.CommitEvent[int64]) { calls = append(calls, name) }})
	}
	r := newResumer(t, streamtest.NewSource(letters(2)), hook("metrics"), stream.WithHooks(stream.Hooks[int64]{}), hook("mine"))
	if _, err := collect(t, r); err != nil {
		t.Fatalf("Run() = %v, want nil", err)
	}
	if diff := cmp.Diff([]string{"metrics", "mine", "metrics", "mine"}, calls); diff != "" {
		t.Errorf("OnCommit calls (-want +got):\n%s", diff)
	}
}

func TestProgressOnlyEventsAdvanceWithoutDelivery(t *testing.T) {
	// Every third event is a heartbeat.
	heartbeat := func(e ev) (int64, error) {
		if e.Seq%3 == 0 {
			return e.Seq, cursor.ProgressOnly
		}
		return e.Seq, nil
	}
	r, err := stream.New(streamtest.NewSource(letters(7), streamtest.Step{Kind: streamtest.BreakAfter, K: 3}),
		heartbeat, cursor.NewMemory[int64](0), stream.WithBackoff(backoff.Constant(0)))
	if err != nil {
		t.Fatalf("New() = %v", err)
	}
	seen, err := collect(t, r)
	if err != nil {
		t.Fatalf("Run() = %v, want nil", err)
	}
	if diff := cmp.Diff([]int64{1, 2, 4, 5, 7}, seen); diff != "" {
		t.Errorf("delivered (-want +got):\n%s", diff)
	}
	if st := r.Stats(); st.Cursor != 7 || st.Events != 5 || st.Progress != 2 {
		t.Errorf("Stats() = cursor %d, events %d, progress %d, want 7, 5, 2", st.Cursor, st.Events, st.Progress)
	}
}

func TestStoreSaveFailureIsClassified(t *testing.T) {
	errDisk := errors.New("disk full")
	tests := []struct {
		name      string
		fail      error
		wantErr   error
		wantSaved int64
	}{
		{name: "permanent save failure ends Run and keeps the old cursor", fail: errclass.Permanent(errDisk), wantErr: errDisk, wantSaved: 0},
		{name: "retried save failure", fail: errDisk, wantErr: nil, wantSaved: 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := &flakyStore{fail: tt.fail}
			r, err := stream.New(streamtest.NewSource(letters(5)), extract, store, stream.WithBackoff(backoff.Constant(0)),
				stream.WithHooks(stream.Hooks[int64]{OnRetry: func(stream.RetryEvent[int64]) {
					store.setFail(nil) // the disk recovers
				}}))
			if err != nil {
				t.Fatalf("New() = %v", err)
			}
			seen, err := collect(t, r)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Fatalf("Run() = %v, want %v", err, tt.wantErr)
			}
			if got, _ := store.Load(context.Background()); got != tt.wantSaved {
				t.Errorf("Store.Load() = %d, want %d", got, tt.wantSaved)
			}
			if tt.wantErr == nil {
				if diff := cmp.Diff(seqs(1, 5), seen); diff != "" {
					t.Errorf("handled events (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func TestCheckpointCadence(t *testing.T) {
	tests := []struct {
		name      string
		opts      []stream.Option
		wantSaves int
	}{
		{name: "default saves every event", wantSaves: 10},
		{name: "every 4 events, plus the final save", opts: []stream.Option{stream.WithCheckpointEvery(4)}, wantSaves: 3},
		{name: "count 0 saves only at the end", opts: []stream.Option{stream.WithCheckpointEvery(0)}, wantSaves: 1},
		{name: "a long interval saves only at the end", opts: []stream.Option{stream.WithCheckpointInterval(time.Hour)}, wantSaves: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := &flakyStore{}
			r, err := stream.New(streamtest.NewSource(letters(10)), extract, store, tt.opts...)
			if err != nil {
				t.Fatalf("New() = %v", err)
			}
			var ahead bool
			err = r.Run(context.Background(), func(ctx context.Context, e ev) error {
				// The store is never ahead of what the handler finished.
				if saved, _ := store.Load(ctx); saved >= e.Seq {
					ahead = true
				}
				return nil
			})
			if err != nil {
				t.Fatalf("Run() = %v, want nil", err)
			}
			if ahead {
				t.Error("the store was ahead of the handler")
			}
			if store.saves != tt.wantSaves {
				t.Errorf("saves = %d, want %d", store.saves, tt.wantSaves)
			}
			if got, _ := store.Load(context.Background()); got != 10 {
				t.Errorf("Store.Load() = %d, want 10", got)
			}
		})
	}
}

func TestCheckpointIntervalSavesOnSchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &flakyStore{}
		src := streamtest.NewSource(letters(10))
		r, err := stream.New(src, extract, store, stream.WithCheckpointInterval(time.Minute))
		if err != nil {
			t.Fatalf("New() = %v", err)
		}
		err = r.Run(context.Background(), func(context.Context, ev) error {
			time.Sleep(25 * time.Second) // ten events over 250s: saves at 75s, 150s, 225s
			return nil
		})
		if err != nil {
			t.Fatalf("Run() = %v, want nil", err)
		}
		if store.saves != 4 {
			t.Errorf("saves = %d, want 4 (three on schedule, the final one)", store.saves)
		}
	})
}

func TestFinalSaveOnCancel(t *testing.T) {
	store := &flakyStore{}
	src := streamtest.NewSource(letters(5))
	src.SetEndOfLog(streamtest.Wait)
	r, err := stream.New(src, extract, store, stream.WithCheckpointEvery(0))
	if err != nil {
		t.Fatalf("New() = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	err = r.Run(ctx, func(_ context.Context, e ev) error {
		if e.Seq == 5 {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run() = %v, want %v", err, context.Canceled)
	}
	if got, _ := store.Load(context.Background()); got != 5 {
		t.Errorf("Store.Load() after cancel = %d, want 5", got)
	}
}

func TestLoadFailureIsClassified(t *testing.T) {
	errCorrupt := errclass.Permanent(errors.New("cursor file is corrupt"))
	r, err := stream.New(streamtest.NewSource(letters(3)), extract, failingLoad{err: errCorrupt})
	if err != nil {
		t.Fatalf("New() = %v", err)
	}
	if _, err := collect(t, r); !errors.Is(err, errCorrupt) {
		t.Fatalf("Run() = %v, want an error matching %v", err, errCorrupt)
	}
}

func TestEndOfStreamFromOpen(t *testing.T) {
	src := stream.SourceFunc[ev, int64](func(context.Context, int64) (stream.Conn[ev], error) {
		return nil, fmt.Errorf("204 no content: %w", stream.ErrEndOfStream)
	})
	if _, err := collect(t, newResumer(t, src)); err != nil {
		t.Fatalf("Run() = %v, want nil", err)
	}
}

var _ io.Closer = stream.Conn[int](nil)

// ctxSource is a streamtest source whose connections' Recv respect ctx at
// the end of the log (streamtest.Wait), declared through its RecvRespectsContext method.
type ctxSource struct{ *streamtest.Source[string] }

func (ctxSource) RecvRespectsContext() bool { return true }

func TestRecvRespectsContextSkipsTheWatcher(t *testing.T) {
	src := streamtest.NewSource(letters(3))
	src.SetEndOfLog(streamtest.Wait)
	r := newResumer(t, ctxSource{src})
	ctx, cancel := context.WithCancel(context.Background())
	err := r.Run(ctx, func(_ context.Context, e ev) error {
		if e.Seq == 3 {
			cancel() // Recv then waits at the end of the log, on ctx alone
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run() = %v, want %v", err, context.Canceled)
	}
	if live := src.Live(); live != 0 {
		t.Errorf("%d connections left open, want 0", live)
	}
}

// OnStop is called once per Run, after the final save, with what Run
// returns.
func TestOnStop(t *testing.T) {
	errRefused := errors.New("handler refused")
	tests := []struct {
		name       string
		refuseAt   int64 // the handler fails on this event (0: never)
		wantErr    error
		wantCursor int64
	}{
		{name: "end of stream", wantCursor: 3},
		{name: "handler error", refuseAt: 2, wantErr: errRefused, wantCursor: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := &flakyStore{}
			var stops []stream.StopEvent[int64]
			var savedAtStop int64
			r, err := stream.New(streamtest.NewSource(letters(3)), extract, store, stream.WithCheckpointEvery(0),
				stream.WithHooks(stream.Hooks[int64]{OnStop: func(e stream.StopEvent[int64]) {
					stops = append(stops, e)
					savedAtStop, _ = store.Load(context.Background())
				}}))
			if err != nil {
				t.Fatalf("New() = %v", err)
			}
			err = r.Run(context.Background(), func(_ context.Context, e ev) error {
				if e.Seq == tt.refuseAt {
					return errRefused
				}
				return nil
			})
			if len(stops) != 1 || stops[0].Err != err || stops[0].Cursor != tt.wantCursor {
				t.Fatalf("OnStop calls = %+v, want one with Run's error %v and cursor %d", stops, err, tt.wantCursor)
			}
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Errorf("Run() = %v, want %v", err, tt.wantErr)
			}
			if savedAtStop != tt.wantCursor {
				t.Errorf("the Store held %d when OnStop ran, want %d (after the final save)", savedAtStop, tt.wantCursor)
			}
		})
	}
}

// Defect 2: breaking out of All with WithHandlerRetry or WithDeadLetter
// panics. All's doc: "Breaking out of the loop … leaves the event it broke
// on uncommitted, to be delivered again by the next Run or All".
func TestBreakOutOfAllWithRetryOrDeadLetter(t *testing.T) {
	var parks atomic.Int64
	park := func(context.Context, ev, error) error { parks.Add(1); return nil }
	tests := []struct {
		name string
		opts []stream.Option
	}{
		{name: "handler retry", opts: []stream.Option{stream.WithHandlerRetry(3, backoff.Constant(0))}},
		{name: "dead letter", opts: []stream.Option{stream.WithDeadLetter(park)}},
		{name: "both", opts: []stream.Option{stream.WithHandlerRetry(3, backoff.Constant(0)), stream.WithDeadLetter(park)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				parks.Store(0)
				store := cursor.NewMemory[int64](0)
				r, err := stream.New(streamtest.NewSource(letters(5)), extract, store,
					append([]stream.Option{stream.WithBackoff(backoff.Constant(0))}, tt.opts...)...)
				if err != nil {
					t.Fatal(err)
				}
				var seen []int64
				panicked := func() (p any) {
					defer func() { p = recover() }()
					for e, err := range r.All(context.Background()) {
						if err != nil {
							t.Errorf("All yielded %v", err)
							return nil
						}
						seen = append(seen, e.Seq)
						if e.Seq == 3 {
							break
						}
					}
					return nil
				}()
				if panicked != nil {
					t.Fatalf("breaking out of All panicked: %v", panicked)
				}
				if fmt.Sprint(seen) != "[1 2 3]" {
					t.Errorf("All yielded %v, want [1 2 3]", seen)
				}
				if got := parks.Load(); got != 0 {
					t.Errorf("the dead letter was called %d times, want 0: a break is no failure", got)
				}
				st := r.Stats()
				if st.Cursor != 2 || st.Parked != 0 || st.HandlerRetries != 0 {
					t.Errorf("Stats() Cursor = %d, Parked = %d, HandlerRetries = %d, want 2, 0, 0", st.Cursor, st.Parked, st.HandlerRetries)
				}
				if c, _ := store.Load(context.Background()); c != 2 {
					t.Errorf("saved cursor %d, want 2: the event broken on stays uncommitted", c)
				}
				var again []int64
				if err := r.Run(context.Background(), record(&again)); err != nil {
					t.Fatalf("Run() after the break = %v, want nil", err)
				}
				if fmt.Sprint(again) != "[3 4 5]" {
					t.Errorf("Run after the break handled %v, want [3 4 5]", again)
				}
			})
		})
	}
}

// Defect 7: hooks run concurrently on handler goroutines. The Hooks doc:
// "called on the Resumer's goroutine". Two hooks must never overlap,
// whatever n is; under -race the hooks' unlocked counter races as well.
func TestHooksNeverOverlap(t *testing.T) {
	for _, n := range []int{1, 2, 4} {
		t.Run(fmt.Sprintf("n=%d", n), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var (
					inside   atomic.Bool
					overlaps atomic.Int64
					entered  = make(chan struct{}, 1)
					shared   int // unlocked on purpose: hooks are called one at a time (-race checks)
					calls    int
					first    = true
				)
				hook := func() {
					shared++
					if inside.Swap(true) {
						overlaps.Add(1)
						select {
						case entered <- struct{}{}:
						default:
						}
						return
					}
					calls++
					if first {
						first = false
						// The first hook lingers a fake second: a hook called
						// from another goroutine meanwhile enters and is seen.
						select {
						case <-entered:
						case <-time.After(time.Second):
						}
					}
					inside.Store(false)
				}
				hooks := stream.Hooks[int64]{
					OnHandlerError: func(stream.HandlerEvent[int64]) { hook() },
					OnCommit:       func(stream.CommitEvent[int64]) { hook() },
				}
				r := newResumer(t, streamtest.NewSource(letters(8)), stream.WithConcurrency(n),
					stream.WithHandlerRetry(2, backoff.Constant(0)),
					stream.WithDeadLetter(func(context.Context, ev, error) error { return nil }),
					stream.WithHooks(hooks))
				err := r.Run(context.Background(), func(context.Context, ev) error { return errors.New("handler: flaky") })
				if err != nil {
					t.Errorf("Run() = %v, want nil (every event parked)", err)
				}
				if got := overlaps.Load(); got > 0 {
					t.Errorf("a hook was called while another ran, %d times (n = %d)", got, n)
				}
				if want := 8*2 + 8; calls+int(overlaps.Load()) != want {
					t.Errorf("%d hook calls, want %d (two failed tries and a commit per event)", calls+int(overlaps.Load()), want)
				}
				if shared != calls+int(overlaps.Load()) {
					t.Errorf("the hooks' unlocked counter is %d after %d calls", shared, calls+int(overlaps.Load()))
				}
			})
		})
	}
}

func TestSkipRepeats(t *testing.T) {
	fetch := func(_ context.Context, after int64) ([]ev, error) {
		if after >= 3 {
			return nil, stream.ErrEndOfStream
		}
		return []ev{{Seq: after}, {Seq: after + 1}}, nil // inclusive: the event at after comes again
	}
	r := newResumer(t, stream.Pages(fetch), stream.WithCursorOrder(func(a, b int64) int { return int(a - b) }), stream.WithSkipRepeats())
	seen, err := collect(t, r)
	if err != nil {
		t.Fatalf("Run() = %v, want nil", err)
	}
	if fmt.Sprint(seen) != "[1 2 3]" {
		t.Errorf("handled %v, want [1 2 3] (the event at the start cursor and each repeat skipped)", seen)
	}
	if got := r.Stats().Skipped; got != 3 {
		t.Errorf("Stats().Skipped = %d, want 3", got)
	}
	if _, err := stream.New(stream.Pages(fetch), extract, cursor.NewMemory[int64](0), stream.WithSkipRepeats()); !errors.Is(err, stream.ErrInvalidOption) {
		t.Errorf("New(WithSkipRepeats without an order) = %v, want %v", err, stream.ErrInvalidOption)
	}
}
