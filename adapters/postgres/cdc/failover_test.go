package cdc_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/resumable-go/resumable/adapters/postgres"
	"github.com/resumable-go/resumable/adapters/postgres/cdc"
	"github.com/resumable-go/resumable/backoff"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/internal/testkit/pgtest"
	"github.com/resumable-go/resumable/stream"
)

// pair is a PostgreSQL 17 primary and its physical standby, which keeps
// synced copies of the primary's failover slots; the table items is
// published by pub in the database postgres.
type pair struct {
	primary, standby *pgtest.Server
	dsn              string // names both, target_session_attrs=read-write
}

// startPair starts a pair; with waitFor, the primary's logical walsenders
// of failover slots send nothing the standby has not received
// (synchronized_standby_slots).
func startPair(t *testing.T, waitFor bool) *pair {
	t.Helper()
	p := pgtest.Start(t, pgtest.Options{Version: 17})
	replExec(t, p.DSN(),
		"CREATE TABLE items (id int PRIMARY KEY, v int NOT NULL DEFAULT 0)",
		"CREATE TABLE other (note text)", // not published
		"CREATE PUBLICATION pub FOR TABLE items")
	sb := p.Standby(t, "sb1", nil)
	if waitFor {
		replExec(t, p.DSN(), "ALTER SYSTEM SET synchronized_standby_slots = 'sb1'", "SELECT pg_reload_conf()")
	}
	return &pair{primary: p, standby: sb,
		dsn: fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/postgres?sslmode=disable&target_session_attrs=read-write", p.Port(), sb.Port())}
}

// insert inserts the rows ids through the pair's DSN, one transaction.
func (pr *pair) insert(ctx context.Context, ids ...int) error {
	conn, err := pgx.Connect(ctx, pr.dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, "INSERT INTO items (id) SELECT unnest($1::int[])", ids)
	return err
}

// awaitSynced waits until the standby holds a synced, persistent copy of
// slot, asking the primary to log a standby snapshot and inserting a row
// (numbered by next) at each look, so that the slot moves.
func (pr *pair) awaitSynced(t *testing.T, slot string, next func() int) {
	t.Helper()
	replUntil(t, "slot "+slot+" synced on the standby", func() bool {
		if err := pr.insert(t.Context(), next()); err != nil {
			t.Fatal(err)
		}
		replExec(t, pr.primary.DSN(), "SELECT pg_log_standby_snapshot()")
		return count(t, pr.standby.DSN(), "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1 AND synced AND NOT temporary", slot) == 1
	})
}

// count runs a query returning one number.
func count(t *testing.T, dsn, sql string, args ...any) int64 {
	t.Helper()
	ctx := pgtest.Ctx(t)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int64
	if err := conn.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// ids returns the ids of the rows of items on dsn.
func ids(t *testing.T, dsn string) []int {
	t.Helper()
	ctx := pgtest.Ctx(t)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, "SELECT id FROM items ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// consumer runs a Resumer over the pair's slot in the background and
// records the ids of the rows inserted.
type consumer struct {
	mu       sync.Mutex
	seen     map[int]bool
	timeline map[int32]time.Time // when the first change read on each timeline was handled
	last     cdc.Cursor
	handled  int

	cancel    context.CancelFunc
	done      chan error
	connected chan struct{} // closed at the first connection (the slot exists then)
}

// awaitConnected waits for the first connection.
func (c *consumer) awaitConnected(t *testing.T) {
	t.Helper()
	select {
	case <-c.connected:
	case err := <-c.done:
		close(c.done)
		t.Fatalf("Run() = %v before connecting", err)
	case <-pgtest.Ctx(t).Done():
		t.Fatalf("no connection within %v", pgtest.Deadline)
	}
}

func runConsumer(t *testing.T, dsn, slot string, store cursor.Store[cdc.Cursor], opts ...cdc.SourceOption) *consumer {
	t.Helper()
	src, err := cdc.NewSource(dsn, slot, "pub", append([]cdc.SourceOption{cdc.WithStatusInterval(100 * time.Millisecond)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return runSource(t, src, store)
}

// runSource runs a Resumer over src in the background.
func runSource(t *testing.T, src *cdc.Source, store cursor.Store[cdc.Cursor]) *consumer {
	t.Helper()
	return runSourceGated(t, src, store, func(int) {})
}

// runSourceGated runs a Resumer over src in the background, calling gate
// with the number of events handled before handling each.
func runSourceGated(t *testing.T, src *cdc.Source, store cursor.Store[cdc.Cursor], gate func(n int)) *consumer {
	t.Helper()
	connected := make(chan struct{})
	var once sync.Once
	r, err := cdc.NewResumer(src, store, stream.WithBackoff(backoff.Constant(50*time.Millisecond)), stream.WithCheckpointEvery(1),
		stream.WithHooks(stream.Hooks[cdc.Cursor]{
			OnConnect: func(stream.ConnectEvent[cdc.Cursor]) { once.Do(func() { close(connected) }) },
			OnDisconnect: func(e stream.DisconnectEvent[cdc.Cursor]) {
				if e.Err != nil && !e.Clean {
					t.Logf("disconnect: %v", e.Err)
				}
			},
		}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(pgtest.Ctx(t))
	c := &consumer{seen: map[int]bool{}, timeline: map[int32]time.Time{}, cancel: cancel, done: make(chan error, 1), connected: connected}
	go func() {
		c.done <- r.Run(ctx, func(_ context.Context, ev cdc.Event) error {
			gate(c.count())
			c.mu.Lock()
			defer c.mu.Unlock()
			c.handled++
			if _, ok := c.timeline[ev.Cursor.Timeline]; !ok {
				c.timeline[ev.Cursor.Timeline] = time.Now()
			}
			c.last = ev.Cursor
			if ev.Op == cdc.Insert || ev.Op == cdc.Snapshot {
				id, _ := ev.New.Get("id")
				var n int
				fmt.Sscan(string(id), &n)
				c.seen[n] = true
			}
			return nil
		})
	}()
	t.Cleanup(func() { c.stop() })
	return c
}

// stop ends the consumer and returns what Run returned.
func (c *consumer) stop() error {
	c.cancel()
	err, ok := <-c.done
	if ok {
		close(c.done)
	}
	return err
}

// count returns the number of events handled.
func (c *consumer) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.handled
}

// has reports whether the consumer handled every id of want.
func (c *consumer) has(want ...int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range want {
		if !c.seen[id] {
			return false
		}
	}
	return true
}

// result waits for Run to return by itself.
func (c *consumer) result(t *testing.T) error {
	t.Helper()
	select {
	case err := <-c.done:
		close(c.done)
		return err
	case <-pgtest.Ctx(t).Done():
		t.Fatalf("Run did not return within %v", pgtest.Deadline)
		return nil
	}
}

func seq(from, to int) []int {
	var s []int
	for i := from; i <= to; i++ {
		s = append(s, i)
	}
	return s
}

// TestFailoverPG17: a failover slot followed across a promotion, writers
// on: every change committed on the surviving server is delivered, none
// skipped, and the stream reads on the new timeline.
func TestFailoverPG17(t *testing.T) {
	pr := startPair(t, true)
	store := cursor.NewMemory(cdc.Cursor{})
	c := runConsumer(t, pr.dsn, "fo", store, cdc.WithFailover())
	c.awaitConnected(t)
	ctx := pgtest.Ctx(t)
	if err := pr.insert(ctx, seq(1, 10)...); err != nil {
		t.Fatal(err)
	}
	replUntil(t, "rows 1-10 handled", func() bool { return c.has(seq(1, 10)...) })
	next := 10
	pr.awaitSynced(t, "fo", func() int { next++; return next })

	// A writer goes on through the failover, each row its own transaction,
	// through the DSN naming both servers.
	var acked atomic.Int64 // the last id whose commit returned nil
	wctx, stopWriter := context.WithCancel(ctx)
	writer := make(chan struct{})
	go func() {
		defer close(writer)
		tick := time.NewTicker(2 * time.Millisecond) // a rate of writes, not a wait for something
		defer tick.Stop()
		id := 1000
		for wctx.Err() == nil {
			if err := pr.insert(wctx, id); err == nil {
				acked.Store(int64(id))
				id++
			} else if strings.Contains(err.Error(), "duplicate key") { // committed, answer lost
				id++
			}
			select {
			case <-wctx.Done():
			case <-tick.C:
			}
		}
	}()
	defer func() { stopWriter(); <-writer }()
	replUntil(t, "20 writes handled", func() bool { return c.has(seq(1000, 1019)...) })
	if err := pr.primary.Crash(); err != nil {
		t.Fatal(err)
	}
	promoting := time.Now()
	if err := pr.standby.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	promoted := time.Now()
	// 20 writes acknowledged by the promoted standby.
	from := acked.Load()
	replUntil(t, "20 writes acknowledged by the promoted standby", func() bool { return acked.Load() >= from+20 })
	stopWriter()
	<-writer
	survivor := ids(t, pr.standby.DSN())
	replUntil(t, "every row of the survivor handled", func() bool { return c.has(survivor...) })
	c.mu.Lock()
	first2, ok := c.timeline[2]
	last := c.last
	c.mu.Unlock()
	if !ok {
		t.Fatalf("no change handled on timeline 2; last cursor %+v", last)
	}
	t.Logf("rows on the survivor: %d; promotion (pg_promote) took %v; first change on the new primary handled %v after pg_promote began, %v after it returned",
		len(survivor), promoted.Sub(promoting), first2.Sub(promoting), first2.Sub(promoted))
	if err := c.stop(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run() = %v, want context.Canceled", err)
	}
	if last.Timeline != 2 {
		t.Errorf("last cursor %+v, want timeline 2", last)
	}
}

// TestFailoverSlotNotSyncedPG17: a promoted standby without the slot (not
// a failover slot: never synced) is ErrSourceChanged naming the slot, and
// the slot is not created there.
func TestFailoverSlotNotSyncedPG17(t *testing.T) {
	pr := startPair(t, true)
	store := cursor.NewMemory(cdc.Cursor{})
	c := runConsumer(t, pr.dsn, "plain", store)
	c.awaitConnected(t)
	if err := pr.insert(pgtest.Ctx(t), seq(1, 5)...); err != nil {
		t.Fatal(err)
	}
	replUntil(t, "rows 1-5 handled", func() bool { return c.has(seq(1, 5)...) })
	if err := pr.primary.Crash(); err != nil {
		t.Fatal(err)
	}
	if err := pr.standby.Promote(pgtest.Ctx(t)); err != nil {
		t.Fatal(err)
	}
	err := c.result(t)
	if !errors.Is(err, stream.ErrSourceChanged) || !strings.Contains(err.Error(), `slot "plain"`) || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("Run() = %v, want ErrSourceChanged naming slot \"plain\" missing", err)
	}
	if n := count(t, pr.standby.DSN(), "SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'plain'"); n != 0 {
		t.Fatalf("slot plain on the promoted standby: %d, want none (never created there)", n)
	}
}

// TestFailoverStandbyBehindPG17: a promoted standby that stopped before
// changes the consumer handled (its timeline branched before the cursor)
// is ErrSourceChanged naming the timeline, the branch point and the
// cursor, though it holds a synced copy of the slot.
func TestFailoverStandbyBehindPG17(t *testing.T) {
	pr := startPair(t, false)
	store := cursor.NewMemory(cdc.Cursor{})
	c := runConsumer(t, pr.dsn, "behind", store, cdc.WithFailover())
	c.awaitConnected(t)
	ctx := pgtest.Ctx(t)
	if err := pr.insert(ctx, seq(1, 5)...); err != nil {
		t.Fatal(err)
	}
	replUntil(t, "rows 1-5 handled", func() bool { return c.has(seq(1, 5)...) })
	next := 100
	pr.awaitSynced(t, "behind", func() int { next++; return next })
	if err := pr.standby.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := pr.insert(ctx, seq(6, 10)...); err != nil {
		t.Fatal(err)
	}
	replUntil(t, "rows 6-10 handled", func() bool { return c.has(seq(6, 10)...) })
	if err := c.stop(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run() = %v, want context.Canceled", err)
	}
	saved, _ := store.Load(ctx)
	if err := pr.primary.Crash(); err != nil {
		t.Fatal(err)
	}
	if err := pr.standby.Start(); err != nil {
		t.Fatal(err)
	}
	if err := pr.standby.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	if n := count(t, pr.standby.DSN(), "SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'behind'"); n != 1 {
		t.Fatalf("slot behind on the promoted standby: %d, want the synced copy", n)
	}
	c2 := runConsumer(t, pr.dsn, "behind", store, cdc.WithFailover())
	err := c2.result(t)
	for _, want := range []string{`slot "behind"`, "timeline: was 1, now 2", "branched from timeline 1 at", saved.String()} {
		if !errors.Is(err, stream.ErrSourceChanged) || !strings.Contains(err.Error(), want) {
			t.Fatalf("Run() = %v, want ErrSourceChanged with %q", err, want)
		}
	}
	if c2.has(seq(6, 10)...) || len(c2.seen) != 0 {
		t.Fatalf("handled %v on the promoted standby, want nothing", c2.seen)
	}
}

// TestWithFailoverOldServer: WithFailover on a server older than 17 fails
// Open with ErrInvalid naming the version, and creates no slot.
func TestWithFailoverOldServer(t *testing.T) {
	dsn := pgtest.NewDB(t)
	replExec(t, dsn, "CREATE TABLE items (id int PRIMARY KEY)", "CREATE PUBLICATION pub FOR TABLE items")
	if v := count(t, dsn, "SELECT current_setting('server_version_num')::int / 10000"); v >= 17 {
		t.Skipf("the shared server is PostgreSQL %d", v)
	}
	src, err := cdc.NewSource(dsn, "old", "pub", cdc.WithFailover())
	if err != nil {
		t.Fatalf("NewSource() = %v", err)
	}
	_, err = src.Open(pgtest.Ctx(t), cdc.Cursor{})
	if !errors.Is(err, cdc.ErrInvalid) || !errors.Is(err, stream.ErrInvalidOption) || !strings.Contains(err.Error(), "server version 15") {
		t.Fatalf("Open() = %v, want ErrInvalid naming server version 15", err)
	}
	if n := count(t, dsn, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'old'"); n != 0 {
		t.Fatalf("slots named old: %d, want none", n)
	}
}

// TestWithFailoverAltersSlotPG17: WithFailover makes an existing slot a
// failover slot, and creates a new one as one.
func TestWithFailoverAltersSlotPG17(t *testing.T) {
	srv := pgtest.Start(t, pgtest.Options{Version: 17})
	dsn := srv.DSN()
	replExec(t, dsn, "CREATE TABLE items (id int PRIMARY KEY)", "CREATE PUBLICATION pub FOR TABLE items",
		"SELECT pg_create_logical_replication_slot('existing', 'pgoutput')")
	for _, slot := range []string{"existing", "created"} {
		src, err := cdc.NewSource(dsn, slot, "pub", cdc.WithFailover())
		if err != nil {
			t.Fatal(err)
		}
		c, err := src.Open(pgtest.Ctx(t), cdc.Cursor{})
		if err != nil {
			t.Fatalf("Open(%s) = %v", slot, err)
		}
		c.Close()
		awaitInactive(t, dsn, slot)
		if n := count(t, dsn, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1 AND failover", slot); n != 1 {
			t.Errorf("slot %s: failover slots %d, want 1", slot, n)
		}
	}
}

// health polls src.Health until cond holds.
func health(t *testing.T, src *cdc.Source, what string, cond func(cdc.Health) bool) cdc.Health {
	t.Helper()
	var h cdc.Health
	replUntil(t, what, func() bool {
		var err error
		h, err = src.Health(t.Context())
		if err != nil {
			t.Fatalf("Health() = %v", err)
		}
		return cond(h)
	})
	return h
}

// TestHealthPG17: failover readiness turns true once the standby holds a
// synced copy; with the consumer paused and writers on, the commit lag and
// the retained WAL grow; resumed, they fall.
func TestHealthPG17(t *testing.T) {
	pr := startPair(t, true)
	src, err := cdc.NewSource(pr.dsn, "lag", "pub", cdc.WithFailover(), cdc.WithStatusInterval(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	store := cursor.NewMemory(cdc.Cursor{})
	c := runSource(t, src, store)
	c.awaitConnected(t)
	ctx := pgtest.Ctx(t)
	if err := pr.insert(ctx, seq(1, 5)...); err != nil {
		t.Fatal(err)
	}
	replUntil(t, "rows 1-5 handled", func() bool { return c.has(seq(1, 5)...) })
	next := 100
	pr.awaitSynced(t, "lag", func() int { next++; return next })
	ready := health(t, src, "failover ready", func(h cdc.Health) bool { return h.FailoverReady })
	if !ready.Failover || ready.SynchronizedStandbySlots != "sb1" || ready.WALStatus != "reserved" || ready.Invalidation != "" || len(ready.Standbys) != 1 {
		t.Fatalf("Health() = %+v, want a reserved failover slot, synchronized_standby_slots sb1, one synced standby", ready)
	}
	if err := c.stop(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run() = %v, want context.Canceled", err)
	}
	paused, err := src.Health(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Writers on, consumer paused: more WAL kept, an older commit held.
	behind := health(t, src, "the retained WAL to grow", func(h cdc.Health) bool {
		next++
		if err := pr.insert(ctx, seq(next*10000, next*10000+4999)...); err != nil {
			t.Fatal(err)
		}
		return h.RetainedBytes > paused.RetainedBytes+(1<<20)
	})
	if !behind.CommitTime.Equal(paused.CommitTime) || behind.CommitLag <= paused.CommitLag {
		t.Fatalf("paused: commit time %v then %v, lag %v then %v; want the same time, a longer lag", paused.CommitTime, behind.CommitTime, paused.CommitLag, behind.CommitLag)
	}
	last := next*10000 + 4999
	c = runSource(t, src, store)
	replUntil(t, "every row handled", func() bool { return c.has(last) })
	// Writes the publication does not publish move the slot on (the
	// stream's Progress positions).
	caught := health(t, src, "the retained WAL to fall", func(h cdc.Health) bool {
		replExec(t, pr.primary.DSN(), "INSERT INTO other SELECT repeat('x', 100) FROM generate_series(1, 1000)", "SELECT pg_log_standby_snapshot()")
		return h.RetainedBytes < behind.RetainedBytes
	})
	if !caught.CommitTime.After(behind.CommitTime) {
		t.Fatalf("resumed: commit time %v, want after %v", caught.CommitTime, behind.CommitTime)
	}
	t.Logf("retained WAL: %d bytes paused, %d behind, %d caught up; commit lag %v behind, %v caught up",
		paused.RetainedBytes, behind.RetainedBytes, caught.RetainedBytes, behind.CommitLag, caught.CommitLag)
}

// TestHealthSlotLostPG17: a slot pushed to lost by max_slot_wal_keep_size
// is reported by its invalidation reason, as ErrSourceChanged.
func TestHealthSlotLostPG17(t *testing.T) {
	srv := pgtest.Start(t, pgtest.Options{Version: 17, Settings: map[string]string{"max_slot_wal_keep_size": "'1MB'"}})
	dsn := srv.DSN()
	replExec(t, dsn, "CREATE TABLE items (id int PRIMARY KEY)", "CREATE TABLE other (note text)", "CREATE PUBLICATION pub FOR TABLE items",
		"SELECT pg_create_logical_replication_slot('lost', 'pgoutput')")
	src, err := cdc.NewSource(dsn, "lost", "pub")
	if err != nil {
		t.Fatal(err)
	}
	h, err := src.Health(t.Context())
	if err != nil || h.WALStatus != "reserved" || h.SafeWALBytes < 0 || h.Failover || h.FailoverReady {
		t.Fatalf("Health() = %+v, %v; want a reserved slot with a safe size, no failover", h, err)
	}
	replUntil(t, "the slot to be lost", func() bool {
		replExec(t, dsn, "INSERT INTO other VALUES ('x')", "SELECT pg_switch_wal()", "CHECKPOINT")
		h, err = src.Health(t.Context())
		return err != nil
	})
	if !errors.Is(err, stream.ErrSourceChanged) || !strings.Contains(err.Error(), "invalidation_reason wal_removed") || h.Invalidation != "wal_removed" || h.WALStatus != "lost" {
		t.Fatalf("Health() = %+v, %v; want invalidation wal_removed, ErrSourceChanged naming it", h, err)
	}
	if _, err := src.Open(t.Context(), cdc.Cursor{}); !errors.Is(err, stream.ErrSourceChanged) || !strings.Contains(err.Error(), "wal_removed") {
		t.Fatalf("Open() = %v, want ErrSourceChanged naming wal_removed", err)
	}
}

// TestFailoverTransactionalPG17: two relays on failover slots, one with
// Transactional and one with TransactionalBatch, apply every insert into a
// target on a third server, their cursors there too, while the primary
// crashes and its standby is promoted, writers on: every row of the
// survivor is applied exactly once.
func TestFailoverTransactionalPG17(t *testing.T) {
	pr := startPair(t, true)
	type relayRun struct {
		name string
		pool *pgxpool.Pool
		done chan error
	}
	ctx, cancel := context.WithCancel(pgtest.Ctx(t))
	var relays []relayRun
	defer func() {
		cancel()
		for _, r := range relays {
			if err := <-r.done; !errors.Is(err, context.Canceled) {
				t.Errorf("relay %s: Run() = %v, want context.Canceled", r.name, err)
			}
		}
	}()
	connected := make(chan string, 2)
	for _, name := range []string{"tx", "batch"} {
		target := pgtest.NewDB(t) // the shared server: a third one
		replExec(t, target, "CREATE TABLE applied (id int NOT NULL)")
		pool, store := relayStore(t, target)
		src, err := cdc.NewSource(pr.dsn, "fo_"+name, "pub", cdc.WithFailover(), cdc.WithStatusInterval(100*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		opts := []stream.Option{stream.WithBackoff(backoff.Constant(50 * time.Millisecond)),
			stream.WithHooks(stream.Hooks[cdc.Cursor]{OnConnect: func(stream.ConnectEvent[cdc.Cursor]) {
				select {
				case connected <- name:
				default:
				}
			}})}
		if name == "batch" {
			opts = append(opts, stream.WithBatch(16, 5*time.Millisecond), cdc.WithTxBatches())
		}
		r, err := cdc.NewResumer(src, store, opts...)
		if err != nil {
			t.Fatal(err)
		}
		rr := relayRun{name: name, pool: pool, done: make(chan error, 1)}
		if name == "batch" {
			handle := postgres.TransactionalBatch(store, cdc.Extract, func(ctx context.Context, tx pgx.Tx, evs []cdc.Event) error {
				for _, ev := range evs {
					if err := applyInsert(ctx, tx, ev); err != nil {
						return err
					}
				}
				return nil
			})
			go func() { rr.done <- r.RunBatch(ctx, handle) }()
		} else {
			go func() { rr.done <- r.Run(ctx, postgres.Transactional(store, cdc.Extract, applyInsert)) }()
		}
		relays = append(relays, rr)
	}
	for range relays {
		select {
		case <-connected:
		case <-ctx.Done():
			t.Fatal("relays did not connect")
		}
	}
	next := 0
	for _, slot := range []string{"fo_tx", "fo_batch"} {
		pr.awaitSynced(t, slot, func() int { next++; return next })
	}
	var acked atomic.Int64
	acked.Store(int64(next))
	wctx, stopWriter := context.WithCancel(ctx)
	writer := make(chan struct{})
	go func() {
		defer close(writer)
		tick := time.NewTicker(2 * time.Millisecond) // a rate of writes
		defer tick.Stop()
		for id := next + 1; wctx.Err() == nil; {
			// Three rows a transaction, so that batches hold several.
			if err := pr.insert(wctx, id, id+1, id+2); err == nil || strings.Contains(err.Error(), "duplicate key") {
				acked.Store(int64(id + 2))
				id += 3
			}
			select {
			case <-wctx.Done():
			case <-tick.C:
			}
		}
	}()
	defer func() { stopWriter(); <-writer }()
	from := acked.Load()
	replUntil(t, "30 rows written", func() bool { return acked.Load() >= from+30 })
	if err := pr.primary.Crash(); err != nil {
		t.Fatal(err)
	}
	if err := pr.standby.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	from = acked.Load()
	replUntil(t, "30 rows written on the promoted standby", func() bool { return acked.Load() >= from+30 })
	stopWriter()
	<-writer
	survivor := ids(t, pr.standby.DSN())
	for _, r := range relays {
		replUntil(t, r.name+": every row of the survivor applied", func() bool {
			select {
			case err := <-r.done:
				t.Fatalf("relay %s stopped: %v", r.name, err)
			default:
			}
			var rows, distinct, missing int
			err := r.pool.QueryRow(ctx, "SELECT count(*), count(DISTINCT id), cardinality(array(SELECT unnest($1::int[]) EXCEPT SELECT id FROM applied)) FROM applied", survivor).Scan(&rows, &distinct, &missing)
			if err != nil {
				t.Fatal(err)
			}
			if rows != distinct {
				t.Fatalf("relay %s: %d rows applied, %d distinct: a change applied twice", r.name, rows, distinct)
			}
			return missing == 0
		})
		var extra int
		if err := r.pool.QueryRow(ctx, "SELECT count(*) FROM applied WHERE NOT id = ANY($1::int[])", survivor).Scan(&extra); err != nil {
			t.Fatal(err)
		}
		if extra != 0 {
			t.Fatalf("relay %s: %d rows applied that the survivor does not hold", r.name, extra)
		}
	}
	t.Logf("%d rows on the survivor, applied exactly once by both relays", len(survivor))
}

// TestFailoverDuringSnapshotPG17: the primary crashes while the stream's
// first start delivers the existing rows (WithSnapshot), writers on. A
// failover slot's synced copy is only persisted once the primary's slot
// moved past the standby's position, which a snapshot in progress never
// moves: the promoted standby either goes on (every row of the survivor
// delivered) or is refused as a changed source naming the slot — never a
// stream that skips.
func TestFailoverDuringSnapshotPG17(t *testing.T) {
	pr := startPair(t, true)
	replExec(t, pr.primary.DSN(), "INSERT INTO items (id) SELECT g FROM generate_series(1, 3000) g")
	gate := make(chan struct{})
	var once sync.Once
	src, err := cdc.NewSource(pr.dsn, "snap", "pub", cdc.WithFailover(), cdc.WithSnapshot(200), cdc.WithStatusInterval(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	c := runSourceGated(t, src, cursor.NewMemory(cdc.Cursor{}), func(n int) {
		if n == 1000 { // a third of the snapshot: wait for the failover
			<-gate
		}
	})
	defer once.Do(func() { close(gate) })
	replUntil(t, "1000 snapshot rows handled", func() bool { return c.count() >= 1000 })
	next := 10000
	synced := false
	for range 20 {
		if err := pr.insert(t.Context(), next); err != nil {
			t.Fatal(err)
		}
		next++
		replExec(t, pr.primary.DSN(), "SELECT pg_log_standby_snapshot()")
		if count(t, pr.standby.DSN(), "SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'snap' AND synced AND NOT temporary") == 1 {
			synced = true
			break
		}
	}
	t.Logf("synced copy persisted during the snapshot: %t", synced)
	if err := pr.primary.Crash(); err != nil {
		t.Fatal(err)
	}
	if err := pr.standby.Promote(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := pr.insert(t.Context(), next); err != nil {
		t.Fatal(err)
	}
	once.Do(func() { close(gate) })
	survivor := ids(t, pr.standby.DSN())
	ctx := pgtest.Ctx(t)
	for !c.has(survivor...) {
		select {
		case err := <-c.done:
			close(c.done)
			if !errors.Is(err, stream.ErrSourceChanged) || !strings.Contains(err.Error(), `slot "snap"`) {
				t.Fatalf("Run() = %v, want ErrSourceChanged naming slot \"snap\"", err)
			}
			t.Logf("refused: %v", err)
			return
		case <-ctx.Done():
			t.Fatalf("rows of the survivor not all handled: %v", ctx.Err())
		case <-time.After(10 * time.Millisecond): // look again
		}
	}
	if !synced {
		t.Fatalf("every row handled though the synced copy was temporary")
	}
}
