package postgres_test

import (
	"context"
	"fmt"
	"log"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/resumable-go/resumable/adapters/postgres"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/stream"
)

// OrderPlaced is a row of the outbox table (its columns other than xid).
type OrderPlaced struct {
	ID      int64
	Payload string
}

// ExampleNewOutbox relays an outbox table to a broker, at least once, in
// the order of the writers' transactions; the relayed rows are deleted
// once their cursor is saved. It needs a PostgreSQL server, so it is
// compiled but not run.
func ExampleNewOutbox() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://relay@127.0.0.1/app")
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	// A writer, in the transaction of its change:
	//   INSERT INTO outbox (payload) VALUES ($1)
	src, err := postgres.NewOutbox(pool, "outbox", pgx.RowToStructByName[OrderPlaced],
		postgres.WithCreate("payload text NOT NULL"))
	if err != nil {
		log.Fatal(err)
	}
	store, err := cursor.NewFile("outbox.cursor", postgres.OutboxCursor{}, cursor.JSON[postgres.OutboxCursor]())
	if err != nil {
		log.Fatal(err)
	}
	r, err := stream.New(src, postgres.ExtractOutbox[OrderPlaced], src.Deleting(store),
		stream.WithCursorOrder(postgres.OutboxCursor.Compare))
	if err != nil {
		log.Fatal(err)
	}
	err = r.Run(ctx, func(ctx context.Context, ev postgres.OutboxEvent[OrderPlaced]) error {
		return publish(ctx, ev.Row.Payload) // your broker
	})
	if err != nil {
		log.Fatal(err) // matches stream.ErrSourceChanged on a restored or recreated database
	}
}

// ExampleNewOutbox_transactional relays an outbox into tables of the same
// database, exactly once: each row's effects and the cursor commit in one
// transaction. It needs a PostgreSQL server, so it is compiled but not run.
func ExampleNewOutbox_transactional() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://relay@127.0.0.1/app")
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	src, err := postgres.NewOutbox(pool, "outbox", pgx.RowToStructByName[OrderPlaced])
	if err != nil {
		log.Fatal(err)
	}
	store, err := postgres.NewStore(pool, "outbox-projection", cursor.JSON[postgres.OutboxCursor](), postgres.OutboxCursor{})
	if err != nil {
		log.Fatal(err)
	}
	r, err := stream.New(src, postgres.ExtractOutbox[OrderPlaced], store,
		stream.WithCursorOrder(postgres.OutboxCursor.Compare))
	if err != nil {
		log.Fatal(err)
	}
	err = r.Run(ctx, postgres.Transactional(store, postgres.ExtractOutbox[OrderPlaced],
		func(ctx context.Context, tx pgx.Tx, ev postgres.OutboxEvent[OrderPlaced]) error {
			_, err := tx.Exec(ctx, "INSERT INTO orders_seen (id, payload) VALUES ($1, $2)", ev.Row.ID, ev.Row.Payload)
			return err
		}))
	if err != nil {
		log.Fatal(err)
	}
}

// ExampleOutboxCursor_Compare: rows are ordered by transaction first, so a
// row with a larger id inserted by an older transaction comes first.
func ExampleOutboxCursor_Compare() {
	older := postgres.OutboxCursor{Tx: 900, Seq: 42}
	newer := postgres.OutboxCursor{Tx: 901, Seq: 7}
	fmt.Println(older.Compare(newer), newer.Compare(older), older)
	// Output: -1 1 tx 900 id 42
}

func publish(context.Context, string) error { return nil }
