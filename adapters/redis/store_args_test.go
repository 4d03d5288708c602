package redis_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/resumable-go/resumable/adapters/redis"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/stream"
)

// TestStoreBadArguments: NewStore reports every bad argument at once, and
// a Transactional handler made of nil arguments returns their error,
// marked Permanent, at every call. No server is needed.
func TestStoreBadArguments(t *testing.T) {
	rdb := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	var nilClient *goredis.Client
	s, err := redis.NewStore(rdb, "k", cursor.String(), "")
	if err != nil {
		t.Fatal(err)
	}
	fn := func(context.Context, goredis.Pipeliner, redis.Entry) error { return nil }
	batchFn := func(context.Context, goredis.Pipeliner, []redis.Entry) error { return nil }
	tests := []struct {
		name string
		err  func() error
		want []string
	}{
		{name: "NewStore", err: func() error { _, err := redis.NewStore[string](nil, "", nil, ""); return err }, want: []string{
			"redis: NewStore: rdb = nil: required",
			`redis: NewStore: key = "": must not be empty`,
			"redis: NewStore: codec = nil: required",
		}},
		{name: "NewStore typed nil client", err: func() error { _, err := redis.NewStore(nilClient, "k", cursor.String(), ""); return err }, want: []string{
			"redis: NewStore: rdb = nil: required",
		}},
		{name: "Transactional", err: func() error {
			return redis.Transactional[redis.Entry, string](nil, nil, nil)(t.Context(), redis.Entry{})
		}, want: []string{
			"redis: Transactional: s = nil: required",
			"redis: Transactional: extract = nil: required",
			"redis: Transactional: fn = nil: required",
		}},
		{name: "Transactional nil fn", err: func() error {
			return redis.Transactional[redis.Entry](s, redis.Extract, nil)(t.Context(), redis.Entry{})
		}, want: []string{"redis: Transactional: fn = nil: required"}},
		{name: "TransactionalBatch", err: func() error {
			return redis.TransactionalBatch(nil, redis.Extract, batchFn)(t.Context(), nil)
		}, want: []string{"redis: TransactionalBatch: s = nil: required"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.err()
			if !errors.Is(err, stream.ErrInvalidOption) {
				t.Errorf("errors.Is(%v, stream.ErrInvalidOption) = false, want true", err)
			}
			if err == nil {
				t.Fatalf("error = nil, want %q", tt.want)
			}
			if got, want := err.Error(), strings.Join(tt.want, "\n"); got != want {
				t.Errorf("error:\n%s\nwant:\n%s", got, want)
			}
		})
	}
	if s.CommitsInHandler() {
		t.Error("a handler of nil arguments marked the Store as committing in the handler")
	}
	if !permanent(redis.Transactional(s, nil, fn)(t.Context(), redis.Entry{})) {
		t.Error("the error of a handler of nil arguments is not Permanent")
	}
}
