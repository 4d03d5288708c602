package stream_test

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/resumable-go/resumable/backoff"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/stream"
)

// failingLimiter fails every Wait at once and counts the calls.
type failingLimiter struct{ calls atomic.Int64 }

func TestFailedLimiterWaitObeysMinRestartDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := &failingLimiter{}
		src := stream.SourceFunc[ev, int64](func(context.Context, int64) (stream.Conn[ev], error) {
			t.Error("Open called although the limiter never let it")
			return nil, io.ErrUnexpectedEOF
		})
		r := newResumer(t, src, stream.WithOpenLimiter(lim), stream.WithMinRestartDelay(time.Second))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := r.Run(ctx, func(context.Context, ev) error { return nil }); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Run() = %v, want %v", err, context.DeadlineExceeded)
		}
		if got := lim.calls.Load(); got > 11 {
			t.Errorf("limiter called %d times in 10s with a 1s minimum restart delay, want at most 11", got)
		}
	})
}

// heartbeat is a progress-only event at seq: streamtest's extractor has no
// progress-only events, so these tests mark them by name.
func heartbeatExtract(e ev) (int64, error) {
	if e.Value == "beat" {
		return e.Seq, cursor.ProgressOnly
	}
	return e.Seq, nil
}

func TestHeartbeatOnlyConnectionsWait(t *testing.T) {
	tests := []struct {
		name string
		opts []stream.Option
		max  int64
	}{
		{name: "poll interval", opts: []stream.Option{stream.WithPollInterval(time.Second)}, max: 11},
		{name: "empty-end step", opts: []stream.Option{stream.WithBackoff(backoff.Constant(time.Second))}, max: 11},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var opens atomic.Int64
				src := stream.SourceFunc[ev, int64](func(context.Context, int64) (stream.Conn[ev], error) {
					opens.Add(1)
					return newScriptConn(io.EOF, ev{Seq: 0, Value: "beat"}), nil // a heartbeat at the same cursor, then the end
				})
				r, err := stream.New(src, heartbeatExtract, cursor.NewMemory[int64](0), tt.opts...)
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				_ = r.Run(ctx, func(context.Context, ev) error { return nil })
				if got := opens.Load(); got > tt.max {
					t.Errorf("%d opens in 10s of heartbeat-only connections, want at most %d", got, tt.max)
				}
			})
		})
	}
}

func TestInclusivePagesDoNotSpin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var fetches, handled atomic.Int64
		fetch := func(_ context.Context, after int64) ([]ev, error) {
			fetches.Add(1)
			if after == 0 {
				return []ev{{Seq: 1, Value: "a"}}, nil
			}
			return []ev{{Seq: after, Value: "again"}}, nil // the server includes the event at after
		}
		r := newResumer(t, stream.Pages(fetch), stream.WithCursorOrder(func(a, b int64) int { return int(a - b) }), stream.WithPollInterval(time.Second))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = r.Run(ctx, func(context.Context, ev) error { handled.Add(1); return nil })
		if got := fetches.Load(); got > 12 {
			t.Errorf("%d fetches in 10s with a 1s poll interval, want at most 12", got)
		}
		if got := handled.Load(); got > 12 {
			t.Errorf("%d events handled in 10s, want at most 12", got)
		}
	})
}
