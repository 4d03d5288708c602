package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// zapCore logs at Info and above to w, one line per entry.
func zapCore(w io.Writer) zapcore.Core {
	return zapcore.NewCore(zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig()), zapcore.AddSync(w), zapcore.InfoLevel)
}

// demo starts a throw-away server, writes a transaction of 10 rows, stops
// the consumer after the 3rd change and starts it again.
func demo(ctx context.Context, stdout, stderr io.Writer) error {
	srv, err := startServer(ctx)
	if err != nil {
		return err
	}
	defer srv.close()
	fmt.Fprintf(stderr, "demo: server at %s\n", srv.dsn)
	setup := []string{
		"CREATE TABLE items (id int PRIMARY KEY, name text)",
		"CREATE PUBLICATION demo_pub FOR TABLE items",
		"SELECT pg_create_logical_replication_slot('demo_slot', 'pgoutput')",
		"BEGIN; INSERT INTO items SELECT g, 'item ' || g FROM generate_series(1, 10) g; COMMIT",
		"UPDATE items SET name = 'renamed' WHERE id = 4",
		"DELETE FROM items WHERE id = 5",
	}
	if err := execAll(ctx, srv.dsn, setup...); err != nil {
		return err
	}
	cfg := config{dsn: srv.dsn, slot: "demo_slot", pub: "demo_pub", state: filepath.Join(srv.dir, "cursor.json"), stopAfter: 3}
	fmt.Fprintln(stderr, "demo: first run, stopping after the 3rd change of the 10-row transaction")
	if err := consume(ctx, stdout, stderr, cfg); err != nil {
		return err
	}
	saved, err := os.ReadFile(cfg.state)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "demo: saved cursor %s\ndemo: second run, going on with the 4th\n", saved)
	cfg.stopAfter = 7 + 2
	return consume(ctx, stdout, stderr, cfg)
}

func execAll(ctx context.Context, dsn string, sql ...string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	for _, q := range sql {
		if _, err := conn.Exec(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	return nil
}

// server is the demo's PostgreSQL, in a temporary directory.
type server struct {
	dir, dsn string
	cmd      *exec.Cmd
}

// startServer runs initdb and postgres (as the user postgres when run as
// root, which PostgreSQL refuses), with wal_level=logical, on a free port
// of 127.0.0.1.
func startServer(ctx context.Context) (*server, error) {
	bin := os.Getenv("RESUMABLE_PG_BIN")
	if bin == "" {
		bin = "/usr/lib/postgresql/15/bin"
	}
	if _, err := os.Stat(filepath.Join(bin, "postgres")); err != nil {
		return nil, fmt.Errorf("the demo needs PostgreSQL's binaries (set RESUMABLE_PG_BIN): %w", err)
	}
	dir, err := os.MkdirTemp("", "resumable-pg-demo-")
	if err != nil {
		return nil, err
	}
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("running as root, and no user postgres to run the server as: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	command := func(name string, args ...string) *exec.Cmd {
		cmd := exec.Command(filepath.Join(bin, name), args...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true}
		return cmd
	}
	data := filepath.Join(dir, "data")
	if out, err := command("initdb", "-D", data, "-U", "postgres", "-A", "trust", "--no-sync").CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb: %w: %s", err, out)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	s := &server{dir: dir, dsn: fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)}
	s.cmd = command("postgres", "-D", data, "-p", strconv.Itoa(port), "-k", dir,
		"-c", "listen_addresses=127.0.0.1", "-c", "wal_level=logical", "-c", "fsync=off")
	logf, err := os.Create(filepath.Join(dir, "postgres.log"))
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	defer logf.Close()
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	if err := s.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	for deadline := time.Now().Add(time.Minute); ; {
		conn, err := pgx.Connect(ctx, s.dsn)
		if err == nil {
			conn.Close(ctx)
			return s, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			s.close()
			return nil, errors.Join(fmt.Errorf("the demo server did not start"), err)
		}
		time.Sleep(100 * time.Millisecond) // polling a starting server, bounded by the deadline
	}
}

// close stops the server fast and removes its directory.
func (s *server) close() {
	_ = s.cmd.Process.Signal(syscall.SIGINT)
	_ = s.cmd.Wait()
	os.RemoveAll(s.dir)
}
