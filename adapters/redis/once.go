package redis

import (
	"context"

	goredis "github.com/redis/go-redis/v9"
)

// A command that moves a group's position or an entry's owner (XREADGROUP
// with ">", XAUTOCLAIM, XCLAIM) is not idempotent: when its reply is lost,
// nobody knows whether Redis ran it, and a blind retry by go-redis (which
// retries a failed pipeline MaxRetries times) would hide that the first
// run handed entries to this consumer. These wrappers tell go-redis not to
// retry them, nor the pipeline that holds them; the error reaches the
// Group, whose next connection reads this consumer's pending list first.

// onceRead is an XREADGROUP go-redis must not retry.
type onceRead struct{ *goredis.XStreamSliceCmd }

func (onceRead) NoRetry() bool { return true }

// once is a command go-redis must not retry.
type once struct{ *goredis.Cmd }

func (once) NoRetry() bool { return true }

// newReadGroup returns an XREADGROUP made but not run (made by a
// Pipeliner, so that a blocking one carries go-redis's read timeout for
// BLOCK), wrapped so that go-redis never retries it, and its result.
func newReadGroup(ctx context.Context, rdb goredis.UniversalClient, a *goredis.XReadGroupArgs) (goredis.Cmder, *goredis.XStreamSliceCmd) {
	p := rdb.Pipeline()
	cmd := p.XReadGroup(ctx, a)
	p.Discard()
	return onceRead{cmd}, cmd
}

// newOnce returns the command args, made but not run, wrapped so that
// go-redis never retries it, and its result.
func newOnce(ctx context.Context, args ...any) (goredis.Cmder, *goredis.Cmd) {
	cmd := goredis.NewCmd(ctx, args...)
	return once{cmd}, cmd
}
