package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	"github.com/resumable-go/resumable/internal/testkit/pgtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(pgtest.Main(m)) }

// output is what the example printed, safe for concurrent use.
type output struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (o *output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.Write(p)
}

func (o *output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

// printed reports whether a handled line was printed for each of ids.
func (o *output) printed(ids ...int) bool {
	s := o.String()
	for _, id := range ids {
		if !strings.Contains(s, fmt.Sprintf("handled public.items INSERT %d ", id)) {
			return false
		}
	}
	return true
}

// pair is a PostgreSQL 17 primary, its standby, and the DSN naming both.
type pair struct {
	primary, standby *pgtest.Server
	dsn              string
}

// startPair starts a pair; with waitFor, the primary's synchronized_standby_slots
// names the standby.
func startPair(t *testing.T, waitFor bool) *pair {
	t.Helper()
	p := pgtest.Start(t, pgtest.Options{Version: 17})
	if err := p.Exec(t.Context(), "CREATE TABLE items (id int PRIMARY KEY)", "CREATE PUBLICATION pub FOR TABLE items"); err != nil {
		t.Fatal(err)
	}
	sb := p.Standby(t, "sb1", nil)
	if waitFor {
		if err := p.Exec(t.Context(), "ALTER SYSTEM SET synchronized_standby_slots = 'sb1'", "SELECT pg_reload_conf()"); err != nil {
			t.Fatal(err)
		}
	}
	return &pair{primary: p, standby: sb,
		dsn: fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/postgres?sslmode=disable&target_session_attrs=read-write", p.Port(), sb.Port())}
}

func (pr *pair) insert(ctx context.Context, ids ...int) error {
	conn, err := pgx.Connect(ctx, pr.dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, "INSERT INTO items (id) SELECT unnest($1::int[])", ids)
	return err
}

func scalar[V any](t *testing.T, dsn, sql string, args ...any) V {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var v V
	if err := conn.QueryRow(t.Context(), sql, args...).Scan(&v); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return v
}

// until polls cond until it holds, failing t after pgtest.Deadline.
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), pgtest.Deadline)
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		case <-tick.C:
		}
	}
}

// start runs the example with args in the background; its result comes
// on the channel returned.
func start(ctx context.Context, out *output, args ...string) <-chan error {
	done := make(chan error, 1)
	go func() { done <- run(ctx, out, &output{}, args) }()
	return done
}

// TestFailoverFollowsPromotion: with -failover and a DSN naming both
// servers, every row committed on the promoted standby is printed, writes
// going on through the failover.
func TestFailoverFollowsPromotion(t *testing.T) {
	pr := startPair(t, true)
	state := filepath.Join(t.TempDir(), "state")
	out := &output{}
	ctx, cancel := context.WithCancel(t.Context())
	done := start(ctx, out, "-dsn", pr.dsn, "-slot", "fo", "-publication", "pub", "-state", state, "-failover")
	defer func() {
		cancel()
		if done != nil {
			<-done
		}
	}()
	until(t, "slot fo", func() bool { return slotReady(t, pr.primary.DSN(), "fo") })
	id := 0
	until(t, "slot fo synced on the standby", func() bool {
		id++
		if err := pr.insert(t.Context(), id); err != nil {
			t.Fatal(err)
		}
		if err := pr.primary.Exec(t.Context(), "SELECT pg_log_standby_snapshot()"); err != nil {
			t.Fatal(err)
		}
		return scalar[int64](t, pr.standby.DSN(), "SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'fo' AND synced AND NOT temporary") == 1
	})
	until(t, "the first rows printed", func() bool { return out.printed(1, id) })
	// Writers on: a row a transaction, before, during and after.
	wctx, stopWriter := context.WithCancel(t.Context())
	writer := make(chan struct{})
	var mu sync.Mutex
	acked := id
	go func() {
		defer close(writer)
		tick := time.NewTicker(5 * time.Millisecond) // a rate of writes
		defer tick.Stop()
		for n := id + 1; wctx.Err() == nil; {
			if err := pr.insert(wctx, n); err == nil || strings.Contains(err.Error(), "duplicate key") {
				mu.Lock()
				acked = n
				mu.Unlock()
				n++
			}
			select {
			case <-wctx.Done():
			case <-tick.C:
			}
		}
	}()
	defer func() { stopWriter(); <-writer }()
	last := func() int { mu.Lock(); defer mu.Unlock(); return acked }
	until(t, "10 more rows written", func() bool { return last() >= id+10 })
	if err := pr.primary.Crash(); err != nil {
		t.Fatal(err)
	}
	promoting := time.Now()
	if err := pr.standby.Promote(t.Context()); err != nil {
		t.Fatal(err)
	}
	from := last()
	until(t, "10 rows written on the promoted standby", func() bool { return last() >= from+10 })
	stopWriter()
	<-writer
	conn, err := pgx.Connect(t.Context(), pr.standby.DSN())
	if err != nil {
		t.Fatal(err)
	}
	rows, _ := conn.Query(t.Context(), "SELECT id FROM items ORDER BY id")
	survivor, err := pgx.CollectRows(rows, pgx.RowTo[int])
	conn.Close(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	until(t, "every row of the promoted standby printed", func() bool { return out.printed(survivor...) })
	t.Logf("%d rows on the promoted standby, all printed %v after pg_promote began", len(survivor), time.Since(promoting))
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run() = %v, want nil on its context's end", err)
	}
	done = nil
}

// TestFailoverSlotNotSynced: a promoted standby that did not sync the slot
// (not a failover slot) stops the example with an error naming the slot,
// and the slot is not created there.
func TestFailoverSlotNotSynced(t *testing.T) {
	pr := startPair(t, true)
	state := filepath.Join(t.TempDir(), "state")
	out := &output{}
	done := start(t.Context(), out, "-dsn", pr.dsn, "-slot", "plain", "-publication", "pub", "-state", state)
	until(t, "slot plain", func() bool { return slotReady(t, pr.primary.DSN(), "plain") })
	if err := pr.insert(t.Context(), 1, 2, 3); err != nil {
		t.Fatal(err)
	}
	until(t, "rows printed", func() bool { return out.printed(1, 2, 3) })
	if err := pr.primary.Crash(); err != nil {
		t.Fatal(err)
	}
	if err := pr.standby.Promote(t.Context()); err != nil {
		t.Fatal(err)
	}
	var err error
	select {
	case err = <-done:
	case <-time.After(pgtest.Deadline):
		t.Fatalf("run() did not return within %v", pgtest.Deadline)
	}
	if err == nil || !strings.Contains(err.Error(), `slot "plain"`) || errors.Is(err, context.Canceled) {
		t.Fatalf("run() = %v, want an error naming slot \"plain\"", err)
	}
	if n := scalar[int64](t, pr.standby.DSN(), "SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'plain'"); n != 0 {
		t.Fatalf("slot plain on the promoted standby: %d, want none", n)
	}
}

// slotReady reports whether the server at dsn holds the logical slot name
// and its creation found the consistent point (confirmed_flush_lsn set):
// the slot is listed from the start of its creation, and a row committed
// before that point is never decoded.
func slotReady(t *testing.T, dsn, name string) bool {
	t.Helper()
	return scalar[int64](t, dsn, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1 AND confirmed_flush_lsn IS NOT NULL", name) == 1
}

// awaitSynced waits until the standby holds a persistent synced copy of
// slot, inserting a row (ids from next on) at each look so that it moves;
// it returns the next id.
func (pr *pair) awaitSynced(t *testing.T, slot string, next int) int {
	t.Helper()
	until(t, "slot "+slot+" synced on the standby", func() bool {
		if err := pr.insert(t.Context(), next); err != nil {
			t.Fatal(err)
		}
		next++
		if err := pr.primary.Exec(t.Context(), "SELECT pg_log_standby_snapshot()"); err != nil {
			t.Fatal(err)
		}
		return scalar[int64](t, pr.standby.DSN(), "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1 AND synced AND NOT temporary", slot) == 1
	})
	return next
}

// TestFailoverStandbyBehind: a promoted standby that stopped before rows
// the example printed (though it holds a synced copy of the slot) stops
// the running example with an error naming the timeline and the branch
// point, and nothing more is printed.
func TestFailoverStandbyBehind(t *testing.T) {
	pr := startPair(t, false)
	state := filepath.Join(t.TempDir(), "state")
	out := &output{}
	done := start(t.Context(), out, "-dsn", pr.dsn, "-slot", "behind", "-publication", "pub", "-state", state, "-failover")
	until(t, "slot behind", func() bool { return slotReady(t, pr.primary.DSN(), "behind") })
	next := pr.awaitSynced(t, "behind", 1)
	if err := pr.standby.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := pr.insert(t.Context(), next, next+1, next+2); err != nil {
		t.Fatal(err)
	}
	until(t, "the rows the standby lacks printed", func() bool { return out.printed(next, next+1, next+2) })
	if err := pr.primary.Crash(); err != nil {
		t.Fatal(err)
	}
	printed := out.String()
	if err := pr.standby.Start(); err != nil {
		t.Fatal(err)
	}
	promoting := time.Now()
	if err := pr.standby.Promote(t.Context()); err != nil {
		t.Fatal(err)
	}
	var err error
	select {
	case err = <-done:
	case <-time.After(pgtest.Deadline):
		t.Fatalf("run() did not return within %v", pgtest.Deadline)
	}
	t.Logf("run() returned %v after pg_promote began: %v", time.Since(promoting), err)
	for _, want := range []string{`slot "behind"`, "timeline: was 1, now 2", "branched from timeline 1 at"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("run() = %v, want an error containing %q", err, want)
		}
	}
	if got := out.String(); got != printed {
		t.Fatalf("printed after the crash: %q", strings.TrimPrefix(got, printed))
	}
}
