package cdc

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/resumable-go/resumable/stream"
)

// defaultResyncPage is the number of rows a resync fetches at a time
// unless told otherwise.
const defaultResyncPage = 1000

// Resync returns the [stream.ResyncFunc] of a stream of src, to install
// with stream.WithResync when the stream should rebuild its state rather
// than stop after [stream.ErrSourceChanged] (a recreated slot, a replaced
// or restored server). It is not installed by [NewResumer]: it drops the
// stream's slot.
//
// It drops the slot if it exists (waiting for a consumer still using it
// to let it go), creates it again, and in the same transaction, at the
// snapshot of the slot's start, reads every table the publication
// publishes, pageSize rows at a time (1000 when pageSize ≤ 0), delivering
// a [ResyncStart], a [Snapshot] event per row (as pgoutput would send it:
// the publication's columns and row filter, no generated column, typed,
// its key marked) and a [ResyncEnd]. The stream
// then goes on from the slot's start. Rows deleted in the gap are not
// replayed: drop what the replay lacks. Nothing is held beyond one page.
// The ResyncStart and Snapshot events carry a cursor (Index -2) that a
// stream does not resume from: a replay interrupted after a handler
// committed such a cursor (postgres.Transactional) is done again from its
// start. The publication's name is folded to lower case, as the server
// folds the unquoted name.
func Resync(src *Source, pageSize int) stream.ResyncFunc[Event, Cursor] {
	if pageSize <= 0 {
		pageSize = defaultResyncPage
	}
	return func(ctx context.Context, _ error, emit func(Event) error) (Cursor, error) {
		pg, err := pgconn.ConnectConfig(ctx, src.cfg)
		if err != nil {
			return Cursor{}, classify(fmt.Errorf("cdc: resync: connecting: %w", err))
		}
		defer func() {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
			defer cancel()
			_ = pg.Close(cctx)
		}()
		c, err := src.resync(ctx, pg, pageSize, emit)
		if err != nil {
			return Cursor{}, classify(err)
		}
		return c, nil
	}
}

// resync recreates the slot and replays the published tables at its start.
func (s *Source) resync(ctx context.Context, pg *pgconn.PgConn, pageSize int, emit func(Event) error) (Cursor, error) {
	sys, err := pglogrepl.IdentifySystem(ctx, pg)
	if err != nil {
		return Cursor{}, fmt.Errorf("cdc: resync: IDENTIFY_SYSTEM: %w", err)
	}
	st, found, err := s.slotState(ctx, pg)
	if err != nil {
		return Cursor{}, err
	}
	if found {
		if err := st.usable(s.slot, sys.DBName); err != nil {
			return Cursor{}, err // not a slot of ours to drop
		}
		if err := pglogrepl.DropReplicationSlot(ctx, pg, s.slot, pglogrepl.DropReplicationSlotOptions{Wait: true}); err != nil {
			return Cursor{}, fmt.Errorf("cdc: resync: dropping slot %q: %w", s.slot, err)
		}
	}
	if err := execAll(ctx, pg, "BEGIN READ ONLY ISOLATION LEVEL REPEATABLE READ"); err != nil {
		return Cursor{}, err
	}
	at, err := s.createUsing(ctx, pg)
	if err != nil {
		return Cursor{}, err
	}
	cur := Cursor{LSN: at, Index: -1, System: sys.SystemID, Timeline: sys.Timeline, Slot: s.slot}
	// The replay's events carry a cursor a stream cannot resume from: a
	// handler that commits it (postgres.Transactional) and then crashes
	// resyncs again from the start, not after the replay's first rows.
	inReplay := cur
	inReplay.Index = replayIndex
	if err := emit(Event{Op: ResyncStart, LSN: at, Index: -1, Cursor: inReplay}); err != nil {
		return Cursor{}, err
	}
	tables, err := s.publishedTables(ctx, pg)
	if err != nil {
		return Cursor{}, fmt.Errorf("cdc: resync: %w", err)
	}
	for _, t := range tables {
		if err := s.replayTable(ctx, pg, t, pageSize, func(ev Event) error {
			ev.LSN, ev.Index, ev.Cursor = at, -1, inReplay
			return emit(ev)
		}); err != nil {
			return Cursor{}, err
		}
	}
	if err := execAll(ctx, pg, "COMMIT"); err != nil {
		return Cursor{}, err
	}
	if err := emit(Event{Op: ResyncEnd, LSN: at, Index: -1, Cursor: cur}); err != nil {
		return Cursor{}, err
	}
	return cur, nil
}

// replayTable emits a Snapshot event per row of table t as the
// publication publishes it (see published), read by one COPY and handed
// over pageSize rows at a time.
func (s *Source) replayTable(ctx context.Context, pg *pgconn.PgConn, t tableName, pageSize int, emit func(Event) error) error {
	tab, err := s.published(ctx, pg, t)
	if err != nil {
		return fmt.Errorf("cdc: resync: %w", err)
	}
	if err := startCopy(pg, "COPY ("+tab.selectRows()+") TO STDOUT"); err != nil {
		return fmt.Errorf("cdc: resync: reading %s: %w", t, err)
	}
	var b copyBatch
	for eof := false; !eof; {
		rows, end, err := b.read(ctx, pg, len(tab.cols), pageSize)
		if err != nil {
			return fmt.Errorf("cdc: resync: reading %s: %w", t, err)
		}
		eof = end
		for i := range len(b.starts) - 1 {
			row := rows[b.starts[i]:b.starts[i+1]:b.starts[i+1]]
			if err := emit(Event{Op: Snapshot, Relation: tab.rel.name, New: Tuple{rel: tab.rel, packed: row}}); err != nil {
				return err // the COPY is left unread: the connection is closed
			}
		}
	}
	return nil
}

// execAll runs each statement on pg.
func execAll(ctx context.Context, pg *pgconn.PgConn, sql ...string) error {
	for _, q := range sql {
		if _, err := pg.Exec(ctx, q).ReadAll(); err != nil {
			return fmt.Errorf("cdc: resync: %s: %w", q, err)
		}
	}
	return nil
}

// quoteIdent quotes an SQL identifier.
func quoteIdent(s string) string {
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}

// createUsing creates the stream's slot inside pg's transaction, which
// takes the slot's snapshot (SNAPSHOT 'use'), and returns its consistent
// point.
func (s *Source) createUsing(ctx context.Context, pg *pgconn.PgConn) (pglogrepl.LSN, error) {
	if s.failover {
		at, _, err := s.createFailoverSlot(ctx, pg, "use")
		return at, err
	}
	res, err := pglogrepl.CreateReplicationSlot(ctx, pg, s.slot, "pgoutput",
		pglogrepl.CreateReplicationSlotOptions{Mode: pglogrepl.LogicalReplication, SnapshotAction: "USE_SNAPSHOT"})
	if err != nil {
		return 0, fmt.Errorf("cdc: resync: creating slot %q: %w", s.slot, err)
	}
	at, err := pglogrepl.ParseLSN(res.ConsistentPoint)
	if err != nil {
		return 0, fmt.Errorf("cdc: resync: slot %q: %w", s.slot, err)
	}
	return at, nil
}
