package pgtest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"go.uber.org/goleak"

	"github.com/resumable-go/resumable/internal/testkit/pgtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(pgtest.Main(m)) }

func query[V any](t *testing.T, dsn, sql string) V {
	t.Helper()
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("Connect(%s) = %v", dsn, err)
	}
	defer conn.Close(context.Background())
	var v V
	if err := conn.QueryRow(ctx, sql).Scan(&v); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return v
}

// systemID returns the cluster's system identifier, read over a
// replication connection.
func systemID(t *testing.T, s *pgtest.Server) string {
	t.Helper()
	conn, err := pgconn.Connect(t.Context(), s.ReplicationDSN())
	if err != nil {
		t.Fatalf("replication Connect = %v", err)
	}
	defer conn.Close(context.Background())
	res, err := conn.Exec(t.Context(), "IDENTIFY_SYSTEM").ReadAll()
	if err != nil {
		t.Fatalf("IDENTIFY_SYSTEM = %v", err)
	}
	return string(res[0].Rows[0][0])
}

func TestSharedSettings(t *testing.T) {
	s := pgtest.Shared(t)
	if again := pgtest.Shared(t); again != s {
		t.Fatalf("Shared() returned another server")
	}
	dsn := s.CreateDB(t)
	for _, tc := range []struct {
		name, setting, want string
	}{
		{name: "wal_level", setting: "wal_level", want: "logical"},
		{name: "slots", setting: "max_replication_slots", want: "16"},
		{name: "senders", setting: "max_wal_senders", want: "16"},
		{name: "fsync", setting: "fsync", want: "on"},
		{name: "listen", setting: "listen_addresses", want: "127.0.0.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := query[string](t, dsn, "SHOW "+tc.setting); got != tc.want {
				t.Errorf("SHOW %s = %q, want %q", tc.setting, got, tc.want)
			}
		})
	}
	if id := systemID(t, s); id == "" {
		t.Errorf("IDENTIFY_SYSTEM returned an empty system identifier")
	}
}

func TestCrashRestartWipe(t *testing.T) {
	s := pgtest.Start(t, pgtest.Options{Settings: map[string]string{"work_mem": "'5MB'"}})
	if got := query[string](t, s.DSN(), "SHOW work_mem"); got != "5MB" {
		t.Errorf("SHOW work_mem = %q, want 5MB", got)
	}
	if err := s.Exec(t.Context(), "CREATE TABLE kept (n int)", "INSERT INTO kept VALUES (7)"); err != nil {
		t.Fatal(err)
	}
	id := systemID(t, s)
	if err := s.Crash(); err != nil {
		t.Fatalf("Crash() = %v", err)
	}
	if _, err := pgconn.Connect(t.Context(), s.DSN()); err == nil {
		t.Fatalf("Connect after Crash() succeeded")
	}
	if err := s.Start(); err != nil {
		t.Fatalf("Start() = %v", err)
	}
	if got := query[int32](t, s.DSN(), "SELECT n FROM kept"); got != 7 {
		t.Errorf("after crash recovery n = %d, want 7", got)
	}
	if err := s.Restart(); err != nil {
		t.Fatalf("Restart() = %v", err)
	}
	if got := systemID(t, s); got != id {
		t.Errorf("system identifier after Restart = %s, want %s", got, id)
	}
	port := s.Port()
	if err := s.Wipe(); err != nil {
		t.Fatalf("Wipe() = %v", err)
	}
	if s.Port() != port {
		t.Errorf("Port() after Wipe = %d, want %d", s.Port(), port)
	}
	if got := systemID(t, s); got == id {
		t.Errorf("system identifier after Wipe = %s, want a new one", got)
	}
	if got := query[bool](t, s.DSN(), "SELECT to_regclass('kept') IS NULL"); !got {
		t.Errorf("table kept survived Wipe()")
	}
	if err := s.Stop(); err != nil {
		t.Fatalf("Stop() = %v", err)
	}
	if err := s.Stop(); err != nil {
		t.Fatalf("second Stop() = %v", err)
	}
}

func TestLaunchUnknownVersion(t *testing.T) {
	s, err := pgtest.Launch(pgtest.Options{Version: 16})
	if err == nil {
		s.Close()
		t.Fatalf("Launch(Version 16) = nil error, want one naming the version")
	}
	if !strings.Contains(err.Error(), "16") {
		t.Errorf("Launch(Version 16) = %v, want it to name 16", err)
	}
}

// timeline returns the server's timeline, read over a replication
// connection.
func timeline(t *testing.T, s *pgtest.Server) string {
	t.Helper()
	conn, err := pgconn.Connect(t.Context(), s.ReplicationDSN())
	if err != nil {
		t.Fatalf("replication Connect = %v", err)
	}
	defer conn.Close(context.Background())
	res, err := conn.Exec(t.Context(), "IDENTIFY_SYSTEM").ReadAll()
	if err != nil {
		t.Fatalf("IDENTIFY_SYSTEM = %v", err)
	}
	return string(res[0].Rows[0][1])
}

// await polls query until it returns want, within pgtest.Timeout.
func await[V comparable](t *testing.T, dsn, sql string, want V) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), pgtest.Timeout)
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	var got V
	for {
		conn, err := pgx.Connect(ctx, dsn)
		if err == nil {
			err = conn.QueryRow(ctx, sql).Scan(&got)
			conn.Close(context.Background())
		}
		if err == nil && got == want {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s = %v (%v), want %v within %v", sql, got, err, want, pgtest.Timeout)
		case <-tick.C:
		}
	}
}

func TestStandbyPromotePG17(t *testing.T) {
	p := pgtest.Start(t, pgtest.Options{Version: 17})
	if got := query[int32](t, p.DSN(), "SELECT current_setting('server_version_num')::int / 10000"); got != 17 {
		t.Fatalf("major version = %d, want 17", got)
	}
	if err := p.Exec(t.Context(), "CREATE TABLE kept (n int)", "INSERT INTO kept VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	sb := p.Standby(t, "sb1", nil)
	if err := p.Exec(t.Context(), "INSERT INTO kept VALUES (2)"); err != nil {
		t.Fatal(err)
	}
	await(t, sb.DSN(), "SELECT count(*) FROM kept", int64(2))
	for _, tc := range []struct{ setting, want string }{
		{setting: "sync_replication_slots", want: "on"},
		{setting: "hot_standby_feedback", want: "on"},
	} {
		if got := query[string](t, sb.DSN(), "SHOW "+tc.setting); got != tc.want {
			t.Errorf("standby SHOW %s = %q, want %q", tc.setting, got, tc.want)
		}
	}
	if !query[bool](t, sb.DSN(), "SELECT pg_is_in_recovery()") {
		t.Fatalf("standby: pg_is_in_recovery() = false")
	}
	if err := p.Crash(); err != nil {
		t.Fatalf("Crash() = %v", err)
	}
	if err := sb.Promote(t.Context()); err != nil {
		t.Fatalf("Promote() = %v", err)
	}
	if got := timeline(t, sb); got != "2" {
		t.Errorf("timeline after Promote = %s, want 2", got)
	}
	if err := sb.Exec(t.Context(), "INSERT INTO kept VALUES (3)"); err != nil {
		t.Fatalf("write after Promote: %v", err)
	}
}
