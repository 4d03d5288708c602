package postgres

import (
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/resumable-go/resumable/adapters/postgres/internal/pgsql"
	"github.com/resumable-go/resumable/backoff"
)

// DefaultTable is the table a [Store] keeps its cursors in unless
// [WithTable] names another.
const DefaultTable = "resumable_cursors"

// StoreOption configures [NewStore].
type StoreOption interface {
	applyStore(*storeConfig)
}

type storeConfig struct {
	table []string // the table's name, schema first when qualified
	iso   pgx.TxIsoLevel
	retry backoff.Policy
	errs  []error
}

type storeOptionFunc func(*storeConfig)

func (f storeOptionFunc) applyStore(c *storeConfig) { f(c) }

// WithTable keeps the cursors in table instead of [DefaultTable]: a name,
// or schema.name, each part a letter or underscore followed by up to 62
// letters, digits or underscores. The name is quoted, so its case is kept.
// An unqualified name is looked up on the connection's search_path. Any
// other name makes NewStore fail.
func WithTable(table string) StoreOption {
	return storeOptionFunc(func(c *storeConfig) {
		parts := pgsql.SplitTable(table)
		if parts == nil {
			c.errs = append(c.errs, invalid("WithTable", "table", table, "not a name or schema.name"))
			return
		}
		c.table = parts
	})
}

// WithIsolation sets the isolation level of the transactions [Transactional]
// runs (pgx.Serializable, pgx.RepeatableRead, ...). Default: the server's
// default_transaction_isolation, usually read committed. Another value
// makes NewStore fail.
func WithIsolation(level pgx.TxIsoLevel) StoreOption {
	return storeOptionFunc(func(c *storeConfig) {
		switch level {
		case "", pgx.Serializable, pgx.RepeatableRead, pgx.ReadCommitted, pgx.ReadUncommitted:
			c.iso = level
		default:
			c.errs = append(c.errs, invalid("WithIsolation", "level", string(level), "not an isolation level"))
		}
	})
}

// WithTxRetry sets the delays between the attempts [Transactional] makes at
// one event when a transaction fails with a serialization failure or
// deadlock (SQLSTATE 40001, 40P01) or loses its connection; the attempts end
// when p's sequence gives up. Default: up to 20 retries, jittered
// exponential delays from 5ms to at most 2s (about 15s in all: a server
// restart). A nil p makes one attempt only. When the retries give up, the
// error ends Run like any handler error, unless the Resumer retries its
// handler (stream.WithHandlerRetry).
func WithTxRetry(p backoff.Policy) StoreOption {
	return storeOptionFunc(func(c *storeConfig) {
		if p == nil {
			p = noRetry{}
		}
		c.retry = p
	})
}

// defaultTxRetry is the default of WithTxRetry.
var defaultTxRetry = backoff.Exponential(
	backoff.WithInitialInterval(5*time.Millisecond),
	backoff.WithMaxInterval(2*time.Second),
	backoff.WithMaxRetries(20),
)

// noRetry is a policy whose sequences give up at once.
type noRetry struct{}

func (noRetry) NewSequence() backoff.Sequence { return noRetry{} }
func (noRetry) Next() (time.Duration, bool)   { return 0, false }
func (noRetry) Reset()                        {}
