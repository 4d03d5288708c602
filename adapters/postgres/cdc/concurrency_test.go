package cdc_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/resumable-go/resumable/adapters/postgres"
	"github.com/resumable-go/resumable/adapters/postgres/cdc"
	"github.com/resumable-go/resumable/backoff"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/stream"
)

// TestNewResumerRefusesConcurrentTransactional: the Store NewResumer wraps
// still says it commits in the handler, so WithConcurrency(4) with a
// Transactional handler is refused before anything runs. Nothing connects:
// the refusal comes first.
func TestNewResumerRefusesConcurrentTransactional(t *testing.T) {
	pool, err := pgxpool.New(context.Background(), "postgres://nobody@127.0.0.1:1/none")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	store, err := postgres.NewStore(pool, "s", cursor.JSON[cdc.Cursor](), cdc.Cursor{})
	if err != nil {
		t.Fatal(err)
	}
	src, err := cdc.NewSource("postgres://nobody@127.0.0.1:1/none", "s", "p")
	if err != nil {
		t.Fatal(err)
	}
	handle := postgres.Transactional(store, cdc.Extract, func(context.Context, pgx.Tx, cdc.Event) error { return nil })
	// Without the refusal, the one connection attempt fails and Run gives up.
	r, err := cdc.NewResumer(src, store, stream.WithConcurrency(4),
		stream.WithBackoff(backoff.Exponential(backoff.WithMaxRetries(1), backoff.WithInitialInterval(time.Millisecond))))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Run(t.Context(), handle); !errors.Is(err, stream.ErrInvalidOption) {
		t.Fatalf("Run() of a Transactional handler with WithConcurrency(4) = %v, want ErrInvalidOption", err)
	}
}
