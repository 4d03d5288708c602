package redis_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/resumable-go/resumable/adapters/redis"
	"github.com/resumable-go/resumable/stream"
)

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
