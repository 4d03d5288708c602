package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/resumable-go/resumable/adapters/postgres/outbox"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/internal/testkit/pgtest"
)

// errNoPostgres is what the demo returns when PostgreSQL's binaries are
// missing: main prints the install command and exits 2.
var errNoPostgres = errors.New("PostgreSQL's binaries are missing")

// installCommand installs the binaries the demo needs (Debian, Ubuntu).
const installCommand = "apt-get install postgresql"

// writers is how many transactions act 2 keeps open at once.
const writers = 10

// demoTimeout bounds the whole demo; it guards against a hang.
const demoTimeout = 2 * time.Minute

// demo starts a throw-away PostgreSQL and shows what the outbox is for:
// rows committed out of id order (a transaction holding a lower id commits
// after one holding a higher id) are all relayed, in the order of their
// transactions, while a relay reading id > last skips them. It checks what
// it shows and returns an error when anything differs.
func demo(ctx context.Context, stdout, stderr io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, demoTimeout)
	defer cancel()
	srv, err := pgtest.Launch(pgtest.Options{})
	if errors.Is(err, pgtest.ErrNoBinaries) {
		return fmt.Errorf("%w (looked in $%s, else %s): %v", errNoPostgres, pgtest.EnvBin, pgtest.DefaultBin, err)
	}
	if err != nil {
		return err
	}
	defer srv.Close()
	fmt.Fprintf(stderr, "demo: a throw-away PostgreSQL at 127.0.0.1:%d\n", srv.Port())
	cfg, err := pgxpool.ParseConfig(srv.DSN())
	if err != nil {
		return err
	}
	cfg.MaxConns = writers + 4 // act 2's open transactions, and the reads beside them
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()

	dir, err := os.MkdirTemp("", "outbox-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	out := &lockedWriter{w: stdout}
	d := &demoRun{pool: pool, out: out, handled: make(chan int64, 64), stopped: make(chan struct{})}
	src, err := outbox.NewSource(pool, "outbox", pgx.RowToStructByName[row],
		outbox.WithCreate("payload text NOT NULL"))
	if err != nil {
		return err
	}
	if err := createTable(ctx, src); err != nil {
		return err
	}
	store, err := cursor.NewFile(filepath.Join(dir, "cursor.json"), outbox.Cursor{}, cursor.JSON[outbox.Cursor]())
	if err != nil {
		return err
	}
	r, err := outbox.NewResumer(src, store)
	if err != nil {
		return err
	}
	relayCtx, stopRelay := context.WithCancel(ctx)
	var runErr error
	go func() {
		defer close(d.stopped)
		runErr = r.Run(relayCtx, func(_ context.Context, ev outbox.Event[row]) error {
			fmt.Fprintf(out, "handled %d\n", ev.Row.ID)
			d.handled <- ev.Row.ID
			return nil
		})
	}()
	err = d.show(ctx, src)
	stopRelay()
	<-d.stopped
	if !errors.Is(runErr, context.Canceled) {
		err = errors.Join(err, fmt.Errorf("the relay stopped: %v", runErr))
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "demo: relay stopped at %v\n", r.Cursor())
	return nil
}

// createTable has src create its table (WithCreate) by opening and closing
// one connection.
func createTable(ctx context.Context, src *outbox.Source[row]) error {
	c, err := src.Open(ctx, outbox.Cursor{})
	if err != nil {
		return err
	}
	return c.Close()
}

// demoRun is the demo's state: the writers' pool, what the relay handled,
// and what a relay reading id > last saw.
type demoRun struct {
	pool    *pgxpool.Pool
	out     io.Writer
	handled chan int64    // the ids the relay handled, in order
	stopped chan struct{} // closed when the relay's Run returned
	got     []int64       // what was received from handled
	last    int64         // the id > last relay's position
	naive   []int64       // what the id > last relay read
}

// show runs the two acts and checks them.
func (d *demoRun) show(ctx context.Context, src *outbox.Source[row]) error {
	fmt.Fprintln(d.out, "act 1: the transaction that took id 1 commits after the one that took id 2")
	a, err := d.begin(ctx, "A")
	if err != nil {
		return err
	}
	defer a.tx.Rollback(context.Background())
	b, err := d.begin(ctx, "B")
	if err != nil {
		return err
	}
	defer b.tx.Rollback(context.Background())
	fmt.Fprintf(d.out, "writer A inserted id %d, not committed yet\n", a.id)
	if err := d.commit(ctx, b); err != nil {
		return err
	}
	if err := d.readNaive(ctx); err != nil {
		return err
	}
	if err := awaitHold(ctx, src); err != nil {
		return err
	}
	if len(d.handled) != 0 {
		return fmt.Errorf("the relay handled id %d while writer A's transaction ran", <-d.handled)
	}
	fmt.Fprintf(d.out, "outbox relay: holds id %d back while the transaction of id %d runs\n", b.id, a.id)
	if err := d.commit(ctx, a); err != nil {
		return err
	}
	if err := d.await(ctx, 2); err != nil {
		return err
	}
	if err := d.readNaive(ctx); err != nil {
		return err
	}

	fmt.Fprintf(d.out, "act 2: %d transactions insert a row each, then commit in reverse id order\n", writers)
	var txs []writer
	defer func() {
		for _, w := range txs {
			w.tx.Rollback(context.Background())
		}
	}()
	for i := range writers {
		w, err := d.begin(ctx, fmt.Sprintf("W%d", i))
		if err != nil {
			return err
		}
		txs = append(txs, w)
	}
	for i, w := range slices.Backward(txs) {
		if err := d.commit(ctx, w); err != nil {
			return err
		}
		if i == writers-1 {
			if err := d.readNaive(ctx); err != nil {
				return err
			}
		}
	}
	if err := d.await(ctx, 2+writers); err != nil {
		return err
	}
	if err := d.readNaive(ctx); err != nil {
		return err
	}
	return d.check(2 + writers)
}

// writer is an open transaction that inserted the row id.
type writer struct {
	tx   pgx.Tx
	name string
	id   int64
}

// begin starts a transaction that inserts a row with payload name.
func (d *demoRun) begin(ctx context.Context, name string) (writer, error) {
	tx, err := d.pool.Begin(ctx)
	if err != nil {
		return writer{}, err
	}
	w := writer{tx: tx, name: name}
	if err := tx.QueryRow(ctx, "INSERT INTO outbox (payload) VALUES ($1) RETURNING id", name).Scan(&w.id); err != nil {
		tx.Rollback(context.Background())
		return writer{}, err
	}
	return w, nil
}

// commit says so and commits w's transaction.
func (d *demoRun) commit(ctx context.Context, w writer) error {
	fmt.Fprintf(d.out, "writer %s commits id %d\n", w.name, w.id)
	return w.tx.Commit(ctx)
}

// readNaive reads the rows a relay reading id > last reads, and moves its
// position past them.
func (d *demoRun) readNaive(ctx context.Context) error {
	rows, err := d.pool.Query(ctx, "SELECT id FROM outbox WHERE id > $1 ORDER BY id", d.last)
	if err != nil {
		return err
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return err
	}
	fmt.Fprintf(d.out, "id > %d relay reads %v\n", d.last, ids)
	if len(ids) > 0 {
		d.last = ids[len(ids)-1]
	}
	d.naive = append(d.naive, ids...)
	return nil
}

// await waits until the relay has handled n rows in all.
func (d *demoRun) await(ctx context.Context, n int) error {
	for len(d.got) < n {
		select {
		case id := <-d.handled:
			d.got = append(d.got, id)
		case <-d.stopped:
			return fmt.Errorf("the relay stopped after handling %v", d.got)
		case <-ctx.Done():
			return fmt.Errorf("the relay handled %v, want %d rows: %w", d.got, n, ctx.Err())
		}
	}
	return nil
}

// check compares what both relays read with the n rows committed.
func (d *demoRun) check(n int) error {
	want := make([]int64, n)
	for i := range want {
		want[i] = int64(i + 1)
	}
	if !slices.Equal(d.got, want) {
		return fmt.Errorf("the outbox relay handled %v, want %v", d.got, want)
	}
	skipped := n - len(d.naive)
	fmt.Fprintf(d.out, "outbox relay: %d rows committed, %d handled, none skipped\n", n, len(d.got))
	fmt.Fprintf(d.out, "id > last relay: read %v, skipped %d\n", d.naive, skipped)
	if skipped == 0 {
		return errors.New("the id > last relay skipped nothing: the demo showed nothing")
	}
	fmt.Fprintln(d.out, "ok")
	return nil
}

// lockedWriter serialises the writes of the relay and of the demo.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// awaitHold polls src.Hold until it reports a holder, within ctx.
func awaitHold(ctx context.Context, src *outbox.Source[row]) error {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for src.Hold().Tx == 0 {
		select {
		case <-ctx.Done():
			return fmt.Errorf("the relay reported no hold: %w", ctx.Err())
		case <-tick.C:
		}
	}
	return nil
}
