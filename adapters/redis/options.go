package redis

import (
	"time"

	"github.com/resumable-go/resumable/internal/badarg"
)

// Defaults of the options.
const (
	defaultCount         = 100
	defaultBlock         = time.Second
	defaultClaimIdle     = 30 * time.Second
	defaultMaxDeliveries = 5
	// defaultCheckpoint is how often NewResumer saves the cursor at most
	// (stream.WithCheckpointInterval): a save per entry costs an fsync
	// with a cursor.File, about 730 entries a second.
	defaultCheckpoint = 100 * time.Millisecond
)

// Option configures a [Source] or a [Group]. Options are made by the With
// functions of this package; a nil Option is ignored.
type Option interface {
	apply(*config)
}

type config struct {
	count         int64
	countSet      bool // WithCount was given: a Source's reads keep to count
	block         time.Duration
	claimIdle     time.Duration
	maxDeliveries int64
	groupOnly     []groupOption // the group options given
	errs          []error
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

func newConfig(opts []Option) config {
	c := config{count: defaultCount, block: defaultBlock, claimIdle: defaultClaimIdle, maxDeliveries: defaultMaxDeliveries}
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	return c
}

// groupOption is an option of a Group given, by its name and value, so
// that NewSource can refuse it.
type groupOption struct {
	name  string
	value any
}

// fail records a bad argument arg = value of the option where
// ("WithCount"): a [badarg.Error], which matches stream.ErrInvalidOption.
func (c *config) fail(where, arg string, value any, why string) {
	c.errs = append(c.errs, badarg.New("redis: "+where, arg, value, why))
}

// WithCount sets how many entries one read asks for (COUNT), and how many
// acknowledgements may wait to go out with the next read. Default 100; a
// [Source] without WithCount then asks for twice as many after each full
// read, up to 1,000 and under 1 MiB a reply, and for 100 again once a read
// comes back short. A Source's first read after Open asks for one entry
// (docs/redis.md says why). After a failed read, a Group's or a Source's
// reads ask for one entry, then twice as many after each full read, up to
// n (or 100).
// n < 1 makes the constructor fail.
func WithCount(n int) Option {
	return optionFunc(func(c *config) {
		if n < 1 {
			c.fail("WithCount", "n", n, "must be at least 1")
			return
		}
		c.count, c.countSet = int64(n), true
	})
}

// WithBlock sets how long one blocking read waits for new entries (BLOCK)
// before the connection checks the stream again: how long a recreated
// stream or group may go unnoticed by an idle consumer. On a *Client a
// read in progress returns as soon as its context ends or its connection
// is closed (its socket is closed); on a ClusterClient or a Ring, go-redis
// does not interrupt it, and it returns within d.
// Default 1s; d below 1ms makes the constructor fail.
func WithBlock(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d < time.Millisecond {
			c.fail("WithBlock", "d", d, "must be at least 1ms")
			return
		}
		c.block = d
	})
}

// WithClaimIdle sets how long an entry may sit idle in a dead consumer's
// pending list before a [Group] claims it (XAUTOCLAIM, every half of d
// whatever the backlog). A live consumer keeps the entries it holds (read,
// in a handler, or waiting for their acknowledgement) from others by
// claiming them to itself again every d/3, so d needs no relation to the
// handler's speed, only to how long a pause (GC, a stopped process) may
// pass for a death. Default 30s; 0 turns claims off; a negative d makes
// NewGroup fail. Group only: NewSource refuses it.
func WithClaimIdle(d time.Duration) Option {
	return optionFunc(func(c *config) {
		c.groupOnly = append(c.groupOnly, groupOption{name: "WithClaimIdle", value: d})
		if d < 0 {
			c.fail("WithClaimIdle", "d", d, "must not be negative")
			return
		}
		c.claimIdle = d
	})
}

// WithMaxDeliveries sets the handler-call limit of a [Group]:
// [Group.Handler] hands an entry to the handler at most n times (calls
// before a restart or on another consumer included; reads without a call
// never count), then returns [ErrPoison] so that the stream parks it.
// Failures marked errclass.RetryAfter do not count. Default 5; n < 1 makes
// NewGroup fail. Group only: NewSource refuses it.
func WithMaxDeliveries(n int) Option {
	return optionFunc(func(c *config) {
		c.groupOnly = append(c.groupOnly, groupOption{name: "WithMaxDeliveries", value: n})
		if n < 1 {
			c.fail("WithMaxDeliveries", "n", n, "must be at least 1")
			return
		}
		c.maxDeliveries = int64(n)
	})
}
