// Command outbox relays an outbox table with resumable's outbox package
// (adapters/postgres/outbox):
// the rows writers insert in their transactions, in the order of those
// transactions, none skipped even when transactions commit out of id
// order. It needs only SELECT (and, to create the table, CREATE) on the
// database: no replication.
//
// It creates the table when it is missing, with the columns id bigserial
// PRIMARY KEY, xid xid8 (the inserting transaction, filled in by the
// server) and payload text NOT NULL, and a trigger that notifies the relay
// of each insert. A writer only does
//
//	INSERT INTO NAME (payload) VALUES ($1)
//
// For every row it handles, it prints exactly one line to stdout, as the
// row is handled (unbuffered):
//
//	handled ID
//
// and saves its cursor in the state file: at the first row after 100ms
// since the last save (-checkpoint; 0 saves after every row, an fsync
// each), when the connection ends, and on exit. A SIGKILL makes it print
// again at most the rows handled since the last save. Everything else goes to stderr, a line a second while the relay is
// held back by a transaction that stays open ("held 12s by transaction N,
// pid P"). On SIGTERM or SIGINT it saves and exits with status 0. When the
// server is not the one the saved cursor came from (a restored or recreated
// database), it stops with status 1 and says what changed.
//
// With -redis HOST:PORT -stream NAME it relays into a Redis stream,
// exactly once: each row becomes one entry of the stream NAME, with the
// fields id (the row's id, decimal) and payload, added (XADD) in the same
// MULTI/EXEC as the cursor (the rows read while the last MULTI/EXEC ran,
// up to 100, share the next one), which lives in Redis (the hash
// {NAME}:cursor:TABLE; -state and -checkpoint are not used) and is fenced:
// a relay started on the same table and stream takes it over, and a
// predecessor still running writes nothing more and exits with status 1.
// A SIGKILL at any moment leaves every committed row in the stream
// exactly once; it prints "handled ID" once the entry is in Redis (a
// SIGKILL may come between the two: then the line is missing, never the
// entry).
//
// With no arguments it runs a demo that needs only PostgreSQL's binaries
// ($RESUMABLE_PG_BIN, else /usr/lib/postgresql/15/bin): it starts a
// throw-away server, commits rows out of id order (a transaction that took
// a lower id commits after one that took a higher id), relays them, checks
// that none was skipped while a relay reading id > last skipped them, and
// exits 0. Without the binaries it prints the command that installs them
// and exits 2.
//
// Usage:
//
//	go run ./examples/outbox                                 # the demo
//	go run ./examples/outbox -dsn DSN -table NAME -state FILE [-checkpoint D] [-poll D] [-listen=false]
//	go run ./examples/outbox -dsn DSN -table NAME -redis HOST:PORT -stream NAME [-poll D] [-listen=false]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/resumable-go/resumable/adapters/postgres/outbox"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/stream"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, os.Stdout, os.Stderr, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "outbox:", err)
		stop()
		if errors.Is(err, errNoPostgres) {
			fmt.Fprintln(os.Stderr, "install them with:", installCommand)
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// config is what the flags say.
type config struct {
	dsn, table, state string
	redis, stream     string // the Redis relay: the server and the stream
	checkpoint        time.Duration
	poll              time.Duration
	listen            bool
}

// row is a row of the outbox table (its columns other than xid).
type row struct {
	ID      int64
	Payload string
}

// run is the whole program. It returns nil when ctx ends.
func run(ctx context.Context, stdout, stderr io.Writer, args []string) error {
	if len(args) == 0 {
		return demo(ctx, stdout, stderr)
	}
	fs := flag.NewFlagSet("outbox", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg config
	fs.StringVar(&cfg.dsn, "dsn", "", "the database (a postgres:// URL or key=value string)")
	fs.StringVar(&cfg.table, "table", "", "the outbox table, name or schema.name (created when missing)")
	fs.StringVar(&cfg.state, "state", "", "the file that keeps the cursor")
	fs.DurationVar(&cfg.checkpoint, "checkpoint", 100*time.Millisecond, "save the cursor at most this often (and on exit); 0: after every row")
	fs.DurationVar(&cfg.poll, "poll", time.Second, "read the table at least this often")
	fs.BoolVar(&cfg.listen, "listen", true, "LISTEN for the trigger's notifications (else only poll)")
	fs.StringVar(&cfg.redis, "redis", "", "relay into a Redis stream on this server (HOST:PORT), exactly once; the cursor lives in Redis")
	fs.StringVar(&cfg.stream, "stream", "", "the Redis stream the rows go to (with -redis)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case cfg.redis != "" || cfg.stream != "":
		if cfg.dsn == "" || cfg.table == "" || cfg.redis == "" || cfg.stream == "" {
			fs.Usage()
			return errors.New("-dsn, -table, -redis and -stream are all required to relay into Redis")
		}
		if cfg.state != "" {
			return errors.New("-state is not used with -redis: the cursor lives in Redis")
		}
	case cfg.dsn == "" || cfg.table == "" || cfg.state == "":
		fs.Usage()
		return errors.New("-dsn, -table and -state are all required")
	}
	if cfg.checkpoint < 0 {
		return errors.New("-checkpoint must not be negative")
	}
	return relay(ctx, stdout, stderr, cfg)
}

// relay runs the stream until ctx ends, printing a line per row.
func relay(ctx context.Context, stdout, stderr io.Writer, cfg config) error {
	pool, err := pgxpool.New(ctx, cfg.dsn)
	if err != nil {
		return err
	}
	defer pool.Close()
	opts := []outbox.Option{outbox.WithCreate("payload text NOT NULL"), outbox.WithPollInterval(cfg.poll)}
	if !cfg.listen {
		opts = append(opts, outbox.WithNotify(""))
	}
	src, err := outbox.NewSource(pool, cfg.table, pgx.RowToStructByName[row], opts...)
	if err != nil {
		return err
	}
	if cfg.redis != "" {
		return relayRedis(ctx, stdout, stderr, cfg, src)
	}
	store, err := cursor.NewFile(cfg.state, outbox.Cursor{}, cursor.JSON[outbox.Cursor]())
	if err != nil {
		return err
	}
	save := []stream.Option{stream.WithCheckpointEvery(1), stream.WithCheckpointInterval(0)}
	if cfg.checkpoint > 0 {
		save = []stream.Option{stream.WithCheckpointInterval(cfg.checkpoint)}
	}
	r, err := outbox.NewResumer(src, store, save...)
	if err != nil {
		return err
	}
	return runRelay(ctx, stderr, r, src, func(ctx context.Context) error {
		return r.Run(ctx, func(_ context.Context, ev outbox.Event[row]) error {
			_, err := fmt.Fprintf(stdout, "handled %d\n", ev.Row.ID)
			return err
		})
	})
}

// runRelay runs r (with run: r.Run or r.RunBatch) until ctx ends,
// reporting holds on stderr.
func runRelay(ctx context.Context, stderr io.Writer, r *stream.Resumer[outbox.Event[row], outbox.Cursor], src *outbox.Source[row], run func(context.Context) error) error {
	var wg sync.WaitGroup
	watch, stopWatch := context.WithCancel(ctx)
	wg.Go(func() { reportHold(watch, stderr, src) })
	defer func() {
		stopWatch()
		wg.Wait()
	}()
	err := run(ctx)
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		fmt.Fprintf(stderr, "stopped at %v\n", r.Cursor())
		return nil
	}
	return err
}

// reportHold prints a line a second while the relay is held back, until
// ctx ends.
func reportHold(ctx context.Context, stderr io.Writer, src *outbox.Source[row]) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			if h := src.Hold(); !h.Since.IsZero() {
				fmt.Fprintf(stderr, "held %v by transaction %d, pid %d\n", now.Sub(h.Since).Round(time.Second), h.Tx, h.PID)
			}
		}
	}
}
