package redis_test

import (
	"context"
	"fmt"
	"testing"

	goredis "github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/resumable-go/resumable/internal/testkit/redistest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// server starts a Redis server for t and returns a client of it, closed
// when t ends.
func server(t *testing.T) (*redistest.Server, *goredis.Client) {
	t.Helper()
	srv := redistest.Start(t)
	rdb := goredis.NewClient(&goredis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	return srv, rdb
}

// add appends n entries with field n = 0..n-1 (from base) and returns
// their IDs.
func add(t *testing.T, rdb *goredis.Client, key string, base, n int) []string {
	t.Helper()
	ids := make([]string, 0, n)
	for i := range n {
		id, err := rdb.XAdd(context.Background(), &goredis.XAddArgs{Stream: key, Values: map[string]any{"n": fmt.Sprint(base + i)}}).Result()
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}
