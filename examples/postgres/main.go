// Command postgres consumes a PostgreSQL publication through logical
// replication with resumable's adapters/postgres/cdc, keeping its cursor in a
// file: killed at any instant and started again, it goes on with the next
// change, inside a transaction if it stopped inside one, and the server is
// told to discard only what the file already covers.
//
// For every change it handles, it prints exactly one line to stdout, as
// the change is handled (unbuffered):
//
//	handled TABLE OP ID LSN INDEX
//
// TABLE is schema.name, OP one of INSERT, UPDATE, DELETE, ID the value of
// the row's id column (the old row's for a DELETE), LSN the commit LSN of
// the change's transaction (X/X), INDEX the change's index within its
// transaction, from 0. Everything else goes to stderr. The cursor is saved
// after every change (with -checkpoint D, at most every D: a kill then
// prints again the changes since the last save), except while -snapshot's
// snapshot is under way: every 10ms then, the file written at most every
// 100ms and a second file, STATE.rows, in between without an fsync, so
// that neither its rows nor the changes a chunk waits for are an fsync
// each, and a kill prints again what was handled in the last 10ms. A
// backfill's rows, which share a position, reach the file at most every
// 100ms and STATE.rows in between too. On SIGTERM or SIGINT it saves and exits with status
// 0. When the server or the slot is not the one the saved cursor came from
// (a recreated slot, a restored or replaced server), it stops with status
// 1 and says what changed.
//
// -snapshot: on a first start (the state file holds no cursor), the rows
// that already exist come first, interleaved with the changes since, each
// printed as
//
//	handled TABLE SNAPSHOT ID LSN INDEX
//
// (LSN and INDEX: the position the stream was at when the row was
// delivered). -backfill TABLE (repeatable) reads TABLE again the same way
// while streaming. Killed during either and started again with the same
// flags, it goes on from its cursor.
//
// -failover creates the slot as a failover slot (PostgreSQL 17), which a
// physical standby with sync_replication_slots = on keeps a synced copy
// of, confirms positions every second (the synced copy is persisted once
// the slot moves), and retries a lost connection at most every 5 s. With a DSN naming
// the primary and its standby and asking for the primary, e.g.
//
//	postgres://postgres@127.0.0.1:5432,127.0.0.1:5433/db?target_session_attrs=read-write
//
// it follows a promotion: it goes on from its cursor on the promoted
// standby's synced slot, printing every change committed there at least
// once. A promoted standby without the synced slot stops it with status 1
// naming the slot (the slot is not created there); one whose timeline
// branched before what it already printed stops it with status 1 naming
// the timeline, the branch point and the cursor.
//
// -format json prints, instead of handled lines, one JSON object per change
// or snapshot row, each on one line:
//
//	{"op":"snapshot"|"insert"|"update"|"delete","table":"public.t","lsn":"0/16B3F48","index":3,"new":{…},"old":{…},"commit_time":"…"}
//
// and one per table a TRUNCATE empties (which the text format only reports
// on stderr):
//
//	{"op":"truncate","table":"public.t","lsn":"0/16B3F48","index":3,"commit_time":"…"}
//
// new (absent for a delete) and old (when the server sent it) map column
// names to typed JSON values (integers as numbers, numeric as a string,
// json as JSON, NULL as null, an unchanged TOASTed value as
// {"unchanged":true}); commit_time (RFC 3339) is the transaction's, for
// changes. A consumer that applies the lines in order (snapshot, insert
// and update as upserts, delete as removal, truncate as emptying the
// table) ends equal to the tables.
//
// With no flags it runs a demo that needs only PostgreSQL's binaries
// (initdb and postgres, looked for in $RESUMABLE_PG_BIN, else
// /usr/lib/postgresql/15/bin): it starts a throw-away server, writes a
// transaction of 10 rows, stops the consumer after the 3rd change, and
// starts it again, which goes on with the 4th.
//
// Usage:
//
//	go run ./examples/postgres                              # the demo
//	go run ./examples/postgres -dsn DSN -slot NAME -publication NAME -state FILE \
//		[-snapshot] [-backfill TABLE]... [-format text|json] [-checkpoint D] [-failover]
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/resumable-go/resumable/adapters/postgres/cdc"
	"github.com/resumable-go/resumable/backoff"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/stream"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, os.Stdout, os.Stderr, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "postgres:", err)
		stop()
		os.Exit(1)
	}
}

// config is what the flags say.
type config struct {
	dsn, slot, pub, state string
	stopAfter             int // stop (and save) after this many changes; 0: never
	snapshot              bool
	failover              bool
	json                  bool
	backfill              []string
	checkpoint            time.Duration // save at most this often; 0: after every change
}

// tables is a repeatable flag.
type tables []string

func (t *tables) String() string     { return strings.Join(*t, ",") }
func (t *tables) Set(v string) error { *t = append(*t, v); return nil }

// run is the whole program. It returns nil when ctx ends.
func run(ctx context.Context, stdout, stderr io.Writer, args []string) error {
	fs := flag.NewFlagSet("postgres", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg config
	fs.StringVar(&cfg.dsn, "dsn", "", "the database to replicate from (a postgres:// URL or key=value string)")
	fs.StringVar(&cfg.slot, "slot", "", "the logical replication slot (created when absent and the state file holds no cursor)")
	fs.StringVar(&cfg.pub, "publication", "", "the publication to consume")
	fs.StringVar(&cfg.state, "state", "", "the file that keeps the cursor")
	fs.BoolVar(&cfg.failover, "failover", false, "create the slot as a failover slot (PostgreSQL 17), confirm every 1s, and retry a lost connection at most every 5s")
	fs.BoolVar(&cfg.snapshot, "snapshot", false, "on a first start (no cursor in the state file), deliver the rows that already exist first")
	format := fs.String("format", "text", "the output: text (handled lines) or json (one object per row)")
	fs.Var((*tables)(&cfg.backfill), "backfill", "backfill this table while streaming (repeatable)")
	fs.DurationVar(&cfg.checkpoint, "checkpoint", 0, "save the cursor at most this often (0: after every change)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) { // -h: the usage was printed, and asked for
			return nil
		}
		return err
	}
	if cfg.checkpoint < 0 {
		return fmt.Errorf("-checkpoint %v: negative", cfg.checkpoint)
	}
	switch *format {
	case "text":
	case "json":
		cfg.json = true
	default:
		return fmt.Errorf("-format %q: want text or json", *format)
	}
	if fs.NFlag() == 0 {
		return demo(ctx, stdout, stderr)
	}
	if cfg.dsn == "" || cfg.slot == "" || cfg.pub == "" || cfg.state == "" {
		return errors.New("-dsn, -slot, -publication and -state are all required")
	}
	return consume(ctx, stdout, stderr, cfg)
}

// consume runs the stream until ctx ends, printing a line per change.
func consume(ctx context.Context, stdout, stderr io.Writer, cfg config) error {
	file, err := cursor.NewFile(cfg.state, cdc.Cursor{}, cursor.JSON[cdc.Cursor]())
	if err != nil {
		return err
	}
	inner := fileRows{file: file, path: cfg.state + ".rows"}
	var opts []cdc.SourceOption
	if cfg.snapshot {
		opts = append(opts, cdc.WithSnapshot(0))
	}
	if cfg.failover {
		// Confirming every second moves the slot on, which the standby's
		// synced copy waits for before it is persisted.
		opts = append(opts, cdc.WithFailover(), cdc.WithStatusInterval(time.Second))
	}
	src, err := cdc.NewSource(cfg.dsn, cfg.slot, cfg.pub, opts...)
	if err != nil {
		return err
	}
	for _, t := range cfg.backfill {
		if err := src.Backfill(ctx, t); err != nil {
			return err
		}
	}
	// Where this run resumes (the stream's own load, through
	// cdc.Source.Confirming, waits until it holds the slot).
	loaded, err := inner.Load(ctx)
	if err != nil {
		return err
	}
	store := &rowSaves{store: src.Confirming(inner), rowsf: inner.path}
	fmt.Fprintf(stderr, "resuming after cursor %v from %s\n", loaded, cfg.state)
	log := zap.New(zapCore(stderr))
	// A snapshot under way (a first start with -snapshot, or one resumed)
	// is saved every 10ms until its end, unless -checkpoint says otherwise,
	// the file written at most every 100ms (see rowSaves): its rows, and the
	// changes that wait before a chunk, are not an fsync each. Then this Run
	// stops, and the next saves after every change.
	snapshotting := cfg.checkpoint == 0 && cfg.snapshot && (loaded.Snapshot != "" || loaded == cdc.Cursor{})
	var inSnapshot atomic.Bool
	inSnapshot.Store(loaded.Snapshot != "" || cfg.snapshot && loaded == cdc.Cursor{})
	stopWaits := logWaits(ctx, stderr, src, &inSnapshot)
	n := 0
	handle := func(_ context.Context, ev cdc.Event) error {
		row := ev.New
		if ev.Op == cdc.Delete {
			row = ev.Old
		}
		switch {
		case ev.Op == cdc.Truncate && !cfg.json:
			fmt.Fprintf(stderr, "truncated %s at %v #%d\n", ev.Relation, ev.LSN, ev.Index)
		case cfg.json:
			line, err := jsonLine(ev)
			if err != nil {
				return err
			}
			if _, err := stdout.Write(line); err != nil {
				return err
			}
		default:
			id, _ := row.Get("id")
			fmt.Fprintf(stdout, "handled %s %s %s %s %d\n", ev.Relation, ev.Op, id, ev.LSN, ev.Index)
		}
		inSnapshot.Store(ev.Cursor.Snapshot != "")
		if n++; cfg.stopAfter > 0 && n >= cfg.stopAfter {
			return stream.ErrStop
		}
		if snapshotting && ev.Cursor.Snapshot == "" {
			snapshotting = false // the snapshot is over
			return stream.ErrStop
		}
		return nil
	}
	var r *stream.Resumer[cdc.Event, cdc.Cursor]
	for {
		save := stream.WithCheckpointEvery(1)
		switch {
		case cfg.checkpoint > 0:
			save = stream.WithCheckpointInterval(cfg.checkpoint)
		case snapshotting:
			save = stream.WithCheckpointInterval(rowsWriteEvery)
		}
		sopts := []stream.Option{stream.WithLogger(log), save}
		if cfg.failover { // a promotion takes seconds: look for the new primary often
			sopts = append(sopts, stream.WithBackoff(backoff.Exponential(backoff.WithMaxInterval(5*time.Second))))
		}
		store.keepAny(snapshotting)
		// As cdc.NewResumer, but with Confirming inside rowSaves: only the
		// file's writes are confirmed to the server.
		sopts = append([]stream.Option{stream.WithCursorOrder(cdc.Compare)}, sopts...)
		if r, err = stream.New(src, cdc.Extract, store, sopts...); err != nil {
			return err
		}
		was := snapshotting
		err = r.Run(ctx, handle)
		if err != nil || !was || snapshotting || cfg.stopAfter > 0 && n >= cfg.stopAfter {
			break
		}
	}
	stopWaits()
	// A snapshot row's save the stream made may have been kept back.
	fctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if ferr := store.flush(fctx); ferr != nil && err == nil {
		err = ferr
	}
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		fmt.Fprintf(stderr, "stopped at %v\n", r.Cursor())
		return nil
	}
	return err
}

// logWaits logs, every 5 s while a snapshot or a backfill is under way,
// a chunk that waits for its watermark and how much WAL the stream reads
// before the chunk's rows go: a resume behind a backlog is not a stall.
// The function it returns stops it and waits for its end.
func logWaits(ctx context.Context, stderr io.Writer, src *cdc.Source, inSnapshot *atomic.Bool) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(5 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if !inSnapshot.Load() {
				continue
			}
			if h, err := src.Health(ctx); err == nil && h.SnapshotWaitTable != "" {
				fmt.Fprintf(stderr, "snapshot of %s: a chunk waits for its watermark, %.1f MiB of WAL before it\n", h.SnapshotWaitTable, float64(h.SnapshotWaitBytes)/(1<<20))
			}
		}
	}()
	return func() { cancel(); <-done }
}

// jsonLine formats a change or a snapshot row as one line of JSON (the
// Tuple's JSON is one line).
func jsonLine(ev cdc.Event) ([]byte, error) {
	b := append([]byte(`{"op":`), strconv.Quote(strings.ToLower(ev.Op.String()))...)
	b = append(b, `,"table":`...)
	t, _ := json.Marshal(ev.Relation)
	b = append(b, t...)
	b = append(b, `,"lsn":"`...)
	b = append(b, ev.LSN.String()...)
	b = append(b, `","index":`...)
	b = strconv.AppendInt(b, int64(ev.Index), 10)
	if ev.Op != cdc.Delete && ev.Op != cdc.Truncate {
		row, err := ev.New.MarshalJSON()
		if err != nil {
			return nil, err
		}
		b = append(append(b, `,"new":`...), row...)
	}
	if ev.Old.Len() > 0 {
		row, err := ev.Old.MarshalJSON()
		if err != nil {
			return nil, err
		}
		b = append(append(b, `,"old":`...), row...)
	}
	if !ev.CommitTime.IsZero() {
		b = append(b, `,"commit_time":"`...)
		b = ev.CommitTime.UTC().AppendFormat(b, time.RFC3339Nano)
		b = append(b, '"')
	}
	return append(b, "}\n"...), nil
}
