package postgres_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/resumable-go/resumable/adapters/postgres"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/stream"
	"github.com/resumable-go/resumable/stream/streamtest"
)

// The child processes of the zombie and crash tests are this test binary,
// run again with envChild set to their role and their settings in these
// variables.
const (
	envDSN     = "RESUMABLE_PG_DSN"
	envStream  = "RESUMABLE_PG_STREAM"
	envEffects = "RESUMABLE_PG_EFFECTS"
	envEvents  = "RESUMABLE_PG_EVENTS"
)

// Exit codes of a child.
const (
	exitDone    = 0 // Run returned nil: the feed was consumed
	exitFailed  = 1 // anything else, on stderr
	exitChanged = 3 // Run returned ErrCursorChanged
)

// Roles of a child.
const (
	// roleCrash consumes the feed, printing each event's sequence number
	// inside its transaction, before the commit.
	roleCrash = "crash"
	// roleBatch is roleCrash through RunBatch and TransactionalBatch
	// (batches of up to 100, whatever was read when the handler is free).
	roleBatch = "batch"
	// roleZombie loads the cursor, prints "ready", waits for a line on its
	// stdin, then consumes the feed from the cursor it loaded, as a process
	// that was paused would; it prints "handled N" at the end.
	roleZombie = "zombie"
)

// preloaded is a Store whose Load returns the cursor loaded before: the
// Resumer starts from that stale view.
type preloaded struct {
	*postgres.Store[int64]
	c int64
}

func (p preloaded) Load(context.Context) (int64, error) { return p.c, nil }

func runChild(role string) int {
	if err := child(role); err != nil {
		if errors.Is(err, postgres.ErrCursorChanged) {
			fmt.Fprintln(os.Stderr, err)
			return exitChanged
		}
		fmt.Fprintln(os.Stderr, "child:", err)
		return exitFailed
	}
	return exitDone
}

func child(role string) error {
	ctx := context.Background()
	n, err := strconv.Atoi(os.Getenv(envEvents))
	if err != nil {
		return err
	}
	pool, err := pgxpool.New(ctx, os.Getenv(envDSN))
	if err != nil {
		return err
	}
	defer pool.Close()
	s, err := postgres.NewStore(pool, os.Getenv(envStream), cursor.Int64(), 0)
	if err != nil {
		return err
	}
	insert := "INSERT INTO " + pgx.Identifier{os.Getenv(envEffects)}.Sanitize() + " (seq) VALUES ($1)"
	var store cursor.Store[int64] = s
	handled := 0
	fn := func(ctx context.Context, tx pgx.Tx, e event) error {
		if _, err := tx.Exec(ctx, insert, e.Seq); err != nil {
			return err
		}
		handled++
		if role == roleCrash || role == roleBatch {
			_, err := fmt.Fprintln(os.Stdout, e.Seq)
			return err
		}
		return nil
	}
	switch role {
	case roleZombie:
		c, err := s.Load(ctx)
		if err != nil {
			return err
		}
		store = preloaded{Store: s, c: c}
		fmt.Println("ready")
		if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
			return err
		}
	case roleCrash, roleBatch:
	default:
		return fmt.Errorf("unknown role %q", role)
	}
	src := streamtest.NewSource(make([]struct{}, n))
	if role == roleBatch {
		r, err := stream.New(src, streamtest.Extract[struct{}], store, stream.WithBatch(100, 0))
		if err != nil {
			return err
		}
		return r.RunBatch(ctx, postgres.TransactionalBatch(s, streamtest.Extract[struct{}], func(ctx context.Context, tx pgx.Tx, evs []event) error {
			for _, e := range evs {
				if err := fn(ctx, tx, e); err != nil {
					return err
				}
			}
			return nil
		}))
	}
	r, err := stream.New(src, streamtest.Extract[struct{}], store)
	if err != nil {
		return err
	}
	err = r.Run(ctx, postgres.Transactional(s, streamtest.Extract[struct{}], fn))
	if role == roleZombie {
		fmt.Println("handled", handled)
	}
	return err
}

// startChild starts this test binary as a child in role; its stderr goes
// to t's log when the test fails.
func startChild(t *testing.T, role string, env ...string) (*exec.Cmd, *bufio.Scanner, io.WriteCloser) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = envList(append([]string{envChild, role}, env...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stderr, err := os.CreateTemp(t.TempDir(), "child-stderr-")
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(stderr.Name())
			t.Logf("%s child %d stderr:\n%s", role, cmd.Process.Pid, b)
		}
		stderr.Close()
	})
	return cmd, bufio.NewScanner(out), in
}

// exitCode waits for cmd and returns its exit code, or -1 when a signal
// ended it.
func exitCode(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	err := cmd.Wait()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return -1
		}
		return ee.ExitCode()
	}
	t.Fatalf("waiting for the child: %v", err)
	return 0
}
