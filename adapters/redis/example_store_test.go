package redis_test

import (
	"context"
	"errors"
	"fmt"

	goredis "github.com/redis/go-redis/v9"

	"github.com/resumable-go/resumable/adapters/redis"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/stream"
)

// NewStore checks its arguments before any round trip: every bad one is
// reported at once.
func ExampleNewStore() {
	_, err := redis.NewStore[string](nil, "", cursor.String(), "")
	fmt.Println(err)
	fmt.Println(errors.Is(err, stream.ErrInvalidOption))
	// Output:
	// redis: NewStore: rdb = nil: required
	// redis: NewStore: key = "": must not be empty
	// true
}

// A relay from the stream "orders" into "{orders}.billing", each entry
// copied exactly once: the XADD and the cursor are one MULTI/EXEC, and a
// predecessor still running after its successor loaded the cursor writes
// nothing. (It needs a Redis server, so it is compiled, not run.)
func ExampleTransactional() {
	rdb := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	src, err := redis.NewSource(rdb, "orders")
	if err != nil {
		panic(err)
	}
	store, err := redis.NewStore(rdb, "{orders}.billing-cursor", cursor.String(), "")
	if err != nil {
		panic(err)
	}
	r, err := redis.NewResumer(src, store, stream.WithHandlerRetry(5, nil))
	if err != nil {
		panic(err)
	}
	err = r.Run(context.Background(), redis.Transactional(store, redis.Extract,
		func(ctx context.Context, p goredis.Pipeliner, e redis.Entry) error {
			p.XAdd(ctx, &goredis.XAddArgs{Stream: "{orders}.billing", Values: e.Values})
			return nil
		}))
	fmt.Println(err)
}
