package redis

import (
	"context"

	goredis "github.com/redis/go-redis/v9"
)

// Classify exposes classify to the tests.
var Classify = classify

// UseXInfo makes s read the stream's identity with XINFO STREAM, as it does
// where scripts are refused.
func UseXInfo(s *Source) { s.via.Store(int32(viaXInfo)) }

// ReadIdentity reads key's identity with the Source's script, and runs
// more's commands after it in the same round trip.
func ReadIdentity(ctx context.Context, rdb goredis.UniversalClient, key string, more func(goredis.Pipeliner)) error {
	var cmd infoCmd
	_, _ = rdb.Pipelined(ctx, func(p goredis.Pipeliner) error {
		cmd = queueInfo(ctx, p, key, viaEvalSha)
		more(p)
		return nil
	})
	_, _, _, err := cmd.result()
	return err
}

// ParseInfo reads a reply of the Source's script.
func ParseInfo(s string) (length, added int64, last, maxDeleted, first string, ok bool) {
	in, ok := parseInfo(s)
	return in.length, in.added, in.last, in.maxDeleted, in.first, ok
}

// CompareParsed is Compare without its fast path for IDs as Redis writes
// them.
var CompareParsed = compareParsed
