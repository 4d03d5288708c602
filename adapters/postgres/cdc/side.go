package cdc

import (
	"context"

	"github.com/jackc/pgx/v5/pgconn"
)

// sideDial is the plain connection of a snapshot or backfill, made while
// the replication connection starts rather than after it: a restarted
// process resuming a snapshot reads its first chunk a connection's setup
// sooner.
type sideDial struct {
	done chan struct{}
	pg   *pgconn.PgConn // nil once taken, or when the connection failed
	err  error
}

// dialSide starts connecting a side connection when the connection about
// to start may read a snapshot or backfill: on the first Open of a Source
// made WithSnapshot (a restarted process may resume one), after a cursor
// inside one, or with backfills asked for. It returns nil otherwise, and
// while the Source waits as a standby (it would dial at every look).
func (s *Source) dialSide(ctx context.Context) *sideDial {
	if s.standby || !(s.snapshot && !s.opened) && s.held().Snapshot == "" && s.pending.Load() == 0 {
		return nil
	}
	d := &sideDial{done: make(chan struct{})}
	go func() {
		defer close(d.done)
		d.pg, d.err = pgconn.ConnectConfig(ctx, s.queryConfig())
	}()
	return d
}

// take waits for the connection and returns it; nil when d is nil or the
// connection failed (the caller connects itself, and meets the failure).
func (d *sideDial) take() *pgconn.PgConn {
	if d == nil {
		return nil
	}
	<-d.done
	pg := d.pg
	d.pg = nil
	return pg
}

// close waits for the connection and closes it unless it was taken.
func (d *sideDial) close(ctx context.Context) {
	if pg := d.take(); pg != nil {
		closeQuietly(ctx, pg)
	}
}

// sideConn returns the side connection d made, or a new one.
func (s *Source) sideConn(ctx context.Context, d *sideDial) (*pgconn.PgConn, error) {
	if pg := d.take(); pg != nil {
		return pg, nil
	}
	return pgconn.ConnectConfig(ctx, s.queryConfig())
}
