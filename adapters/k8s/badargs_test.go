package k8s_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/resumable-go/resumable/adapters/k8s"
	"github.com/resumable-go/resumable/backoff"
	"github.com/resumable-go/resumable/stream"
)

// TestBadArgumentsNameTheArgument gives every constructor and option of the
// package a bad value: each error matches stream.ErrInvalidOption and its
// message names the argument. The options not listed take no bad value (a
// nil means the default).
func TestBadArgumentsNameTheArgument(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	lw := newScripted()
	// The watcher of a case that unexpectedly succeeds is stopped.
	errOf := func(rw *k8s.RetryWatcher, err error) error {
		if rw != nil {
			stop(t, rw)
		}
		return err
	}
	withOpts := func(opts ...k8s.Option) error {
		return errOf(k8s.NewRetryWatcherWithContext(ctx, "1", lw, opts...))
	}
	resync := func(f k8s.ResyncFunc) error {
		_, err := f(ctx, "5", func(watch.Event) error { return nil })
		return err
	}
	tests := []struct {
		name string
		err  error
		want []string // each in the message
	}{
		{name: "NewRetryWatcherWithContext initialResourceVersion empty", err: errOf(k8s.NewRetryWatcherWithContext(ctx, "", lw)),
			want: []string{`initial RV "" is not supported`}},
		{name: "NewRetryWatcherWithContext initialResourceVersion 0", err: errOf(k8s.NewRetryWatcherWithContext(ctx, "0", lw)),
			want: []string{`initial RV "0" is not supported`}},
		{name: "NewRetryWatcherWithContext watcherClient", err: errOf(k8s.NewRetryWatcherWithContext(ctx, "1", nil)),
			want: []string{"k8s: NewRetryWatcherWithContext: watcherClient = nil"}},
		{name: "NewRetryWatcher watcherClient", err: errOf(k8s.NewRetryWatcher("1", nil)),
			want: []string{"k8s: NewRetryWatcher: watcherClient = nil"}},
		{name: "NewRetryWatcherFromNow lw", err: errOf(k8s.NewRetryWatcherFromNow(ctx, nil)),
			want: []string{"k8s: NewRetryWatcherFromNow: lw = nil"}},
		{name: "NewRetryWatcherFromNow option, before listing", err: errOf(k8s.NewRetryWatcherFromNow(ctx, &cache.ListWatch{}, k8s.WithIdleTimeout(-1))),
			want: []string{"k8s: WithIdleTimeout: d = -1ns"}},
		{name: "Until watcherClient", err: func() error { _, err := k8s.Until(ctx, "1", nil); return err }(),
			want: []string{"k8s: Until: watcherClient = nil"}},
		{name: "WithMinRestartDelay", err: withOpts(k8s.WithMinRestartDelay(-1)), want: []string{"k8s: WithMinRestartDelay: d = -1ns"}},
		{name: "WithIdleTimeout", err: withOpts(k8s.WithIdleTimeout(-1)), want: []string{"k8s: WithIdleTimeout: d = -1ns"}},
		{name: "WithBackoff", err: withOpts(k8s.WithBackoff(backoff.Exponential(backoff.WithMultiplier(0.5)))), want: []string{"WithBackoff"}},
		{name: "WithOpenLimiter", err: withOpts(k8s.WithOpenLimiter((*gate)(nil))), want: []string{"WithOpenLimiter"}},
		{name: "WithResyncDiff without WithResync", err: withOpts(k8s.WithResyncDiff()), want: []string{"k8s: WithResyncDiff: WithResync = nil"}},
		{name: "WithResyncDiff known", err: withOpts(k8s.WithResync(k8s.ListResync(&cache.ListWatch{})), k8s.WithResyncDiff(&noRV{})),
			want: []string{"k8s: WithResyncDiff: known = *k8s_test.noRV"}},
		{name: "ListResync lw", err: resync(k8s.ListResync(nil)), want: []string{"k8s: ListResync: lw = nil"}},
		{name: "WatchListResync lw", err: resync(k8s.WatchListResync(nil)), want: []string{"k8s: WatchListResync: lw = nil"}},
		{name: "every argument at once", err: errOf(k8s.NewRetryWatcherWithContext(ctx, "", nil, k8s.WithMinRestartDelay(-1), k8s.WithResyncDiff())),
			want: []string{`initial RV ""`, "watcherClient = nil", "WithMinRestartDelay: d = -1ns", "WithResyncDiff: WithResync = nil"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !errors.Is(tt.err, stream.ErrInvalidOption) {
				t.Fatalf("err = %v, want one matching %v", tt.err, stream.ErrInvalidOption)
			}
			for _, w := range tt.want {
				if !strings.Contains(tt.err.Error(), w) {
					t.Errorf("err = %q, want it to contain %q", tt.err, w)
				}
			}
		})
	}
}
