package cdc

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/resumable-go/resumable/errclass"
	"github.com/resumable-go/resumable/stream"
)

// WithFailover makes the stream's slot a failover slot (PostgreSQL 17): it
// is created with FAILOVER (an existing slot is altered to it), so that a
// physical standby with sync_replication_slots = on keeps a synced copy,
// and the stream goes on from its cursor on the standby once promoted
// (give NewSource a DSN naming both servers, with
// target_session_attrs=read-write: NewSource refuses several hosts without
// it). On an older server Open fails with an error matching [ErrInvalid]
// naming the version.
func WithFailover() SourceOption {
	return sourceOption(func(s *Source) { s.failover = true })
}

// majorVersion returns the major version of a server_version parameter
// ("17.10", "15.18 (Debian 15.18-0+deb12u1)"); 0 when it does not parse.
func majorVersion(version string) int {
	major, _, _ := strings.Cut(version, ".")
	major, _, _ = strings.Cut(major, " ")
	n, err := strconv.Atoi(major)
	if err != nil {
		return 0
	}
	return n
}

// checkVersion refuses WithFailover on a server older than 17.
func (s *Source) checkVersion(pg *pgconn.PgConn) error {
	if v := pg.ParameterStatus("server_version"); s.failover && majorVersion(v) < 17 {
		return errclass.Permanent(fmt.Errorf("cdc: WithFailover: server version %s: failover slots need PostgreSQL 17: %w", v, ErrInvalid))
	}
	return nil
}

// createFailoverSlot creates the stream's slot as a failover slot, with
// snapshot ('export' or 'nothing'), and returns its consistent point and
// exported snapshot's name (pglogrepl's CreateReplicationSlot has no
// FAILOVER option).
func (s *Source) createFailoverSlot(ctx context.Context, pg *pgconn.PgConn, snapshot string) (at pglogrepl.LSN, name string, err error) {
	// The slot's name was checked by NewSource: it needs no quoting.
	res, err := pg.Exec(ctx, "CREATE_REPLICATION_SLOT "+s.slot+" LOGICAL pgoutput (SNAPSHOT '"+snapshot+"', FAILOVER true)").ReadAll()
	if err != nil {
		return 0, "", fmt.Errorf("cdc: creating failover slot %q: %w", s.slot, err)
	}
	if len(res) != 1 || len(res[0].Rows) != 1 || len(res[0].Rows[0]) < 3 {
		return 0, "", fmt.Errorf("cdc: creating failover slot %q: unexpected answer", s.slot)
	}
	row := res[0].Rows[0]
	if at, err = pglogrepl.ParseLSN(string(row[1])); err != nil {
		return 0, "", fmt.Errorf("cdc: creating failover slot %q: %w", s.slot, err)
	}
	return at, string(row[2]), nil
}

// alterFailover makes an existing slot a failover slot.
func (s *Source) alterFailover(ctx context.Context, pg *pgconn.PgConn) error {
	if _, err := pg.Exec(ctx, "ALTER_REPLICATION_SLOT "+s.slot+" (FAILOVER true)").ReadAll(); err != nil {
		return fmt.Errorf("cdc: making slot %q a failover slot: %w", s.slot, err)
	}
	return nil
}

// history maps each ancestor of a server's timeline to the position where
// the server's history left it (TIMELINE_HISTORY's switch points).
type history map[int32]pglogrepl.LSN

// timelineHistory reads the history of the server's timeline tli; nil for
// timeline 1, which has none.
func timelineHistory(ctx context.Context, pg *pgconn.PgConn, tli int32) (history, error) {
	if tli <= 1 {
		return nil, nil
	}
	res, err := pglogrepl.TimelineHistory(ctx, pg, tli)
	if err != nil {
		return nil, fmt.Errorf("cdc: TIMELINE_HISTORY %d: %w", tli, err)
	}
	return parseHistory(res.Content)
}

// parseHistory parses a timeline history file: a line per ancestor,
// "timeline<TAB>switch point<TAB>reason"; blank lines and comments (#) are
// skipped.
func parseHistory(content []byte) (history, error) {
	h := history{}
	sc := bufio.NewScanner(bytes.NewReader(content))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 2 {
			return nil, fmt.Errorf("cdc: timeline history line %q", line)
		}
		tli, err := strconv.ParseInt(f[0], 10, 32)
		if err != nil {
			return nil, fmt.Errorf("cdc: timeline history line %q: %w", line, err)
		}
		at, err := pglogrepl.ParseLSN(f[1])
		if err != nil {
			return nil, fmt.Errorf("cdc: timeline history line %q: %w", line, err)
		}
		h[int32(tli)] = at
	}
	return h, sc.Err()
}

// covers reports whether the history keeps what cursor c covers, read on
// timeline c.Timeline: the timeline branched at or after it. A change's
// cursor covers its commit record, which begins at c.LSN: the branch point
// must lie beyond it. A position with nothing in flight (Index -1) covers
// the WAL before c.LSN only.
func (h history) covers(c Cursor) (at pglogrepl.LSN, ok bool) {
	at, ok = h[c.Timeline]
	if !ok {
		return 0, false
	}
	if c.Index < 0 {
		return at, at >= c.LSN
	}
	return at, at > c.LSN
}

// checkTimeline reports, with stream.ErrSourceChanged, a cursor read on
// another timeline that the server's history does not keep.
func (id identity) checkTimeline(after Cursor) error {
	if after.Timeline > id.timeline {
		return fmt.Errorf("cdc: slot %q: timeline: was %d, now %d, older (cursor %v): %w", id.slot, after.Timeline, id.timeline, after, stream.ErrSourceChanged)
	}
	at, ok := id.history.covers(after)
	switch {
	case at == 0 && !ok:
		return fmt.Errorf("cdc: slot %q: timeline: was %d, now %d, whose history does not branch from timeline %d (cursor %v): %w",
			id.slot, after.Timeline, id.timeline, after.Timeline, after, stream.ErrSourceChanged)
	case !ok:
		return fmt.Errorf("cdc: slot %q: timeline: was %d, now %d, which branched from timeline %d at %v, before the cursor %v: what the consumer handled after it is not on this server: %w",
			id.slot, after.Timeline, id.timeline, after.Timeline, at, after, stream.ErrSourceChanged)
	}
	return nil
}
