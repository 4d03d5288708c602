package postgres_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/resumable-go/resumable/adapters/postgres"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/errclass"
	"github.com/resumable-go/resumable/stream"
	"github.com/resumable-go/resumable/stream/streamtest"
)

// TestBadArguments gives each constructor and option of the package a bad
// value: the error matches stream.ErrInvalidOption and ErrInvalid and
// names the call, the argument and its value. A Transactional handler made
// over a nil argument returns that error, marked Permanent, when called.
// WithTxRetry takes any policy (nil: one attempt) and has no bad value;
// the outbox's names are tested in package outbox.
func TestBadArguments(t *testing.T) {
	pool, err := pgxpool.New(context.Background(), "postgres://nobody@127.0.0.1:1/none") // never connects
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	store, err := postgres.NewStore(pool, "s", cursor.Int64(), 0)
	if err != nil {
		t.Fatal(err)
	}
	newStore := func(opts ...postgres.StoreOption) func() error {
		return func() error {
			_, err := postgres.NewStore(pool, "s", cursor.Int64(), 0, opts...)
			return err
		}
	}
	handle := func(h func(context.Context, event) error) func() error {
		return func() error { return h(context.Background(), ev(1)) }
	}
	handleBatch := func(h func(context.Context, []event) error) func() error {
		return func() error { return h(context.Background(), []event{ev(1)}) }
	}
	for _, tc := range []struct {
		name      string
		call      func() error
		want      string
		permanent bool
	}{
		{name: "NewStore pool", call: func() error { _, err := postgres.NewStore(nil, "s", cursor.Int64(), 0); return err }, want: "postgres: NewStore: pool = nil: must not be nil"},
		{name: "NewStore name", call: func() error { _, err := postgres.NewStore(pool, "", cursor.Int64(), 0); return err }, want: `postgres: NewStore: name = "": must not be empty`},
		{name: "NewStore codec", call: func() error { _, err := postgres.NewStore[int64](pool, "s", nil, 0); return err }, want: "postgres: NewStore: codec = nil: must not be nil"},
		{name: "WithTable", call: newStore(postgres.WithTable("a.b.c")), want: `postgres: WithTable: table = "a.b.c": not a name or schema.name`},
		{name: "WithIsolation", call: newStore(postgres.WithIsolation("sometimes")), want: `postgres: WithIsolation: level = "sometimes": not an isolation level`},
		{name: "Transactional s", call: handle(postgres.Transactional[event, int64](nil, streamtest.Extract[struct{}], insertEffect)), want: "postgres: Transactional: s = nil: must not be nil", permanent: true},
		{name: "Transactional extract", call: handle(postgres.Transactional[event](store, nil, insertEffect)), want: "postgres: Transactional: extract = nil: must not be nil", permanent: true},
		{name: "Transactional fn", call: handle(postgres.Transactional(store, streamtest.Extract[struct{}], nil)), want: "postgres: Transactional: fn = nil: must not be nil", permanent: true},
		{name: "TransactionalBatch s", call: handleBatch(postgres.TransactionalBatch[event, int64](nil, streamtest.Extract[struct{}], insertBatch)), want: "postgres: TransactionalBatch: s = nil: must not be nil", permanent: true},
		{name: "TransactionalBatch extract", call: handleBatch(postgres.TransactionalBatch[event](store, nil, insertBatch)), want: "postgres: TransactionalBatch: extract = nil: must not be nil", permanent: true},
		{name: "TransactionalBatch fn", call: handleBatch(postgres.TransactionalBatch(store, streamtest.Extract[struct{}], nil)), want: "postgres: TransactionalBatch: fn = nil: must not be nil", permanent: true},
		{name: "NewOutbox, deprecated", call: func() error {
			_, err := postgres.NewOutbox(pool, "a.b.c", pgx.RowToStructByName[struct{ ID int64 }])
			return err
		}, want: `outbox: NewSource: table = "a.b.c": not a name or schema.name`},
		{name: "WithPollInterval, deprecated", call: func() error {
			_, err := postgres.NewOutbox(pool, "t", pgx.RowToStructByName[struct{ ID int64 }], postgres.WithPollInterval(0))
			return err
		}, want: "outbox: WithPollInterval: d = 0s: must be positive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if !errors.Is(err, stream.ErrInvalidOption) || !errors.Is(err, postgres.ErrInvalid) {
				t.Fatalf("err = %v, want one matching stream.ErrInvalidOption and ErrInvalid", err)
			}
			if err.Error() != tc.want {
				t.Errorf("err = %q, want %q", err, tc.want)
			}
			if got := errclass.Markers().Classify(err).Action == errclass.Fail; got != tc.permanent {
				t.Errorf("marked Permanent: %v, want %v", got, tc.permanent)
			}
		})
	}
}

// TestNewStoreReportsAll: NewStore reports every bad argument and option at
// once, not the first only.
func TestNewStoreReportsAll(t *testing.T) {
	_, err := postgres.NewStore[int64](nil, "", nil, 0, postgres.WithTable(""), postgres.WithIsolation("x"))
	want := "postgres: NewStore: pool = nil: must not be nil\n" +
		"postgres: NewStore: name = \"\": must not be empty\n" +
		"postgres: NewStore: codec = nil: must not be nil\n" +
		"postgres: WithTable: table = \"\": not a name or schema.name\n" +
		"postgres: WithIsolation: level = \"x\": not an isolation level"
	if err == nil || err.Error() != want {
		t.Errorf("NewStore() = %v, want\n%s", err, want)
	}
}
