package pgtest_test

import (
	"context"
	"testing"

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
