package redis_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/resumable-go/resumable/adapters/redis"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/stream"
)

// TestBadArguments gives each constructor and option of the package a bad
// value: the error matches stream.ErrInvalidOption and names the call or
// option, the argument and its value. No server is needed: nothing is
// sent before Open.
func TestBadArguments(t *testing.T) {
	rdb := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	var nilClient *goredis.Client
	var nilStore *cursor.Memory[string]
	src, err := redis.NewSource(rdb, "s")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		err  func() error
		want string
	}{
		{name: "NewSource nil client", err: func() error { _, err := redis.NewSource(nil, "s"); return err },
			want: "redis: NewSource: rdb = nil: required"},
		{name: "NewSource typed nil client", err: func() error { _, err := redis.NewSource(nilClient, "s"); return err },
			want: "redis: NewSource: rdb = nil: required"},
		{name: "NewSource empty key", err: func() error { _, err := redis.NewSource(rdb, ""); return err },
			want: `redis: NewSource: key = "": must not be empty`},
		{name: "NewSource given WithClaimIdle", err: func() error { _, err := redis.NewSource(rdb, "s", redis.WithClaimIdle(time.Second)); return err },
			want: "redis: NewSource: WithClaimIdle = 1s: an option of a Group, not of a Source"},
		{name: "NewSource given WithMaxDeliveries", err: func() error { _, err := redis.NewSource(rdb, "s", redis.WithMaxDeliveries(3)); return err },
			want: "redis: NewSource: WithMaxDeliveries = 3: an option of a Group, not of a Source"},
		{name: "WithCount", err: func() error { _, err := redis.NewSource(rdb, "s", redis.WithCount(0)); return err },
			want: "redis: WithCount: n = 0: must be at least 1"},
		{name: "WithBlock", err: func() error {
			_, err := redis.NewGroup(rdb, "s", "g", "c", redis.WithBlock(time.Microsecond))
			return err
		},
			want: "redis: WithBlock: d = 1µs: must be at least 1ms"},
		{name: "WithClaimIdle", err: func() error {
			_, err := redis.NewGroup(rdb, "s", "g", "c", redis.WithClaimIdle(-time.Second))
			return err
		},
			want: "redis: WithClaimIdle: d = -1s: must not be negative"},
		{name: "WithMaxDeliveries", err: func() error { _, err := redis.NewGroup(rdb, "s", "g", "c", redis.WithMaxDeliveries(0)); return err },
			want: "redis: WithMaxDeliveries: n = 0: must be at least 1"},
		{name: "NewGroup nil client", err: func() error { _, err := redis.NewGroup(nil, "s", "g", "c"); return err },
			want: "redis: NewGroup: rdb = nil: required"},
		{name: "NewGroup empty key", err: func() error { _, err := redis.NewGroup(rdb, "", "g", "c"); return err },
			want: `redis: NewGroup: key = "": must not be empty`},
		{name: "NewGroup empty group", err: func() error { _, err := redis.NewGroup(rdb, "s", "", "c"); return err },
			want: `redis: NewGroup: group = "": must not be empty`},
		{name: "NewGroup empty consumer", err: func() error { _, err := redis.NewGroup(rdb, "s", "g", ""); return err },
			want: `redis: NewGroup: consumer = "": must not be empty`},
		{name: "NewResumer nil source", err: func() error { _, err := redis.NewResumer(nil, cursor.NewMemory("")); return err },
			want: "redis: NewResumer: src = nil: required"},
		{name: "NewResumer nil store", err: func() error { _, err := redis.NewResumer(src, nil); return err },
			want: "redis: NewResumer: store = nil: required"},
		{name: "NewResumer typed nil store", err: func() error { _, err := redis.NewResumer(src, nilStore); return err },
			want: "redis: NewResumer: store = nil: required"},
		{name: "NewGroupResumer nil group", err: func() error { _, err := redis.NewGroupResumer(nil); return err },
			want: "redis: NewGroupResumer: g = nil: required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.err()
			if !errors.Is(err, stream.ErrInvalidOption) {
				t.Errorf("errors.Is(%v, stream.ErrInvalidOption) = false, want true", err)
			}
			if err == nil || err.Error() != tt.want {
				t.Errorf("error = %v, want %q", err, tt.want)
			}
		})
	}
}

// TestBadArgumentsAllAtOnce: a constructor reports every bad argument and
// option of one call, not only the first.
func TestBadArgumentsAllAtOnce(t *testing.T) {
	tests := []struct {
		name string
		err  func() error
		want []string
	}{
		{name: "NewSource", err: func() error {
			_, err := redis.NewSource(nil, "", redis.WithCount(0), redis.WithBlock(0), redis.WithClaimIdle(time.Second))
			return err
		}, want: []string{
			"redis: NewSource: rdb = nil: required",
			`redis: NewSource: key = "": must not be empty`,
			"redis: NewSource: WithClaimIdle = 1s: an option of a Group, not of a Source",
			"redis: WithCount: n = 0: must be at least 1",
			"redis: WithBlock: d = 0s: must be at least 1ms",
		}},
		{name: "NewGroup", err: func() error {
			_, err := redis.NewGroup(nil, "", "", "", redis.WithCount(-1), redis.WithBlock(0), redis.WithClaimIdle(-1), redis.WithMaxDeliveries(-2))
			return err
		}, want: []string{
			"redis: NewGroup: rdb = nil: required",
			`redis: NewGroup: key = "": must not be empty`,
			`redis: NewGroup: group = "": must not be empty`,
			`redis: NewGroup: consumer = "": must not be empty`,
			"redis: WithCount: n = -1: must be at least 1",
			"redis: WithBlock: d = 0s: must be at least 1ms",
			"redis: WithClaimIdle: d = -1ns: must not be negative",
			"redis: WithMaxDeliveries: n = -2: must be at least 1",
		}},
		{name: "NewResumer", err: func() error { _, err := redis.NewResumer(nil, nil); return err }, want: []string{
			"redis: NewResumer: src = nil: required",
			"redis: NewResumer: store = nil: required",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.err()
			if !errors.Is(err, stream.ErrInvalidOption) {
				t.Errorf("errors.Is(%v, stream.ErrInvalidOption) = false, want true", err)
			}
			if err == nil {
				t.Fatalf("error = nil, want %d errors", len(tt.want))
			}
			if got, want := err.Error(), strings.Join(tt.want, "\n"); got != want {
				t.Errorf("error:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}
