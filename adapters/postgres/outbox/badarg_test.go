package outbox_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/resumable-go/resumable/adapters/postgres"
	"github.com/resumable-go/resumable/adapters/postgres/outbox"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/stream"
)

// lazyPool returns a pool that never connects (NewSource makes no round
// trip), closed when t ends.
func lazyPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), "postgres://nobody@127.0.0.1:1/none")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// TestBadArguments gives each constructor and option of the package a bad
// value: the error matches stream.ErrInvalidOption (and postgres.ErrInvalid,
// as before the move) and names the call, the argument and its value.
// WithCreate takes any SQL and has no bad value.
func TestBadArguments(t *testing.T) {
	pool, scan := lazyPool(t), pgx.RowToStructByName[msg]
	src, err := outbox.NewSource(pool, "outbox", scan)
	if err != nil {
		t.Fatal(err)
	}
	newSource := func(opts ...outbox.Option) func() error {
		return func() error {
			_, err := outbox.NewSource(pool, "outbox", scan, opts...)
			return err
		}
	}
	for _, tc := range []struct {
		name string
		call func() error
		want string
	}{
		{name: "NewSource pool", call: func() error { _, err := outbox.NewSource(nil, "outbox", scan); return err }, want: "outbox: NewSource: pool = nil: must not be nil"},
		{name: "NewSource table", call: func() error { _, err := outbox.NewSource(pool, "a.b.c", scan); return err }, want: `outbox: NewSource: table = "a.b.c": not a name or schema.name`},
		{name: "NewSource empty table", call: func() error { _, err := outbox.NewSource(pool, "", scan); return err }, want: `outbox: NewSource: table = "": not a name or schema.name`},
		{name: "NewSource scan", call: func() error { _, err := outbox.NewSource[msg](pool, "outbox", nil); return err }, want: "outbox: NewSource: scan = nil: must not be nil"},
		{name: "WithNotify", call: newSource(outbox.WithNotify("no-dash")), want: `outbox: WithNotify: channel = "no-dash": not a name`},
		{name: "WithPollInterval", call: newSource(outbox.WithPollInterval(-1)), want: "outbox: WithPollInterval: d = -1ns: must be positive"},
		{name: "WithBatchSize", call: newSource(outbox.WithBatchSize(0)), want: "outbox: WithBatchSize: n = 0: must be at least 1"},
		{name: "NewResumer src", call: func() error { _, err := outbox.NewResumer[msg](nil, cursor.NewMemory(outbox.Cursor{})); return err }, want: "outbox: NewResumer: src = nil: must not be nil"},
		{name: "NewResumer store", call: func() error { _, err := outbox.NewResumer(src, nil); return err }, want: "outbox: NewResumer: store = nil: must not be nil"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if !errors.Is(err, stream.ErrInvalidOption) || !errors.Is(err, postgres.ErrInvalid) {
				t.Fatalf("err = %v, want one matching stream.ErrInvalidOption and postgres.ErrInvalid", err)
			}
			if err.Error() != tc.want {
				t.Errorf("err = %q, want %q", err, tc.want)
			}
		})
	}
}

// TestNewSourceReportsAll: NewSource reports every bad argument and option
// at once, not the first only.
func TestNewSourceReportsAll(t *testing.T) {
	_, err := outbox.NewSource[msg](nil, "a-b", nil, outbox.WithNotify("x y"), outbox.WithPollInterval(0), outbox.WithBatchSize(-1))
	if !errors.Is(err, stream.ErrInvalidOption) {
		t.Fatalf("NewSource() = %v, want an error matching stream.ErrInvalidOption", err)
	}
	for _, arg := range []string{"pool = nil", `table = "a-b"`, "scan = nil", `channel = "x y"`, "d = 0s", "n = -1"} {
		if !strings.Contains(err.Error(), arg) {
			t.Errorf("NewSource() = %q, want it to name %s", err, arg)
		}
	}
}

// TestNewResumerTakesOptions: the loop's options given to NewResumer reach
// stream.New after the defaults: valid ones are taken, a bad one fails.
func TestNewResumerTakesOptions(t *testing.T) {
	src, err := outbox.NewSource(lazyPool(t), "outbox", pgx.RowToStructByName[msg])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := outbox.NewResumer(src, cursor.NewMemory(outbox.Cursor{}), stream.WithCheckpointEvery(1), stream.WithCheckpointInterval(0)); err != nil {
		t.Errorf("NewResumer() = %v, want nil", err)
	}
	if _, err := outbox.NewResumer(src, cursor.NewMemory(outbox.Cursor{}), stream.WithCheckpointInterval(-1)); !errors.Is(err, stream.ErrInvalidOption) {
		t.Errorf("NewResumer(WithCheckpointInterval(-1)) = %v, want stream.ErrInvalidOption", err)
	}
}
