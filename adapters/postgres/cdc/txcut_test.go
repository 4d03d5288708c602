package cdc_test

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/resumable-go/resumable/adapters/postgres"
	"github.com/resumable-go/resumable/adapters/postgres/cdc"
	"github.com/resumable-go/resumable/backoff"
	"github.com/resumable-go/resumable/internal/testkit/pgtest"
	"github.com/resumable-go/resumable/stream"
)

// countingSource wraps a cdc.Source: it observes the target at every Open
// after the first, and counts per connection the inserts Recv returned and
// how the connection ended.
type countingSource struct {
	src     *cdc.Source
	observe func(opens int)
	mu      sync.Mutex
	opens   int
	seen    []int   // inserts Recv returned, per connection
	ends    []error // the error that ended each connection
}

func (s *countingSource) Open(ctx context.Context, after cdc.Cursor) (stream.Conn[cdc.Event], error) {
	s.mu.Lock()
	s.opens++
	opens := s.opens
	s.mu.Unlock()
	s.observe(opens)
	c, err := s.src.Open(ctx, after)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.seen, s.ends = append(s.seen, 0), append(s.ends, nil)
	i := len(s.seen) - 1
	s.mu.Unlock()
	return &countingConn{Conn: c, s: s, i: i}, nil
}

type countingConn struct {
	stream.Conn[cdc.Event]
	s *countingSource
	i int
}

func (c *countingConn) Recv(ctx context.Context) (cdc.Event, error) {
	ev, err := c.Conn.Recv(ctx)
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	switch {
	case err != nil && c.s.ends[c.i] == nil:
		c.s.ends[c.i] = err
	case err == nil && ev.Op == cdc.Insert:
		c.s.seen[c.i]++
	}
	return ev, err
}

// Defect 4 of issue 42, end to end: the replication connection is cut
// (twice, at different bytes) while a 600-change source transaction
// arrives, batches up to 1,000 under WithTxBatches, each applied by
// TransactionalBatch. The target never holds part of the transaction: none
// of it before each reopen, and all 600, exactly once, at the end.
func TestTxBatchesCutMidTransaction(t *testing.T) {
	dsn := pgtest.NewDB(t)
	slot := replSetup(t, dsn)
	const size = 600
	replExec(t, dsn, "CREATE TABLE target (id int NOT NULL)") // no key: a duplicate would show
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	// The tx is about 32 KB on the wire: the cuts fall after about 120 and
	// 360 of its changes.
	p := pgtest.NewProxy(t, u.Host)
	p.CutAfter("START_REPLICATION", 7000, 20000)
	src, err := cdc.NewSource(p.DSN(dsn, u.Host), slot, "pub")
	if err != nil {
		t.Fatal(err)
	}
	pool, store := relayStore(t, dsn)
	ctx := pgtest.Ctx(t)
	target := func() (rows, distinct int) {
		if err := pool.QueryRow(ctx, "SELECT count(*), count(DISTINCT id) FROM target").Scan(&rows, &distinct); err != nil {
			t.Error(err)
		}
		return rows, distinct
	}
	opened := make(chan struct{})
	cs := &countingSource{src: src, observe: func(opens int) {
		if opens == 1 {
			return
		}
		if rows, _ := target(); rows != 0 && rows != size {
			t.Errorf("at open %d the target holds %d rows of the %d-change transaction", opens, rows, size)
		}
	}}
	first := sync.OnceFunc(func() { close(opened) })
	r, err := stream.New[cdc.Event, cdc.Cursor](openedSource{cs, first}, cdc.Extract, src.Confirming(store),
		stream.WithCursorOrder(cdc.Compare), stream.WithBatch(1000, 0), cdc.WithTxBatches(),
		stream.WithBackoff(backoff.Constant(20*time.Millisecond)))
	if err != nil {
		t.Fatal(err)
	}
	var batches []int
	handle := postgres.TransactionalBatch(store, cdc.Extract, func(ctx context.Context, tx pgx.Tx, evs []cdc.Event) error {
		batches = append(batches, len(evs))
		if rows, _ := target(); rows != 0 {
			t.Errorf("a batch of %d arrives with %d rows in the target", len(evs), rows)
		}
		rows := make([][]any, len(evs))
		for i, ev := range evs {
			v, err := ev.New.Value(0)
			if err != nil {
				return err
			}
			rows[i] = []any{v}
		}
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"target"}, []string{"id"}, pgx.CopyFromRows(rows)); err != nil {
			return err
		}
		if rows, _ := target(); rows != 0 && rows != size {
			t.Errorf("the target holds %d rows of %d while a batch is applied", rows, size)
		}
		if len(evs) == size {
			return stream.ErrStop
		}
		return nil
	})
	done := make(chan error, 1)
	go func() { done <- r.RunBatch(ctx, handle) }()
	select {
	case <-opened:
	case err := <-done:
		t.Fatalf("RunBatch() = %v before the first open", err)
	}
	sql := []string{"BEGIN"}
	for i := range size {
		sql = append(sql, fmt.Sprintf("INSERT INTO items (id, v) VALUES (%d, 0)", i+1))
	}
	replExec(t, dsn, append(sql, "COMMIT")...)
	if err := <-done; err != nil {
		t.Fatalf("RunBatch() = %v", err)
	}

	if got := p.CutsAfter(); got != 2 {
		t.Fatalf("the proxy cut %d connections, want 2", got)
	}
	cs.mu.Lock()
	for i := range 2 { // each cut fell inside the transaction
		if cs.seen[i] == 0 || cs.seen[i] >= size || cs.ends[i] == nil || cs.ends[i] == io.EOF {
			t.Errorf("connection %d read %d of %d changes and ended with %v: want a part, then a failure", i+1, cs.seen[i], size, cs.ends[i])
		}
	}
	t.Logf("changes read before each cut: %v; batches handed over: %v", cs.seen, batches)
	cs.mu.Unlock()
	if rows, distinct := target(); rows != size || distinct != size {
		t.Errorf("the target holds %d rows, %d distinct, want %d of each", rows, distinct, size)
	}
	if len(batches) != 1 || batches[0] != size {
		t.Errorf("batches %v, want one of %d", batches, size)
	}
}

// openedSource calls opened after every successful Open.
type openedSource struct {
	*countingSource
	opened func()
}

func (s openedSource) Open(ctx context.Context, after cdc.Cursor) (stream.Conn[cdc.Event], error) {
	c, err := s.countingSource.Open(ctx, after)
	if err == nil {
		s.opened()
	}
	return c, err
}
