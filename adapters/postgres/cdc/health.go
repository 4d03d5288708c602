package cdc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
)

// Health is what [Source.Health] read of a stream's slot and servers: the
// numbers to alert on (docs/postgres.md lists the alerts).
type Health struct {
	// CommitTime is the commit time of the transaction of the last change
	// the Store holds, or the time a position with nothing in flight was
	// saved (the stream had caught up then); zero before the first save.
	CommitTime time.Time
	// CommitLag is how long before the read CommitTime was: how far behind
	// its server the stream's Store is. Zero when CommitTime is.
	CommitLag time.Duration
	// RetainedBytes is the WAL the primary keeps for the slot
	// (pg_current_wal_lsn() − restart_lsn).
	RetainedBytes int64
	// WALStatus is the slot's wal_status: reserved, extended, unreserved
	// or lost.
	WALStatus string
	// SafeWALBytes is how much more WAL may be written before the slot is
	// at risk of being lost (safe_wal_size); -1 when max_slot_wal_keep_size
	// sets no limit.
	SafeWALBytes int64
	// Invalidation is the slot's invalidation reason (PostgreSQL 17's
	// invalidation_reason, or "lost" / "conflicting" before); empty when
	// the slot is usable.
	Invalidation string
	// Failover reports a failover slot (PostgreSQL 17).
	Failover bool
	// SynchronizedStandbySlots is the primary's synchronized_standby_slots:
	// the standbys a failover slot's changes wait for.
	SynchronizedStandbySlots string
	// Standbys maps each standby the DSN names (host:port) to the state of
	// its copy of the slot: "synced" (ready to take over), "temporary"
	// (not yet persisted: dropped at promotion), "missing", "invalidated:
	// REASON", or "unreachable: ERROR".
	Standbys map[string]string
	// FailoverReady reports a failover slot that every standby the DSN
	// names holds synced, with synchronized_standby_slots set on the
	// primary: a promotion of any of them goes on from the cursor.
	FailoverReady bool
	// SnapshotWaitTable is the table whose snapshot chunk waits for its
	// watermark: its rows go once the stream has read the changes before
	// it. Empty when none waits.
	SnapshotWaitTable string
	// SnapshotWaitBytes is the WAL between the last message the stream
	// read and that chunk's watermark: what it reads before the rows go.
	SnapshotWaitBytes int64
}

// Health connects to each server the DSN names (plain connections, not
// replication ones), reads the slot on the primary and its synced copy on
// each standby, and returns what it found. The commit lag is that of the
// cursors saved through the Store [Source.Confirming] wrapped. Call it as
// often as the metrics are read; it is safe for concurrent use with the
// stream.
//
// A slot the primary invalidated is reported, and Health returns with it
// an error matching [stream.ErrSourceChanged] naming the reason (the next
// Open fails with it). A missing slot, or no primary among the servers, is
// an error.
func (s *Source) Health(ctx context.Context) (Health, error) {
	h := Health{SafeWALBytes: -1, Standbys: map[string]string{}}
	s.mu.Lock()
	h.CommitTime = s.committedAt
	s.mu.Unlock()
	if w := s.waiting.Load(); w != nil {
		h.SnapshotWaitTable = w.table
		h.SnapshotWaitBytes = max(0, int64(w.mark)-int64(s.waitRead.Load()))
	}
	if !h.CommitTime.IsZero() {
		h.CommitLag = max(0, time.Since(h.CommitTime))
	}
	var primary bool
	var errs []error
	for _, cfg := range s.plainConfigs() {
		addr := net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
		isPrimary, state, err := s.look(ctx, cfg, &h)
		switch {
		case err != nil && isPrimary:
			return h, err
		case err != nil:
			h.Standbys[addr] = "unreachable: " + err.Error()
			errs = append(errs, err)
		case isPrimary:
			primary = true
		default:
			h.Standbys[addr] = state
		}
	}
	if !primary {
		return h, fmt.Errorf("cdc: health of slot %q: no primary among the servers: %w", s.slot, errors.Join(errs...))
	}
	h.FailoverReady = h.Failover && h.SynchronizedStandbySlots != "" && len(h.Standbys) > 0
	for _, state := range h.Standbys {
		h.FailoverReady = h.FailoverReady && state == "synced"
	}
	if h.Invalidation != "" {
		st := slotState{invalidation: h.Invalidation}
		return h, st.valid(s.slot, Cursor{})
	}
	return h, nil
}

// plainConfigs returns a plain connection's configuration for each server
// the DSN names, without the check of target_session_attrs.
func (s *Source) plainConfigs() []*pgconn.Config {
	base := s.queryConfig()
	base.ValidateConnect = nil
	hosts := []*pgconn.FallbackConfig{{Host: base.Host, Port: base.Port, TLSConfig: base.TLSConfig}}
	hosts = append(hosts, base.Fallbacks...)
	var out []*pgconn.Config
	seen := map[string]bool{}
	for _, fb := range hosts {
		key := fb.Host + ":" + strconv.Itoa(int(fb.Port))
		if seen[key] {
			continue // one entry per TLS mode
		}
		seen[key] = true
		cfg := base.Copy()
		cfg.Host, cfg.Port, cfg.TLSConfig, cfg.Fallbacks = fb.Host, fb.Port, fb.TLSConfig, nil
		out = append(out, cfg)
	}
	return out
}

// look reads one server: on the primary, the slot into h; on a standby,
// the state of its copy of the slot.
func (s *Source) look(ctx context.Context, cfg *pgconn.Config, h *Health) (primary bool, state string, err error) {
	pg, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return false, "", err
	}
	defer closeQuietly(ctx, pg)
	rows, err := query(ctx, pg, "SELECT pg_is_in_recovery()::text")
	if err != nil {
		return false, "", err
	}
	if len(rows) != 1 || string(rows[0][0]) == "true" {
		state, err := s.standbyCopy(ctx, pg)
		return false, state, err
	}
	// The slot's name was checked by NewSource: it needs no quoting.
	rows, err = query(ctx, pg, "SELECT coalesce(pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn), 0)::bigint::text, coalesce(wal_status, ''), coalesce(safe_wal_size, -1)::text, "+
		"coalesce(to_jsonb(s)->>'invalidation_reason', ''), coalesce(to_jsonb(s)->>'conflicting', ''), coalesce(to_jsonb(s)->>'failover', ''), "+
		"coalesce(current_setting('synchronized_standby_slots', true), '') FROM pg_replication_slots s WHERE slot_name = '"+s.slot+"'")
	if err != nil {
		return true, "", fmt.Errorf("cdc: health of slot %q: %w", s.slot, err)
	}
	if len(rows) != 1 {
		return true, "", fmt.Errorf("cdc: health of slot %q: missing on the primary %s:%d", s.slot, cfg.Host, cfg.Port)
	}
	r := rows[0]
	h.RetainedBytes, _ = strconv.ParseInt(string(r[0]), 10, 64)
	h.WALStatus = string(r[1])
	h.SafeWALBytes, _ = strconv.ParseInt(string(r[2]), 10, 64)
	switch {
	case string(r[3]) != "":
		h.Invalidation = string(r[3])
	case string(r[4]) == "true":
		h.Invalidation = "conflicting"
	case h.WALStatus == "lost":
		h.Invalidation = "lost"
	}
	h.Failover = string(r[5]) == "true"
	h.SynchronizedStandbySlots = string(r[6])
	return true, "", nil
}

// standbyCopy returns the state of the slot's copy on a standby.
func (s *Source) standbyCopy(ctx context.Context, pg *pgconn.PgConn) (string, error) {
	rows, err := query(ctx, pg, "SELECT coalesce(to_jsonb(s)->>'synced', 'false'), temporary::text, coalesce(to_jsonb(s)->>'invalidation_reason', '') FROM pg_replication_slots s WHERE slot_name = '"+s.slot+"'")
	switch {
	case err != nil:
		return "", err
	case len(rows) == 0:
		return "missing", nil
	case string(rows[0][2]) != "":
		return "invalidated: " + string(rows[0][2]), nil
	case string(rows[0][1]) == "true":
		return "temporary", nil
	case string(rows[0][0]) != "true":
		return "not synced", nil
	}
	return "synced", nil
}

// commitMark is a transaction read: its commit LSN and time.
type commitMark struct {
	lsn pglogrepl.LSN
	at  time.Time
}

// maxMarks bounds the transactions remembered for the commit lag: beyond
// it the oldest half is forgotten, and the lag reads low until the Store
// catches up with the ones kept.
const maxMarks = 4096

// noteBegin remembers a transaction's commit LSN and time, for the commit
// lag of the cursor that will cover it; only with a Store to learn saves
// from.
func (s *Source) noteBegin(lsn pglogrepl.LSN, at time.Time) {
	if !s.tracking.Load() {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.marks) >= maxMarks {
		s.marks = append(s.marks[:0], s.marks[maxMarks/2:]...)
	}
	s.marks = append(s.marks, commitMark{lsn: lsn, at: at})
}

// noteSaved sets the commit time of saved cursor c, and forgets the
// transactions it covers; s.mu is held.
func (s *Source) noteSaved(c Cursor) {
	n := 0
	for n < len(s.marks) && (s.marks[n].lsn < c.LSN || s.marks[n].lsn == c.LSN && c.Index >= 0) {
		s.committedAt = s.marks[n].at
		n++
	}
	if n > 0 {
		s.marks = append(s.marks[:0], s.marks[n:]...)
	}
	if c.Index == -1 && c.Row == 0 && c.LSN != 0 && len(s.marks) == 0 {
		s.committedAt = time.Now() // a position with nothing in flight: caught up
	}
}
