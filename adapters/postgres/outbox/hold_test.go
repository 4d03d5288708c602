package outbox_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	osexec "os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/resumable-go/resumable/adapters/postgres/outbox"
	"github.com/resumable-go/resumable/backoff"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/internal/testkit/pgtest"
	"github.com/resumable-go/resumable/stream"
)

// TestOutboxLongTransaction: a transaction that stays open (it writes
// elsewhere, so it has a transaction id) holds the relay back; the relay
// reports since when, by which transaction and backend, and catches up
// once it ends. 1s; RESUMABLE_PG_SOAK=1: 30s.
func TestOutboxLongTransaction(t *testing.T) {
	hold := time.Second
	if soakFull() {
		hold = 30 * time.Second
	}
	pool := newPool(t, pgtest.NewDB(t))
	execSQL(t, pool, "CREATE TABLE other (x int)")
	o := newOutbox(t, pool)
	c := openOutbox(t, o, outbox.Cursor{})

	long, err := pool.Begin(pgtest.Ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	defer long.Rollback(pgtest.Ctx(t))
	var xid uint64
	var pid int
	if err := long.QueryRow(pgtest.Ctx(t), "INSERT INTO other VALUES (1) RETURNING pg_current_xact_id()::text::bigint, pg_backend_pid()").Scan(&xid, &pid); err != nil {
		t.Fatal(err)
	}
	const rows = 5
	for i := range rows {
		commit(t, begin(t, pool, string(rune('a'+i))))
	}
	got := recvAsync(t, c, rows)
	h := awaitHold(t, o)
	if h.Tx != xid || h.PID != pid {
		t.Fatalf("Hold() = %+v, want transaction %d, pid %d", h, xid, pid)
	}
	// The workload: the transaction stays open for the hold's length.
	if err := sleepCtx(pgtest.Ctx(t), hold); err != nil {
		t.Fatal(err)
	}
	select {
	case evs := <-got:
		t.Fatalf("delivered %v while the long transaction is open", payloads(evs))
	default:
	}
	h = o.Hold()
	held := time.Since(h.Since)
	if h.Tx != xid || held < hold {
		t.Fatalf("Hold() after %v = %+v (held %v), want transaction %d held at least %v", hold, h, held, xid, hold)
	}
	ended := time.Now()
	if err := long.Commit(pgtest.Ctx(t)); err != nil {
		t.Fatal(err)
	}
	if evs := <-got; len(evs) != rows {
		t.Fatalf("after the commit: %v, want %d rows", payloads(evs), rows)
	}
	t.Logf("held %v by transaction %d (pid %d); caught up %v after it committed", held.Round(time.Millisecond), h.Tx, h.PID, time.Since(ended).Round(time.Millisecond))
	if h := o.Hold(); h != (outbox.Hold{}) {
		t.Errorf("Hold() after catching up = %+v, want none", h)
	}
}

// lockedBuffer is an io.Writer whose contents may be read while a process
// writes to it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// exampleHold: the example prints, on stderr, what holds it back, naming
// the transaction's backend, and relays the rows once the transaction
// ended.
func exampleHold(t *testing.T, bin string) {
	dsn := pgtest.NewDB(t)
	pool := newPool(t, dsn)
	openOutbox(t, newOutbox(t, pool), outbox.Cursor{}) // creates the table
	long := begin(t, pool, "first")
	var pid int
	if err := long.QueryRow(pgtest.Ctx(t), "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	commit(t, begin(t, pool, "second"))

	var stdout, stderr lockedBuffer
	cmd := osexec.Command(bin, "-dsn", dsn, "-table", "outbox", "-state", filepath.Join(t.TempDir(), "cursor.json"))
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		if err := <-done; err != nil {
			t.Errorf("the relay on SIGTERM: %v\n%s", err, stderr.String())
		}
	}()
	ctx := pgtest.Ctx(t)
	want := fmt.Sprintf(", pid %d\n", pid)
	awaitCond(t, ctx, "the hold on stderr", func() bool { return strings.Contains(stderr.String(), want) })
	if out := stdout.String(); out != "" {
		t.Fatalf("printed %q while held", out)
	}
	commit(t, long)
	awaitCond(t, ctx, "both rows", func() bool { return stdout.String() == "handled 1\nhandled 2\n" })
	t.Logf("stderr:\n%s", stderr.String())
}

// TestOutboxServerCrash: the server crashes (no checkpoint) under a
// running stream, with rows committed before and after: the Resumer
// reopens after the cursor and every committed row is handled once, in
// order.
func TestOutboxServerCrash(t *testing.T) {
	srv := pgtest.Start(t, pgtest.Options{})
	pool := newPool(t, srv.DSN())
	o := newOutbox(t, pool)
	openOutbox(t, o, outbox.Cursor{}).Close() // creates the table
	for _, p := range []string{"1", "2", "3"} {
		commit(t, begin(t, pool, p))
	}
	r, err := stream.New(o, outbox.Extract[msg], cursor.NewMemory(outbox.Cursor{}),
		stream.WithCursorOrder(outbox.Compare), stream.WithBackoff(backoff.Constant(20*time.Millisecond)))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []string
	handled := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got)
	}
	ctx, cancel := context.WithCancel(pgtest.Ctx(t))
	done := make(chan error, 1)
	go func() {
		done <- r.Run(ctx, func(_ context.Context, ev msgEvent) error {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, ev.Row.Payload)
			return nil
		})
	}()
	awaitCond(t, pgtest.Ctx(t), "the rows before the crash", func() bool { return len(handled()) == 3 })
	if err := srv.Crash(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	pool.Reset()
	for _, p := range []string{"4", "5"} {
		commit(t, begin(t, pool, p))
	}
	awaitCond(t, pgtest.Ctx(t), "the rows after the crash", func() bool { return len(handled()) >= 5 })
	cancel()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("Run() = %v", err)
	}
	if fmt.Sprint(handled()) != "[1 2 3 4 5]" {
		t.Fatalf("handled %v, want [1 2 3 4 5]", handled())
	}
}
