package main

import (
	"context"
	"fmt"
	"io"
	"strconv"

	goredis "github.com/redis/go-redis/v9"

	"github.com/resumable-go/resumable/adapters/postgres/outbox"
	"github.com/resumable-go/resumable/adapters/redis"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/stream"
)

// handlerRetries is how many times a row's transaction is tried before
// the relay gives up (a Redis server gone for longer): each try after a
// lost reply first reads whether the last one landed.
const handlerRetries = 20

// cursorKey is the hash that keeps the cursor of table's rows in stream:
// in stream's hash slot, so that a Redis Cluster accepts the MULTI/EXEC.
func cursorKey(stream, table string) string { return "{" + stream + "}:cursor:" + table }

// relayRedis relays src into the Redis stream cfg.stream until ctx ends:
// the entries of a batch of rows and its cursor in one MULTI/EXEC.
func relayRedis(ctx context.Context, stdout, stderr io.Writer, cfg config, src *outbox.Source[row]) error {
	rdb := goredis.NewClient(&goredis.Options{Addr: cfg.redis})
	defer rdb.Close()
	store, err := redis.NewStore(rdb, cursorKey(cfg.stream, cfg.table), cursor.JSON[outbox.Cursor](), outbox.Cursor{})
	if err != nil {
		return err
	}
	r, err := outbox.NewResumer(src, store, stream.WithHandlerRetry(handlerRetries, nil))
	if err != nil {
		return err
	}
	add := redis.TransactionalBatch(store, outbox.Extract[row], func(ctx context.Context, p goredis.Pipeliner, evs []outbox.Event[row]) error {
		for _, ev := range evs {
			p.XAdd(ctx, &goredis.XAddArgs{Stream: cfg.stream, Values: []string{"id", strconv.FormatInt(ev.Row.ID, 10), "payload", ev.Row.Payload}})
		}
		return nil
	})
	return runRelay(ctx, stderr, r, src, func(ctx context.Context) error {
		return r.RunBatch(ctx, func(ctx context.Context, evs []outbox.Event[row]) error {
			if err := add(ctx, evs); err != nil {
				return err
			}
			for _, ev := range evs {
				if _, err := fmt.Fprintf(stdout, "handled %d\n", ev.Row.ID); err != nil {
					return err
				}
			}
			return nil
		})
	})
}
