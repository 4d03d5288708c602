package redis_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/resumable-go/resumable/adapters/redis"
	"github.com/resumable-go/resumable/cursor"
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

// TestSourceLaneOneConnection: a Source's reads, pipelined and blocking,
// share one connection of its lane: a reader blocked after a backlog
// holds two connections named after its client, the one Open used from
// the client's pool and the lane's.
func TestSourceLaneOneConnection(t *testing.T) {
	srv, rdb := server(t)
	reader := goredis.NewClient(&goredis.Options{Addr: srv.Addr, ClientName: "reader"})
	defer reader.Close()
	ids := add(t, rdb, "s", 0, 3)
	src, _ := redis.NewSource(reader, "s")
	r, _ := redis.NewResumer(src, cursor.NewMemory(""))
	var wg sync.WaitGroup
	defer wg.Wait()
	conns := -1
	got := make(map[string]bool)
	err := r.Run(t.Context(), func(_ context.Context, e redis.Entry) error {
		got[e.ID] = true
		switch {
		case e.ID == ids[2]:
			wg.Go(func() {
				awaitBlocked(t, rdb, "xread")
				conns = namedConns(t, rdb, "reader")
				add(t, rdb, "s", 3, 1)
			})
		case !slices.Contains(ids, e.ID):
			return stream.ErrStop
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Run() = %v, want nil", err)
	}
	wg.Wait()
	if conns != 2 {
		t.Errorf("connections named reader while blocked = %d, want 2", conns)
	}
}

// namedConns counts the server's connections named name.
func namedConns(t *testing.T, rdb *goredis.Client, name string) int {
	list, err := rdb.ClientList(context.Background()).Result()
	if err != nil {
		t.Error(err)
	}
	n := 0
	for _, line := range strings.Split(list, "\n") {
		if strings.Contains(line, " name="+name+" ") {
			n++
		}
	}
	return n
}
