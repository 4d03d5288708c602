package postgres

import (
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/resumable-go/resumable/adapters/postgres/outbox"
)

// The outbox moved to its own package,
// [github.com/resumable-go/resumable/adapters/postgres/outbox]; the names
// below keep code written against this package working, and mean the
// same as the new ones.

// Outbox is [outbox.Source].
//
// Deprecated: use [outbox.Source].
type Outbox[T any] = outbox.Source[T]

// OutboxCursor is [outbox.Cursor]; its Compare method is [outbox.Compare].
//
// Deprecated: use [outbox.Cursor].
type OutboxCursor = outbox.Cursor

// OutboxEvent is [outbox.Event].
//
// Deprecated: use [outbox.Event].
type OutboxEvent[T any] = outbox.Event[T]

// OutboxHold is [outbox.Hold].
//
// Deprecated: use [outbox.Hold].
type OutboxHold = outbox.Hold

// OutboxOption is [outbox.Option].
//
// Deprecated: use [outbox.Option].
type OutboxOption = outbox.Option

// ExtractOutbox is [outbox.Extract].
//
// Deprecated: use [outbox.Extract].
func ExtractOutbox[T any](ev OutboxEvent[T]) (OutboxCursor, error) { return outbox.Extract(ev) }

// NewOutbox is [outbox.NewSource]: its errors match [ErrInvalid] as
// before.
//
// Deprecated: use [outbox.NewSource].
func NewOutbox[T any](pool *pgxpool.Pool, table string, scan pgx.RowToFunc[T], opts ...OutboxOption) (*Outbox[T], error) {
	return outbox.NewSource(pool, table, scan, opts...)
}

// WithCreate is [outbox.WithCreate].
//
// Deprecated: use [outbox.WithCreate].
func WithCreate(columns string) OutboxOption { return outbox.WithCreate(columns) }

// WithNotify is [outbox.WithNotify].
//
// Deprecated: use [outbox.WithNotify].
func WithNotify(channel string) OutboxOption { return outbox.WithNotify(channel) }

// WithPollInterval is [outbox.WithPollInterval].
//
// Deprecated: use [outbox.WithPollInterval].
func WithPollInterval(d time.Duration) OutboxOption { return outbox.WithPollInterval(d) }

// WithBatchSize is [outbox.WithBatchSize].
//
// Deprecated: use [outbox.WithBatchSize].
func WithBatchSize(n int) OutboxOption { return outbox.WithBatchSize(n) }
