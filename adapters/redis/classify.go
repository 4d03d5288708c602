package redis

import (
	"context"
	"errors"
	"fmt"
	"io"

	goredis "github.com/redis/go-redis/v9"

	"github.com/resumable-go/resumable/errclass"
)

// permanentPrefixes are the Redis errors that retrying cannot cure: the key
// holds another type, the user lacks a permission or a password, the
// server does not know the command (Redis before 7), or refuses an ID.
var permanentPrefixes = []string{"WRONGTYPE", "NOPERM", "NOAUTH", "WRONGPASS", "unknown command", "Invalid stream ID", "syntax error"}

// classify wraps err, from the command op, with what it means to a stream.
// Connection errors and every other Redis error (LOADING, BUSY, TRYAGAIN,
// MASTERDOWN, READONLY, ...) stay retried. A connection closed by the
// server is reported without wrapping io.EOF, which a Conn may return only
// for a clean end.
func classify(op string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("redis: %s: connection closed (%v)", op, err)
	}
	for _, p := range permanentPrefixes {
		if goredis.HasErrorPrefix(err, p) {
			return errclass.Permanent(fmt.Errorf("redis: %s: %w", op, err))
		}
	}
	return fmt.Errorf("redis: %s: %w", op, err)
}

// noKey reports whether err is XINFO's answer for a missing key.
func noKey(err error) bool { return goredis.HasErrorPrefix(err, "no such key") }

// noGroup reports whether err is Redis's answer for a missing group (or a
// missing stream, to XREADGROUP).
func noGroup(err error) bool { return goredis.HasErrorPrefix(err, "NOGROUP") }
