package redis_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/resumable-go/resumable/adapters/redis"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/stream"
)

// TestStopWhenServerPaused: a reader blocked for ten minutes stops when
// its context ends though the server answers nothing (SIGSTOP): it does
// not wait for a reply, nor for go-redis's read timeout (block + 10s).
func TestStopWhenServerPaused(t *testing.T) {
	for _, cmd := range []string{"xread", "xreadgroup"} {
		t.Run(cmd, func(t *testing.T) {
			srv, rdb := server(t)
			add(t, rdb, "s", 0, 1)
			var r *stream.Resumer[redis.Entry, string]
			if cmd == "xread" {
				src, _ := redis.NewSource(rdb, "s", redis.WithBlock(10*time.Minute))
				r, _ = redis.NewResumer(src, cursor.NewMemory(""))
			} else {
				r, _ = redis.NewGroupResumer(newGroup(t, rdb, "c", redis.WithBlock(10*time.Minute)))
			}
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() { done <- r.Run(ctx, func(context.Context, redis.Entry) error { return nil }) }()
			awaitBlocked(t, rdb, cmd)
			if err := srv.Pause(); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = srv.Resume() }()
			cancel()
			select {
			case err := <-done:
				if !errors.Is(err, context.Canceled) {
					t.Errorf("Run() = %v, want context.Canceled", err)
				}
			case <-time.After(guard): // a hang ends here
				_ = srv.Resume()
				<-done
				t.Fatalf("Run() still running %v after its context ended, the server paused", guard)
			}
		})
	}
}
