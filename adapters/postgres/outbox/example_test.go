package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/resumable-go/resumable/adapters/postgres"
	"github.com/resumable-go/resumable/adapters/postgres/outbox"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/stream"
)

// OrderPlaced is a row of the outbox table (its columns other than xid).
type OrderPlaced struct {
	ID      int64
	Payload string
}

// ExampleNewResumer relays an outbox table to a broker, at least once, in
// the order of the writers' transactions; the relayed rows are deleted
// once their cursor is saved (every 100ms, NewResumer's default). It needs
// a PostgreSQL server, so it is compiled but not run.
func ExampleNewResumer() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://relay@127.0.0.1/app")
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	// A writer, in the transaction of its change:
	//   INSERT INTO outbox (payload) VALUES ($1)
	src, err := outbox.NewSource(pool, "outbox", pgx.RowToStructByName[OrderPlaced],
		outbox.WithCreate("payload text NOT NULL"))
	if err != nil {
		log.Fatal(err)
	}
	store, err := cursor.NewFile("outbox.cursor", outbox.Cursor{}, cursor.JSON[outbox.Cursor]())
	if err != nil {
		log.Fatal(err)
	}
	r, err := outbox.NewResumer(src, src.Deleting(store))
	if err != nil {
		log.Fatal(err)
	}
	err = r.Run(ctx, func(ctx context.Context, ev outbox.Event[OrderPlaced]) error {
		return publish(ctx, ev.Row.Payload) // your broker
	})
	if err != nil {
		log.Fatal(err) // matches stream.ErrSourceChanged on a restored or recreated database
	}
}

// ExampleNewResumer_transactional relays an outbox into tables of the same
// database, exactly once: each row's effects and the cursor commit in one
// transaction. It needs a PostgreSQL server, so it is compiled but not run.
func ExampleNewResumer_transactional() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://relay@127.0.0.1/app")
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	src, err := outbox.NewSource(pool, "outbox", pgx.RowToStructByName[OrderPlaced])
	if err != nil {
		log.Fatal(err)
	}
	store, err := postgres.NewStore(pool, "outbox-projection", cursor.JSON[outbox.Cursor](), outbox.Cursor{})
	if err != nil {
		log.Fatal(err)
	}
	r, err := outbox.NewResumer(src, store)
	if err != nil {
		log.Fatal(err)
	}
	err = r.Run(ctx, postgres.Transactional(store, outbox.Extract[OrderPlaced],
		func(ctx context.Context, tx pgx.Tx, ev outbox.Event[OrderPlaced]) error {
			_, err := tx.Exec(ctx, "INSERT INTO orders_seen (id, payload) VALUES ($1, $2)", ev.Row.ID, ev.Row.Payload)
			return err
		}))
	if err != nil {
		log.Fatal(err)
	}
}

// ExampleNewSource shows what NewSource checks before any round trip:
// every bad argument and option at once, each named.
func ExampleNewSource() {
	_, err := outbox.NewSource(nil, "a.b.c", pgx.RowToStructByName[OrderPlaced], outbox.WithPollInterval(0))
	fmt.Println(err)
	fmt.Println(errors.Is(err, stream.ErrInvalidOption))
	// Output:
	// outbox: NewSource: pool = nil: must not be nil
	// outbox: NewSource: table = "a.b.c": not a name or schema.name
	// outbox: WithPollInterval: d = 0s: must be positive
	// true
}

// ExampleCompare: rows are ordered by transaction first, so a row with a
// larger id inserted by an older transaction comes first.
func ExampleCompare() {
	older := outbox.Cursor{Tx: 900, Seq: 42}
	newer := outbox.Cursor{Tx: 901, Seq: 7}
	fmt.Println(outbox.Compare(older, newer), outbox.Compare(newer, older), older)
	// Output: -1 1 tx 900 id 42
}

// ExampleExtract: an event's cursor is the position of its row.
func ExampleExtract() {
	ev := outbox.Event[OrderPlaced]{Cursor: outbox.Cursor{Tx: 900, Seq: 42}, Row: OrderPlaced{ID: 42, Payload: "order 7"}}
	c, err := outbox.Extract(ev)
	fmt.Println(c, err)
	// Output: tx 900 id 42 <nil>
}

func publish(context.Context, string) error { return nil }
