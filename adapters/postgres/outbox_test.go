package postgres_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/resumable-go/resumable/adapters/postgres"
	"github.com/resumable-go/resumable/adapters/postgres/outbox"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/stream"
)

// TestDeprecatedOutboxNames: code written against the outbox names of this
// package still builds and means the same: the types are package outbox's,
// a cursor stored under the old name reads back under the new one, and
// the old method expression still orders cursors.
func TestDeprecatedOutboxNames(t *testing.T) {
	pool, err := pgxpool.New(context.Background(), "postgres://nobody@127.0.0.1:1/none") // never connects
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	type row struct{ ID int64 }
	var src *outbox.Source[row]
	src, err = postgres.NewOutbox(pool, "outbox", pgx.RowToStructByName[row],
		postgres.WithCreate("id bigint"), postgres.WithNotify("n"), postgres.WithPollInterval(1), postgres.WithBatchSize(1))
	if err != nil {
		t.Fatalf("NewOutbox() = %v", err)
	}
	if _, err := stream.New(src, postgres.ExtractOutbox[row], cursor.NewMemory(postgres.OutboxCursor{}),
		//lint:ignore SA1019 the deprecated method must still work
		stream.WithCursorOrder(postgres.OutboxCursor.Compare)); err != nil {
		t.Fatalf("stream.New with the old names = %v", err)
	}
	old := postgres.OutboxCursor{Tx: 900, Seq: 42, System: "7"}
	enc, err := cursor.JSON[postgres.OutboxCursor]().Encode(old)
	if err != nil {
		t.Fatal(err)
	}
	got, err := cursor.JSON[outbox.Cursor]().Decode(enc)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(outbox.Cursor(old), got); diff != "" {
		t.Errorf("the cursor read back (-want +got):\n%s", diff)
	}
	later := postgres.OutboxCursor{Tx: 901, Seq: 1}
	//lint:ignore SA1019 the deprecated method must still work
	if got, want := postgres.OutboxCursor.Compare(old, later), outbox.Compare(old, later); got != want || got >= 0 {
		t.Errorf("OutboxCursor.Compare(old, later) = %d, outbox.Compare = %d, want the same negative", got, want)
	}
	ev := postgres.OutboxEvent[row]{Cursor: old}
	if c, err := postgres.ExtractOutbox(ev); c != old || err != nil {
		t.Errorf("ExtractOutbox() = %v, %v; want %v, nil", c, err, old)
	}
	var _ postgres.OutboxHold = src.Hold()
	var _ postgres.OutboxOption = outbox.WithBatchSize(1)
}
