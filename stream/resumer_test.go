package stream_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"testing"
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

type ev = streamtest.Event[string]

var extract = streamtest.Extract[string]

// letters returns n log entries "e1".."en".
func letters(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("e%d", i+1)
	}
	return out
}

// collect runs r and returns the sequence numbers the handler saw.
func collect(t *testing.T, r *stream.Resumer[ev, int64]) ([]int64, error) {
	t.Helper()
	var seen []int64
	err := r.Run(context.Background(), func(_ context.Context, e ev) error {
		seen = append(seen, e.Seq)
		return nil
	})
	return seen, err
}

func seqs(from, to int64) []int64 {
	var out []int64
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

// countingPolicy records how its sequence is used and can give up.
type countingPolicy struct {
	mu     sync.Mutex
	step   time.Duration
	limit  int // give up after limit steps without reset (0: never)
	nexts  int
	resets int
}

func (p *countingPolicy) NewSequence() backoff.Sequence { return &countingSeq{p: p} }

// countingSeq is one sequence of a countingPolicy.
type countingSeq struct {
	p   *countingPolicy
	run int
}

func (s *countingSeq) Next() (time.Duration, bool) {
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	s.p.nexts++
	s.run++
	if s.p.limit > 0 && s.run > s.p.limit {
		return 0, false
	}
	return s.p.step, true
}

func (s *countingSeq) Reset() {
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	s.p.resets++
	s.run = 0
}

func (p *countingPolicy) counts() (nexts, resets int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.nexts, p.resets
}

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
			r, err := stream.New(src, extract, store, stream.WithBackoff(backoff.None()))
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
				src := streamtest.NewSource(letters(3), step)
				var decisions []errclass.Action
				r, err := stream.New(src, extract, cursor.NewMemory[int64](0),
					stream.WithClassifier(tt.classifier),
					stream.WithBackoff(backoff.None()),
					stream.WithHooks(stream.Hooks[int64]{OnDisconnect: func(e stream.DisconnectEvent[int64]) {
						if !e.Clean {
							decisions = append(decisions, e.Decision.Action)
						}
					}}))
				if err != nil {
					t.Fatalf("New() = %v", err)
				}
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

func TestCleanEndReopensWithoutBackoffAfterProgress(t *testing.T) {
	tests := []struct {
		name             string
		step             time.Duration
		script           []streamtest.Step
		wantNexts        int
		wantBackoffWaits int
	}{
		{name: "eof after events takes no step", script: []streamtest.Step{
			{Kind: streamtest.EndAfter, K: 2}, {Kind: streamtest.EndAfter, K: 2},
		}, wantNexts: 0},
		// A step far longer than a connection that closes at once lasts.
		{name: "eof at once with no event takes a step", step: 20 * time.Millisecond, script: []streamtest.Step{
			{Kind: streamtest.EndAfter, K: 0}, {Kind: streamtest.EndAfter, K: 0}, {Kind: streamtest.EndAfter, K: 1},
		}, wantNexts: 2, wantBackoffWaits: 2},
		{name: "a failure takes a step", script: []streamtest.Step{
			{Kind: streamtest.BreakAfter, K: 1}, {Kind: streamtest.FailOpen},
		}, wantNexts: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			core, logs := observer.New(zapcore.InfoLevel)
			policy := &countingPolicy{step: tt.step}
			src := streamtest.NewSource(letters(5), tt.script...)
			backoffWaits := 0
			r, err := stream.New(src, extract, cursor.NewMemory[int64](0),
				stream.WithBackoff(policy), stream.WithLogger(zap.New(core)),
				stream.WithHooks(stream.Hooks[int64]{OnRetry: func(e stream.RetryEvent[int64]) {
					if e.Reason == stream.DelayBackoff || e.Reason == stream.DelayPoll {
						backoffWaits++
					}
				}}))
			if err != nil {
				t.Fatalf("New() = %v", err)
			}
			seen, err := collect(t, r)
			if err != nil {
				t.Fatalf("Run() = %v, want nil", err)
			}
			if diff := cmp.Diff(seqs(1, 5), seen); diff != "" {
				t.Errorf("handled events (-want +got):\n%s", diff)
			}
			if nexts, _ := policy.counts(); nexts != tt.wantNexts {
				t.Errorf("backoff steps = %d, want %d", nexts, tt.wantNexts)
			}
			if backoffWaits != tt.wantBackoffWaits {
				t.Errorf("waits set by the backoff = %d, want %d", backoffWaits, tt.wantBackoffWaits)
			}
			st := r.Stats()
			if tt.wantNexts == 0 {
				if st.Retried+st.Failed+st.Expired != 0 {
					t.Errorf("Stats() failures = %d, %d, %d, want none", st.Retried, st.Failed, st.Expired)
				}
				if n := logs.Len(); n != 0 {
					t.Errorf("%d log entries at Info or above for clean ends, want 0: %v", n, logs.All())
				}
			}
		})
	}
}

func TestDelayIsTheLargestTerm(t *testing.T) {
	const minRestart = 40 * time.Millisecond
	tests := []struct {
		name       string
		step       streamtest.Step
		policy     backoff.Policy
		minRestart time.Duration
		wantReason stream.DelayReason
		wantDelay  time.Duration // exact, or the upper bound for min-restart
	}{
		{name: "backoff step", step: streamtest.Step{Kind: streamtest.FailOpen},
			policy: backoff.Constant(3 * time.Millisecond), wantReason: stream.DelayBackoff, wantDelay: 3 * time.Millisecond},
		{name: "server after beats backoff", step: streamtest.Step{Kind: streamtest.DelayAfter, Delay: 7 * time.Millisecond},
			policy: backoff.Constant(time.Millisecond), wantReason: stream.DelayServer, wantDelay: 7 * time.Millisecond},
		{name: "backoff beats server after", step: streamtest.Step{Kind: streamtest.DelayAfter, Delay: time.Millisecond},
			policy: backoff.Constant(6 * time.Millisecond), wantReason: stream.DelayBackoff, wantDelay: 6 * time.Millisecond},
		{name: "min restart beats both", step: streamtest.Step{Kind: streamtest.FailOpen},
			policy: backoff.Constant(time.Millisecond), minRestart: minRestart, wantReason: stream.DelayMinRestart, wantDelay: minRestart},
		{name: "no delay at all", step: streamtest.Step{Kind: streamtest.FailOpen},
			policy: backoff.None(), wantReason: stream.DelayNone, wantDelay: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var retries []stream.RetryEvent[int64]
			r, err := stream.New(streamtest.NewSource(letters(2), tt.step), extract, cursor.NewMemory[int64](0),
				stream.WithBackoff(tt.policy), stream.WithMinRestartDelay(tt.minRestart),
				stream.WithHooks(stream.Hooks[int64]{OnRetry: func(e stream.RetryEvent[int64]) { retries = append(retries, e) }}))
			if err != nil {
				t.Fatalf("New() = %v", err)
			}
			if _, err := collect(t, r); err != nil {
				t.Fatalf("Run() = %v, want nil", err)
			}
			if len(retries) != 1 {
				t.Fatalf("got %d retries, want 1", len(retries))
			}
			got := retries[0]
			if got.Reason != tt.wantReason {
				t.Errorf("Reason = %v, want %v", got.Reason, tt.wantReason)
			}
			if tt.wantReason == stream.DelayMinRestart {
				if got.Delay <= 0 || got.Delay > tt.wantDelay {
					t.Errorf("Delay = %v, want in (0, %v]", got.Delay, tt.wantDelay)
				}
			} else if got.Delay != tt.wantDelay {
				t.Errorf("Delay = %v, want %v", got.Delay, tt.wantDelay)
			}
		})
	}
}

func TestMinRestartDelayIsNonSliding(t *testing.T) {
	const minRestart = 5 * time.Millisecond
	var retries []stream.RetryEvent[int64]
	src := streamtest.NewSource(letters(3), streamtest.Step{Kind: streamtest.EndAfter, K: 1})
	r, err := stream.New(src, extract, cursor.NewMemory[int64](0),
		stream.WithBackoff(backoff.None()), stream.WithMinRestartDelay(minRestart),
		stream.WithHooks(stream.Hooks[int64]{OnRetry: func(e stream.RetryEvent[int64]) { retries = append(retries, e) }}))
	if err != nil {
		t.Fatalf("New() = %v", err)
	}
	err = r.Run(context.Background(), func(_ context.Context, e ev) error {
		// The first connection outlives the minimum restart delay.
		if e.Seq == 1 {
			start := src.Opens()[0].At
			for time.Since(start) <= minRestart {
				runtime.Gosched()
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Run() = %v, want nil", err)
	}
	if len(retries) != 1 {
		t.Fatalf("got %d retries, want 1", len(retries))
	}
	if got := retries[0]; got.Delay != 0 || got.Reason != stream.DelayNone {
		t.Errorf("retry after a long connection = %v (%v), want 0 (none)", got.Delay, got.Reason)
	}
}

func TestBackoffResetsAfterProgressAndGivesUp(t *testing.T) {
	policy := &countingPolicy{limit: 2}
	errDown := errors.New("server down")
	src := streamtest.NewSource(letters(3),
		streamtest.Step{Kind: streamtest.FailOpen, Err: errDown},
		streamtest.Step{Kind: streamtest.FailOpen, Err: errDown},
		streamtest.Step{Kind: streamtest.BreakAfter, K: 1, Err: errDown}, // progress: resets
		streamtest.Step{Kind: streamtest.FailOpen, Err: errDown},
		streamtest.Step{Kind: streamtest.FailOpen, Err: errDown},
		// the third failure in a row gives up before this step
	)
	r, err := stream.New(src, extract, cursor.NewMemory[int64](0), stream.WithBackoff(policy))
	if err != nil {
		t.Fatalf("New() = %v", err)
	}
	seen, err := collect(t, r)
	if !errors.Is(err, stream.ErrRetriesExhausted) || !errors.Is(err, errDown) {
		t.Fatalf("Run() = %v, want an error matching %v and %v", err, stream.ErrRetriesExhausted, errDown)
	}
	if diff := cmp.Diff(seqs(1, 1), seen); diff != "" {
		t.Errorf("handled events (-want +got):\n%s", diff)
	}
	// Both sequences reset at the start of Run, the failures' after the
	// progressing connection.
	if nexts, resets := policy.counts(); nexts != 5 || resets != 3 {
		t.Errorf("backoff nexts, resets = %d, %d, want 5, 3", nexts, resets)
	}
}

func TestCancellation(t *testing.T) {
	tests := []struct {
		name   string
		script []streamtest.Step
		policy backoff.Policy
	}{
		{name: "recv ignores ctx", script: []streamtest.Step{{Kind: streamtest.BlockAfter, K: 1}}, policy: backoff.None()},
		{name: "waiting for backoff", script: []streamtest.Step{{Kind: streamtest.BreakAfter, K: 1}}, policy: backoff.Constant(time.Hour)},
		{name: "waiting for server delay", script: []streamtest.Step{{Kind: streamtest.DelayAfter, K: 0, Delay: time.Hour}}, policy: backoff.None()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := streamtest.NewSource(letters(3), tt.script...)
			ctx, cancel := context.WithCancel(context.Background())
			// Cancel once the loop is stuck: after the first Open.
			stuck := make(chan struct{})
			var once sync.Once
			go func() {
				<-stuck
				cancel()
			}()
			r, err := stream.New(src, extract, cursor.NewMemory[int64](0), stream.WithBackoff(tt.policy),
				stream.WithHooks(stream.Hooks[int64]{
					OnConnect: func(stream.ConnectEvent[int64]) { once.Do(func() { close(stuck) }) },
					OnRetry:   func(stream.RetryEvent[int64]) { once.Do(func() { close(stuck) }) },
				}))
			if err != nil {
				t.Fatalf("New() = %v", err)
			}
			done := make(chan error, 1)
			go func() { done <- r.Run(ctx, func(context.Context, ev) error { return nil }) }()
			select {
			case err := <-done:
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("Run() = %v, want %v", err, context.Canceled)
				}
			case <-time.After(10 * time.Second):
				cancel()
				t.Fatal("Run() did not return within 10s of cancellation")
			}
			if live := src.Live(); live != 0 {
				t.Errorf("%d connections left open, want 0", live)
			}
		})
	}
}

func TestCancelledBeforeRun(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	src := streamtest.NewSource(letters(3))
	r, err := stream.New(src, extract, cursor.NewMemory[int64](0))
	if err != nil {
		t.Fatalf("New() = %v", err)
	}
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
			r, err := stream.New(streamtest.NewSource(letters(4), tt.script...), extract, cursor.NewMemory[int64](0),
				stream.WithBackoff(backoff.None()))
			if err != nil {
				t.Fatalf("New() = %v", err)
			}
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
}

func TestNewRejectsBadInput(t *testing.T) {
	src := streamtest.NewSource(letters(1))
	store := cursor.NewMemory[int64](0)
	var nilSource *streamtest.Source[string]
	var nilStore *cursor.Memory[int64]
	tests := []struct {
		name    string
		build   func() (*stream.Resumer[ev, int64], error)
		wantErr bool
	}{
		{name: "valid", build: func() (*stream.Resumer[ev, int64], error) { return stream.New(src, extract, store) }},
		{name: "nil source", build: func() (*stream.Resumer[ev, int64], error) { return stream.New(nil, extract, store) }, wantErr: true},
		{name: "typed nil source", build: func() (*stream.Resumer[ev, int64], error) { return stream.New(nilSource, extract, store) }, wantErr: true},
		{name: "nil extractor", build: func() (*stream.Resumer[ev, int64], error) { return stream.New(src, nil, store) }, wantErr: true},
		{name: "nil store", build: func() (*stream.Resumer[ev, int64], error) { return stream.New(src, extract, nil) }, wantErr: true},
		{name: "typed nil store", build: func() (*stream.Resumer[ev, int64], error) { return stream.New(src, extract, nilStore) }, wantErr: true},
		{name: "negative min restart", build: func() (*stream.Resumer[ev, int64], error) {
			return stream.New(src, extract, store, stream.WithMinRestartDelay(-time.Second))
		}, wantErr: true},
		{name: "negative checkpoint count", build: func() (*stream.Resumer[ev, int64], error) {
			return stream.New(src, extract, store, stream.WithCheckpointEvery(-1))
		}, wantErr: true},
		{name: "negative checkpoint interval", build: func() (*stream.Resumer[ev, int64], error) {
			return stream.New(src, extract, store, stream.WithCheckpointInterval(-time.Second))
		}, wantErr: true},
		{name: "invalid backoff", build: func() (*stream.Resumer[ev, int64], error) {
			return stream.New(src, extract, store, stream.WithBackoff(backoff.Exponential(backoff.WithMultiplier(0.5))))
		}, wantErr: true},
		{name: "hooks of another cursor type", build: func() (*stream.Resumer[ev, int64], error) {
			return stream.New(src, extract, store, stream.WithHooks(stream.Hooks[string]{}))
		}, wantErr: true},
		{name: "nil logger, classifier, backoff and options are fine", build: func() (*stream.Resumer[ev, int64], error) {
			return stream.New(src, extract, store, nil, stream.WithLogger(nil), stream.WithClassifier(nil), stream.WithBackoff(nil))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := tt.build()
			if tt.wantErr {
				if !errors.Is(err, stream.ErrInvalidOption) || r != nil {
					t.Fatalf("New() = %v, %v, want nil and an error matching %v", r, err, stream.ErrInvalidOption)
				}
				return
			}
			if err != nil || r == nil {
				t.Fatalf("New() = %v, %v, want a Resumer", r, err)
			}
		})
	}
}

func TestLogging(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	src := streamtest.NewSource(letters(4),
		streamtest.Step{Kind: streamtest.BreakAfter, K: 1, Err: errors.New("connection reset")},
		streamtest.Step{Kind: streamtest.EndAfter, K: 1},
	)
	r, err := stream.New(src, extract, cursor.NewMemory[int64](0),
		stream.WithBackoff(backoff.Constant(time.Millisecond)), stream.WithLogger(zap.New(core)))
	if err != nil {
		t.Fatalf("New() = %v", err)
	}
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
	r, err := stream.New(src, extract, cursor.NewMemory[int64](0), stream.WithBackoff(backoff.None()),
		stream.WithHooks(stream.Hooks[int64]{
			OnConnect:    func(stream.ConnectEvent[int64]) { count("connect") },
			OnDisconnect: func(stream.DisconnectEvent[int64]) { count("disconnect") },
			OnRetry:      func(stream.RetryEvent[int64]) { count("retry") },
			OnCommit:     func(stream.CommitEvent[int64]) { count("commit") },
			OnSave:       func(stream.SaveEvent[int64]) { count("save") },
		}))
	if err != nil {
		t.Fatalf("New() = %v", err)
	}
	if _, err := collect(t, r); err != nil {
		t.Fatalf("Run() = %v, want nil", err)
	}
	want := map[string]int{"connect": 2, "disconnect": 2, "retry": 2, "commit": 4, "save": 4}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("hook calls (-want +got):\n%s", diff)
	}
	st := r.Stats()
	wantStats := stream.Stats[int64]{Cursor: 4, Events: 4, Opens: 2, CleanEnds: 1, Retried: 1, Saves: 4, LastError: streamtest.ErrInjected}
	if diff := cmp.Diff(wantStats, st, cmp.Comparer(func(a, b error) bool { return errors.Is(a, b) || errors.Is(b, a) })); diff != "" {
		t.Errorf("Stats() (-want +got):\n%s", diff)
	}
}

func TestProgressOnlyEventsAdvanceWithoutDelivery(t *testing.T) {
	// Every third event is a heartbeat.
	heartbeat := func(e ev) bool { return e.Seq%3 == 0 }
	r, err := stream.New(streamtest.NewSource(letters(7), streamtest.Step{Kind: streamtest.BreakAfter, K: 3}),
		cursor.WithProgress(extract, heartbeat), cursor.NewMemory[int64](0), stream.WithBackoff(backoff.None()))
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

// flakyStore fails Save while fail is set, and counts saves.
type flakyStore struct {
	cursor.Memory[int64]
	mu    sync.Mutex
	fail  error
	saves int
}

func (s *flakyStore) Save(ctx context.Context, c int64) error {
	s.mu.Lock()
	err := s.fail
	s.saves++
	s.mu.Unlock()
	if err != nil {
		return err
	}
	return s.Memory.Save(ctx, c)
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
			var failures int
			r, err := stream.New(streamtest.NewSource(letters(5)), extract, store, stream.WithBackoff(backoff.None()),
				stream.WithHooks(stream.Hooks[int64]{OnRetry: func(stream.RetryEvent[int64]) {
					failures++
					store.mu.Lock()
					store.fail = nil // the disk recovers
					store.mu.Unlock()
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
			var lagging bool
			err = r.Run(context.Background(), func(ctx context.Context, e ev) error {
				// The store is never ahead of what the handler finished.
				if saved, _ := store.Load(ctx); saved >= e.Seq {
					lagging = true
				}
				return nil
			})
			if err != nil {
				t.Fatalf("Run() = %v, want nil", err)
			}
			if lagging {
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

type failingLoad struct{ err error }

func (f failingLoad) Load(context.Context) (int64, error) { return 0, f.err }
func (f failingLoad) Save(context.Context, int64) error   { return nil }

func TestResyncOnExpiredCursor(t *testing.T) {
	src := streamtest.NewSource(letters(6), streamtest.Step{Kind: streamtest.ExpireAfter, K: 2})
	var resyncs []stream.ResyncEvent[int64]
	resync := func(ctx context.Context, cause error, emit func(ev) error) (int64, error) {
		if !errors.Is(cause, errclass.ErrExpired) {
			t.Errorf("resync cause %v does not match ErrExpired", cause)
		}
		// A fresh listing: replay event 3 and 4, continue after 4.
		for _, e := range []ev{{Seq: 3, Value: "e3"}, {Seq: 4, Value: "e4"}} {
			if err := emit(e); err != nil {
				return 0, err
			}
		}
		return 4, nil
	}
	r, err := stream.New(src, extract, cursor.NewMemory[int64](0),
		stream.WithBackoff(backoff.None()), stream.WithResync(resync),
		stream.WithHooks(stream.Hooks[int64]{OnResync: func(e stream.ResyncEvent[int64]) { resyncs = append(resyncs, e) }}))
	if err != nil {
		t.Fatalf("New() = %v", err)
	}
	seen, err := collect(t, r)
	if err != nil {
		t.Fatalf("Run() = %v, want nil", err)
	}
	if diff := cmp.Diff(seqs(1, 6), seen); diff != "" {
		t.Errorf("handled events (-want +got):\n%s", diff)
	}
	if len(resyncs) != 1 || resyncs[0].From != 2 || resyncs[0].To != 4 || resyncs[0].Replayed != 2 {
		t.Errorf("resyncs = %+v, want one from 2 to 4 replaying 2", resyncs)
	}
	opens := src.Opens()
	if got := opens[len(opens)-1].After; got != 4 {
		t.Errorf("last Open after %d, want 4", got)
	}
}

func TestResyncFailureIsClassified(t *testing.T) {
	src := streamtest.NewSource(letters(3))
	src.ExpireThrough(0)
	src.AddSteps(streamtest.Step{Kind: streamtest.ExpireAfter, K: 0}, streamtest.Step{Kind: streamtest.ExpireAfter, K: 0})
	calls := 0
	resync := func(context.Context, error, func(ev) error) (int64, error) {
		calls++
		if calls == 1 {
			return 0, errors.New("list failed")
		}
		return 0, nil
	}
	r, err := stream.New(src, extract, cursor.NewMemory[int64](0), stream.WithBackoff(backoff.None()), stream.WithResync(resync))
	if err != nil {
		t.Fatalf("New() = %v", err)
	}
	seen, err := collect(t, r)
	if err != nil {
		t.Fatalf("Run() = %v, want nil", err)
	}
	if diff := cmp.Diff(seqs(1, 3), seen); diff != "" {
		t.Errorf("handled events (-want +got):\n%s", diff)
	}
	if calls != 2 {
		t.Errorf("resync called %d times, want 2", calls)
	}
}

func TestEndOfStreamFromOpen(t *testing.T) {
	src := stream.SourceFunc[ev, int64](func(context.Context, int64) (stream.Conn[ev], error) {
		return nil, fmt.Errorf("204 no content: %w", stream.ErrEndOfStream)
	})
	r, err := stream.New(src, extract, cursor.NewMemory[int64](0))
	if err != nil {
		t.Fatalf("New() = %v", err)
	}
	if _, err := collect(t, r); err != nil {
		t.Fatalf("Run() = %v, want nil", err)
	}
}

var _ io.Closer = stream.Conn[int](nil)

// eofConn delivers one event, then ends cleanly with err.
type eofConn struct {
	sent bool
	err  error
}

func (c *eofConn) Recv(context.Context) (ev, error) {
	if c.sent {
		return ev{}, c.err
	}
	c.sent = true
	return ev{Seq: 1}, nil
}

func (c *eofConn) Close() error { return nil }

func TestCleanEndHonoursServerDelay(t *testing.T) {
	opens := 0
	src := stream.SourceFunc[ev, int64](func(_ context.Context, after int64) (stream.Conn[ev], error) {
		opens++
		if opens > 1 {
			return nil, stream.ErrEndOfStream
		}
		// SSE: the server set retry: 30ms, then closed the connection.
		return &eofConn{err: errclass.RetryAfter(io.EOF, 30*time.Millisecond)}, nil
	})
	var retries []stream.RetryEvent[int64]
	r, err := stream.New(src, extract, cursor.NewMemory[int64](0), stream.WithBackoff(backoff.None()),
		stream.WithHooks(stream.Hooks[int64]{OnRetry: func(e stream.RetryEvent[int64]) { retries = append(retries, e) }}))
	if err != nil {
		t.Fatalf("New() = %v", err)
	}
	if _, err := collect(t, r); err != nil {
		t.Fatalf("Run() = %v, want nil", err)
	}
	if len(retries) != 1 || retries[0].Reason != stream.DelayServer || retries[0].Delay != 30*time.Millisecond {
		t.Fatalf("retries = %+v, want one of 30ms for the server", retries)
	}
	if st := r.Stats(); st.CleanEnds != 1 || st.Retried != 0 {
		t.Errorf("Stats() clean ends %d, retried failures %d, want 1, 0", st.CleanEnds, st.Retried)
	}
}

// ctxSource is a streamtest source whose connections' Recv respect ctx at
// the end of the log (streamtest.Wait), declared through ContextRespecter.
type ctxSource struct{ *streamtest.Source[string] }

func (ctxSource) RecvRespectsContext() bool { return true }

func TestContextRespecterSkipsTheWatcher(t *testing.T) {
	src := streamtest.NewSource(letters(3))
	src.SetEndOfLog(streamtest.Wait)
	r, err := stream.New[ev, int64](ctxSource{src}, extract, cursor.NewMemory[int64](0))
	if err != nil {
		t.Fatalf("New() = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	err = r.Run(ctx, func(_ context.Context, e ev) error {
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

// idleConn delivers nothing and ends cleanly once it has been open longer
// than lifetime: a quiet stream whose server ends it on schedule.
type idleConn struct {
	opened   time.Time
	lifetime time.Duration
}

func (c *idleConn) Recv(context.Context) (ev, error) {
	for time.Since(c.opened) <= c.lifetime {
		runtime.Gosched()
	}
	return ev{}, io.EOF
}

func (c *idleConn) Close() error { return nil }

// An idle connection the server ends on schedule is no failure: no backoff
// step, no attempt counted, so a policy that gives up after N attempts never
// stops a healthy quiet stream; nothing logged above Debug.
func TestIdleCleanEndTakesNoStep(t *testing.T) {
	const idleEnds = 5
	opens := 0
	src := stream.SourceFunc[ev, int64](func(context.Context, int64) (stream.Conn[ev], error) {
		opens++
		if opens > idleEnds {
			return nil, stream.ErrEndOfStream
		}
		return &idleConn{opened: time.Now(), lifetime: 2 * time.Millisecond}, nil
	})
	core, logs := observer.New(zapcore.InfoLevel)
	var retries []stream.RetryEvent[int64]
	// A policy whose step (1ms) is shorter than each idle connection, and
	// which gives up after 2 steps in a row.
	policy := &countingPolicy{step: time.Millisecond, limit: 2}
	r, err := stream.New(src, extract, cursor.NewMemory[int64](0),
		stream.WithBackoff(policy), stream.WithLogger(zap.New(core)),
		stream.WithHooks(stream.Hooks[int64]{OnRetry: func(e stream.RetryEvent[int64]) { retries = append(retries, e) }}))
	if err != nil {
		t.Fatalf("New() = %v", err)
	}
	if _, err := collect(t, r); err != nil {
		t.Fatalf("Run() = %v, want nil: idle ends must not exhaust the backoff", err)
	}
	if len(retries) != idleEnds {
		t.Fatalf("got %d retries, want %d", len(retries), idleEnds)
	}
	for i, e := range retries {
		if e.Attempt != 0 || e.Reason != stream.DelayNone || e.Delay != 0 {
			t.Errorf("retry %d = attempt %d, %v (%v), want attempt 0, no delay", i, e.Attempt, e.Delay, e.Reason)
		}
	}
	if n := logs.Len(); n != 0 {
		t.Errorf("%d log entries at Info or above for idle ends, want 0: %v", n, logs.All())
	}
}
