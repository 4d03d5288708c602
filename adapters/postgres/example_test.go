package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/resumable-go/resumable/adapters/postgres"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/stream"
)

// Order is an event of a feed whose cursor is its sequence number.
type Order struct {
	Seq   int64
	Total int64
}

// ExampleTransactional makes a handler whose effects and cursor commit
// together. Nothing here talks to a server: a pool connects when first
// used, and a Store's table is created by its first Load.
func ExampleTransactional() {
	pool, err := pgxpool.New(context.Background(), "postgres://app@127.0.0.1/app")
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()

	store, err := postgres.NewStore(pool, "orders", cursor.Int64(), 0)
	if err != nil {
		log.Fatal(err)
	}
	extract := func(o Order) (int64, error) { return o.Seq, nil }
	handle := postgres.Transactional(store, extract, func(ctx context.Context, tx pgx.Tx, o Order) error {
		_, err := tx.Exec(ctx, "INSERT INTO revenue (order_seq, total) VALUES ($1, $2)", o.Seq, o.Total)
		return err
	})
	_ = handle // give it to Resumer.Run, as Example_resumer shows

	fmt.Println("the cursor commits in the handler:", store.CommitsInHandler())
	// Output: the cursor commits in the handler: true
}

// Example_resumer runs a stream whose every effect happens exactly once:
// after a crash it resumes after the last event whose transaction
// committed. It needs a PostgreSQL server, so it is compiled but not run.
func Example_resumer() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://app@127.0.0.1/app")
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	store, err := postgres.NewStore(pool, "orders", cursor.Int64(), 0)
	if err != nil {
		log.Fatal(err)
	}
	extract := func(o Order) (int64, error) { return o.Seq, nil }
	orders := stream.Pages(func(ctx context.Context, after int64) ([]Order, error) {
		return fetchOrders(ctx, after) // your API: the orders after seq
	})
	r, err := stream.New(orders, extract, store)
	if err != nil {
		log.Fatal(err)
	}
	err = r.Run(ctx, postgres.Transactional(store, extract, func(ctx context.Context, tx pgx.Tx, o Order) error {
		_, err := tx.Exec(ctx, "INSERT INTO revenue (order_seq, total) VALUES ($1, $2)", o.Seq, o.Total)
		return err
	}))
	if err != nil {
		log.Fatal(err) // matches postgres.ErrCursorChanged when another process took over the stream
	}
}

// ExampleNewStore shows what NewStore checks before any round trip: every
// bad argument and option at once, each named.
func ExampleNewStore() {
	_, err := postgres.NewStore(nil, "", cursor.Int64(), 0, postgres.WithTable("app.orders.cursors"))
	fmt.Println(err)
	fmt.Println(errors.Is(err, postgres.ErrInvalid), errors.Is(err, stream.ErrInvalidOption))
	// Output:
	// postgres: NewStore: pool = nil: must not be nil
	// postgres: NewStore: name = "": must not be empty
	// postgres: WithTable: table = "app.orders.cursors": not a name or schema.name
	// true true
}

func fetchOrders(context.Context, int64) ([]Order, error) { return nil, nil }
