package kafka

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/internal/badarg"
)

// Defaults of the options.
const (
	defaultDrainTimeout   = 20 * time.Second
	defaultCommitInterval = 100 * time.Millisecond
	defaultFetchBuffer    = 512
)

// Option configures a [Group]. Options are made by the With functions of
// this package; a nil Option is ignored.
type Option interface {
	apply(*config)
}

type config struct {
	client         []kgo.Opt
	drainTimeout   time.Duration
	commitInterval time.Duration
	fetchBuffer    int
	store          func(ctx context.Context, topic string, partition int32) (cursor.Store[int64], error)
	errs           []error
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

func newConfig(opts []Option) config {
	c := config{drainTimeout: defaultDrainTimeout, commitInterval: defaultCommitInterval, fetchBuffer: defaultFetchBuffer}
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	return c
}

// fail records a bad argument of where ("NewGroup", "WithFetchBuffer"):
// the [badarg] error, which matches stream.ErrInvalidOption.
func (c *config) fail(where, arg string, value any, why string) {
	c.errs = append(c.errs, badarg.New("kafka: "+where, arg, value, why))
}

// WithClientOptions adds options of the franz-go client the [Group] makes
// (TLS, SASL, kgo.SessionTimeout, kgo.RebalanceTimeout, kgo.Balancers,
// kgo.ConsumeResetOffset, a logger). The options the Group needs for its
// own work are applied after them and win: the group and topics, the
// partition callbacks and kgo.DisableAutoCommit.
func WithClientOptions(opts ...kgo.Opt) Option {
	return optionFunc(func(c *config) {
		for _, o := range opts {
			if o != nil {
				c.client = append(c.client, o)
			}
		}
	})
}

// WithDrainTimeout bounds how long a revoked partition (and every partition
// when Run returns) waits for its records in flight to finish before their
// handlers' context is cancelled; then what finished is committed and the
// partition is released. Keep it below the group's rebalance timeout
// (kgo.RebalanceTimeout, 60s by default), or the member is evicted.
// Default 20s; d ≤ 0 makes NewGroup fail.
func WithDrainTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d <= 0 {
			c.fail("WithDrainTimeout", "d", d, "must be positive")
			return
		}
		c.drainTimeout = d
	})
}

// WithCommitInterval sets the least time between two commits of the
// partitions' handled prefixes while the group runs (and before the
// first): a commit goes out as soon as a prefix moved and d has passed
// since the last, one at a time. A revoked
// partition and every partition at the end of Run are committed at once,
// whatever d. After a crash, the records handled in the last d (plus one
// commit's round trip, plus the window) are delivered again. Default
// 100ms; 0 commits as often as one commit in flight allows; a negative d
// makes NewGroup fail.
func WithCommitInterval(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d < 0 {
			c.fail("WithCommitInterval", "d", d, "must not be negative")
			return
		}
		c.commitInterval = d
	})
}

// WithFetchBuffer sets how many fetched records of one partition may wait
// for its stream to read them: at n the member stops polling until the
// stream reads one, and when it has not within 100ms, fetching that
// partition pauses (kgo's PauseFetchPartitions) until half of them were
// read, so that the other partitions go on. With what one fetch brings
// (kgo.FetchMaxPartitionBytes, 1 MiB by default) and the stream's window
// (stream.WithWindow) it bounds a partition's memory. Default 512; n < 1
// makes NewGroup fail.
func WithFetchBuffer(n int) Option {
	return optionFunc(func(c *config) {
		if n < 1 {
			c.fail("WithFetchBuffer", "n", n, "must be at least 1")
			return
		}
		c.fetchBuffer = n
	})
}

// WithStore keeps each partition's cursor in a Store of the caller's
// instead of the group's committed offsets, as Kafka Connect's
// exactly-once sinks do: open is called when a partition is assigned and
// returns the partition's Store (one of its own: postgres.NewStore with a
// name per topic and partition, initial cursor -1), whose cursor is the
// offset of the last record handled. The member loads it before it
// fetches, and consumes from the offset after it; a Load of -1 (nothing
// stored) falls back to the group's committed offset (then
// kgo.ConsumeResetOffset). Records are handed over as without it and
// every Save goes to the Store; the group's offsets are still committed,
// for lag and tools, but never read while the Store holds a cursor.
//
// With a Store that commits in the handler's transaction
// (postgres.Transactional, TransactionalBatch: cursor.HandlerCommitter)
// each record's effects and its offset commit together: exactly once.
// Such a stream refuses stream.WithConcurrency above 1, so a partition's
// records are handled one at a time, in offset order, and per-key
// concurrency is lost (partitions still run in parallel); a Run with it
// ends with an error matching stream.ErrInvalidOption at the first
// assignment. An error of open or of the first Load ends the Run. A nil
// open makes NewGroup fail.
func WithStore(open func(ctx context.Context, topic string, partition int32) (cursor.Store[int64], error)) Option {
	return optionFunc(func(c *config) {
		if open == nil {
			c.fail("WithStore", "open", nil, "must not be nil")
			return
		}
		c.store = open
	})
}

// nilArg is the [badarg] error of where's argument arg when it is nil,
// else nil.
func nilArg(where, arg string, isNil bool) error {
	if !isNil {
		return nil
	}
	return badarg.New("kafka: "+where, arg, nil, "must not be nil")
}

// quoted shows a list of names in a bad argument's message, empty ones
// visible: ["b:9092" ""].
type quoted []string

func (q quoted) String() string { return fmt.Sprintf("%q", []string(q)) }
