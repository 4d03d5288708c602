package redis

import (
	"context"
	"strings"

	goredis "github.com/redis/go-redis/v9"
)

// Classify exposes classify to the tests.
var Classify = classify

// UseXInfo makes s read the stream's identity with XINFO STREAM, as it does
// where scripts are refused.
func UseXInfo(s *Source) { s.via.Store(int32(viaXInfo)) }

// NoAnchor makes every read of s come with the full look at the stream's
// identity, as a read without an anchor does.
func NoAnchor(s *Source) { s.noAnchor = true }

// UseScript makes s read the stream's identity with its script, whatever
// the size of the stream's first and last entries.
func UseScript(s *Source) { s.edgeLimit = -1 }

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
func ParseInfo(s string) (length, added int64, last, maxDeleted, first string, edges int64, ok bool) {
	in, ok := parseInfo(s)
	return in.length, in.added, in.last, in.maxDeleted, in.first, in.edges, ok
}

// CompareParsed is Compare without its fast path for IDs as Redis writes
// them.
var CompareParsed = compareParsed

// NextCount is the COUNT a Source without WithCount asks for after a read
// that asked for count and returned entries of one field each, of the
// given value sizes (IDs of 15 bytes, fields of 1).
func NextCount(count int64, sizes []int) int64 {
	msgs := make([]goredis.XMessage, len(sizes))
	for i, n := range sizes {
		msgs[i] = goredis.XMessage{ID: "1700000000000-0", Values: map[string]any{"k": strings.Repeat("v", n)}}
	}
	return nextCount(count, msgs)
}
