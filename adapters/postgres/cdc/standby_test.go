package cdc_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/resumable-go/resumable/adapters/postgres"
	"github.com/resumable-go/resumable/adapters/postgres/cdc"
	"github.com/resumable-go/resumable/internal/testkit/pgtest"
	"github.com/resumable-go/resumable/stream"
)

// applyInsert is a relay's transactional function: it records the id of
// each inserted row in applied, which has no unique constraint, so that a
// change applied twice shows.
func applyInsert(ctx context.Context, tx pgx.Tx, ev cdc.Event) error {
	if ev.Op != cdc.Insert {
		return nil
	}
	id, _ := ev.New.Get("id")
	_, err := tx.Exec(ctx, "INSERT INTO applied (id) VALUES ($1::text::int)", string(id))
	return err
}

// relay is one replica of a relay run in this process: its own pool,
// Store, Source and Resumer on the shared stream and slot.
type relay struct {
	name     string
	done     chan error
	cancel   context.CancelFunc
	acquired chan string // its name, each time it holds the slot
	waiting  chan string // its name, when an Open found the slot active
}

func startRelay(t *testing.T, name, dsn, slot string, acquired, waiting chan string) *relay {
	t.Helper()
	_, store := relayStore(t, dsn)
	src, err := cdc.NewSource(dsn, slot, "pub", cdc.WithStatusInterval(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	rl := &relay{name: name, done: make(chan error, 1), acquired: acquired, waiting: waiting}
	r, err := cdc.NewResumer(src, store, stream.WithHooks(stream.Hooks[cdc.Cursor]{
		OnConnect: func(stream.ConnectEvent[cdc.Cursor]) { acquired <- name },
		OnDisconnect: func(e stream.DisconnectEvent[cdc.Cursor]) {
			if !e.Opened && e.Err != nil && strings.Contains(e.Err.Error(), "waiting as a standby") {
				waiting <- name
			}
		},
	}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(pgtest.Ctx(t))
	rl.cancel = cancel
	go func() { rl.done <- r.Run(ctx, postgres.Transactional(store, cdc.Extract, applyInsert)) }()
	return rl
}

// await returns the next name ch gives, failing t when a relay stopped or
// the test's deadline passed.
func await(t *testing.T, ch chan string, what string, relays ...*relay) string {
	t.Helper()
	ctx := pgtest.Ctx(t)
	for {
		for _, r := range relays {
			select {
			case err := <-r.done:
				t.Fatalf("waiting for %s: relay %s stopped on its own: %v", what, r.name, err)
			default:
			}
		}
		select {
		case name := <-ch:
			return name
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		case <-time.After(10 * time.Millisecond): // look at the relays again
		}
	}
}

// awaitApplied waits until applied holds n rows, and fails t on a
// duplicate or when a relay stopped.
func awaitApplied(t *testing.T, pool *pgxpool.Pool, n int, relays ...*relay) {
	t.Helper()
	replUntil(t, fmt.Sprintf("%d changes applied", n), func() bool {
		for _, r := range relays {
			select {
			case err := <-r.done:
				t.Fatalf("relay %s stopped on its own: %v", r.name, err)
			default:
			}
		}
		var rows, distinct int
		if err := pool.QueryRow(pgtest.Ctx(t), "SELECT count(*), count(DISTINCT id) FROM applied").Scan(&rows, &distinct); err != nil {
			t.Fatal(err)
		}
		if rows != distinct {
			t.Fatalf("applied %d rows, %d distinct: a change applied twice", rows, distinct)
		}
		return rows >= n
	})
}

// TestStandby runs two replicas of a Transactional relay on one slot and
// one Store. The second, started while the first runs (a deploy overlap),
// waits without disturbing it; when the active one's walsender is
// terminated, either may take the slot and the other waits; when the
// active one stops, the other takes over. Neither stops on its own, and
// every change is applied once.
func TestStandby(t *testing.T) {
	dsn := pgtest.NewDB(t)
	slot := replSetup(t, dsn)
	replExec(t, dsn, "CREATE TABLE applied (id int NOT NULL)")
	pool, err := pgxpool.New(pgtest.Ctx(t), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	next := 0
	write := func(n int) {
		t.Helper()
		replExec(t, dsn, fmt.Sprintf("INSERT INTO items (id) SELECT g FROM generate_series(%d, %d) g", next+1, next+n))
		next += n
	}
	acquired, waiting := make(chan string, 100), make(chan string, 100)
	a := startRelay(t, "A", dsn, slot, acquired, waiting)
	if got := await(t, acquired, "A to take the slot", a); got != "A" {
		t.Fatalf("%s acquired the slot, want A", got)
	}
	write(50)
	awaitApplied(t, pool, next, a)
	b := startRelay(t, "B", dsn, slot, acquired, waiting)
	if got := await(t, waiting, "B to wait", a, b); got != "B" {
		t.Fatalf("%s is waiting, want B", got)
	}
	write(50)
	awaitApplied(t, pool, next, a, b) // A undisturbed by B
	relays := map[string]*relay{"A": a, "B": b}
	holder := "A"
	for blip := range 3 {
		var pid int32
		if err := pool.QueryRow(pgtest.Ctx(t), "SELECT active_pid FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&pid); err != nil {
			t.Fatal(err)
		}
		replExec(t, dsn, fmt.Sprintf("SELECT pg_terminate_backend(%d)", pid))
		holder = await(t, acquired, "a relay to take the slot", a, b)
		t.Logf("blip %d: %s took the slot", blip, holder)
		write(50)
		awaitApplied(t, pool, next, a, b)
	}
	// The active one stops: the other takes over.
	stopped := relays[holder]
	stopped.cancel()
	if err := <-stopped.done; !errors.Is(err, context.Canceled) {
		t.Fatalf("relay %s: Run() = %v, want context.Canceled", holder, err)
	}
	delete(relays, holder)
	for name, r := range relays {
		if got := await(t, acquired, name+" to take over", r); got != name {
			t.Fatalf("%s took the slot after %s stopped, want %s", got, holder, name)
		}
		write(50)
		awaitApplied(t, pool, next, r)
		t.Logf("applied %d changes once each", next)
		r.cancel()
		if err := <-r.done; !errors.Is(err, context.Canceled) {
			t.Errorf("relay %s: Run() = %v, want context.Canceled", name, err)
		}
	}
}

// TestStandbyFreshStart starts two replicas at once on a slot that does not
// exist yet and a Store with no cursor: one creates the slot, the other
// waits, and neither fences the other out.
func TestStandbyFreshStart(t *testing.T) {
	dsn := pgtest.NewDB(t)
	slot := replSetup(t, dsn)
	dropSlot(t, dsn, slot)
	replExec(t, dsn, "CREATE TABLE applied (id int NOT NULL)")
	pool, err := pgxpool.New(pgtest.Ctx(t), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	acquired, waiting := make(chan string, 100), make(chan string, 100)
	a := startRelay(t, "A", dsn, slot, acquired, waiting)
	b := startRelay(t, "B", dsn, slot, acquired, waiting)
	holder := await(t, acquired, "a relay to take the slot", a, b)
	other := map[string]string{"A": "B", "B": "A"}[holder]
	if got := await(t, waiting, other+" to wait", a, b); got != other {
		t.Fatalf("%s is waiting, want %s", got, other)
	}
	replExec(t, dsn, "INSERT INTO items (id) SELECT g FROM generate_series(1, 100) g")
	awaitApplied(t, pool, 100, a, b)
	for _, r := range []*relay{a, b} {
		r.cancel()
		if err := <-r.done; !errors.Is(err, context.Canceled) {
			t.Errorf("relay %s: Run() = %v, want context.Canceled", r.name, err)
		}
	}
}
