package redis_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

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

// TestManyGroupsOneClient: 30 consumers of 30 streams on one client whose
// pool holds 4 connections: their blocking reads take none of it, so none
// waits for the pool.
func TestManyGroupsOneClient(t *testing.T) {
	srv, _ := server(t)
	rdb := goredis.NewClient(&goredis.Options{Addr: srv.Addr, PoolSize: 4, PoolTimeout: guard})
	defer rdb.Close()
	const n = 30
	ctx, cancel := context.WithTimeout(t.Context(), guard)
	defer cancel()
	errs := make(chan error, n)
	for i := range n {
		key := fmt.Sprint("s", i)
		g, err := redis.NewGroup(rdb, key, "g", "c", redis.WithBlock(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		r, err := redis.NewGroupResumer(g)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			errs <- r.Run(ctx, g.Handler(func(context.Context, redis.Entry) error { return stream.ErrStop }))
		}()
	}
	// Every consumer blocks in its read, then gets one entry.
	awaitBlockedN(t, rdb, "xreadgroup", n)
	for i := range n {
		if err := rdb.XAdd(ctx, &goredis.XAddArgs{Stream: fmt.Sprint("s", i), Values: []string{"n", "1"}}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for range n {
		if err := <-errs; err != nil {
			t.Errorf("Run() = %v, want nil", err)
		}
	}
}
