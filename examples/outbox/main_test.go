package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/resumable-go/resumable/internal/testkit/pgtest"
)

// envMain makes the test binary run main instead of the tests: the tests
// run the program as a user does and read its exit status.
const envMain = "OUTBOX_EXAMPLE_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(envMain) != "" {
		os.Args = append([]string{"outbox"}, strings.Fields(os.Getenv(envMain+"_ARGS"))...)
		main()
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// runMain runs the program with args and the environment added, and
// returns its stdout, stderr and exit status.
func runMain(t *testing.T, args string, env ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.CommandContext(pgtest.Ctx(t), os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), append([]string{envMain + "=1", envMain + "_ARGS=" + args}, env...)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return out.String(), errOut.String(), code
}

// wantDemo is what the demo prints on stdout: every line is decided by
// the order of the writers' commits, none by timing.
const wantDemo = `act 1: the transaction that took id 1 commits after the one that took id 2
writer A inserted id 1, not committed yet
writer B commits id 2
id > 0 relay reads [2]
outbox relay: holds id 2 back while the transaction of id 1 runs
writer A commits id 1
handled 1
handled 2
id > 2 relay reads []
act 2: 10 transactions insert a row each, then commit in reverse id order
writer W9 commits id 12
id > 2 relay reads [12]
writer W8 commits id 11
writer W7 commits id 10
writer W6 commits id 9
writer W5 commits id 8
writer W4 commits id 7
writer W3 commits id 6
writer W2 commits id 5
writer W1 commits id 4
writer W0 commits id 3
handled 3
handled 4
handled 5
handled 6
handled 7
handled 8
handled 9
handled 10
handled 11
handled 12
id > 12 relay reads []
outbox relay: 12 rows committed, 12 handled, none skipped
id > last relay: read [2 12], skipped 10
ok
`

// TestDemo runs the program with no arguments, as go run ./examples/outbox
// does: it starts its own PostgreSQL, relays rows committed out of id
// order, none skipped, and exits 0. Without the binaries it skips (fails
// under CI), as every PostgreSQL test does.
func TestDemo(t *testing.T) {
	bin := os.Getenv(pgtest.EnvBin)
	if bin == "" {
		bin = pgtest.DefaultBin
	}
	if _, err := os.Stat(filepath.Join(bin, "postgres")); err != nil {
		if os.Getenv("CI") == "" {
			t.Skipf("no PostgreSQL in %s; install it with: %s", bin, installCommand)
		}
		t.Fatal(err)
	}
	stdout, stderr, code := runMain(t, "")
	if code != 0 {
		t.Fatalf("exit status %d, want 0; stderr:\n%s", code, stderr)
	}
	if stdout != wantDemo {
		t.Errorf("stdout:\n%s\nwant:\n%s", stdout, wantDemo)
	}
}

// TestDemoWithoutPostgres: without PostgreSQL's binaries the demo prints
// the command that installs them and exits 2.
func TestDemoWithoutPostgres(t *testing.T) {
	stdout, stderr, code := runMain(t, "", pgtest.EnvBin+"="+t.TempDir())
	if code != 2 {
		t.Errorf("exit status %d, want 2; stderr:\n%s", code, stderr)
	}
	if !strings.Contains(stderr, "install them with: apt-get install postgresql\n") {
		t.Errorf("stderr:\n%s\nwant the install command", stderr)
	}
	if stdout != "" {
		t.Errorf("stdout:\n%s\nwant nothing", stdout)
	}
}

// TestRunRefusesBadFlags: once any argument is given, the pinned flags are
// all required, and the others are checked, before anything connects. The
// relay itself is tested against a real server by
// adapters/postgres/outbox/soak_test.go.
func TestRunRefusesBadFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{name: "dsn only", args: []string{"-dsn", "postgres://127.0.0.1/x"}, want: "all required"},
		{name: "no state", args: []string{"-dsn", "postgres://127.0.0.1/x", "-table", "outbox"}, want: "all required"},
		{name: "negative checkpoint", args: []string{"-dsn", "postgres://127.0.0.1/x", "-table", "outbox", "-state", "s", "-checkpoint=-1s"}, want: "-checkpoint"},
		{name: "redis without stream", args: []string{"-dsn", "postgres://127.0.0.1/x", "-table", "outbox", "-redis", "127.0.0.1:6379"}, want: "-redis and -stream are all required"},
		{name: "stream without redis", args: []string{"-dsn", "postgres://127.0.0.1/x", "-table", "outbox", "-stream", "out"}, want: "-redis and -stream are all required"},
		{name: "redis without table", args: []string{"-dsn", "postgres://127.0.0.1/x", "-redis", "127.0.0.1:6379", "-stream", "out"}, want: "-redis and -stream are all required"},
		{name: "redis with state", args: []string{"-dsn", "postgres://127.0.0.1/x", "-table", "outbox", "-redis", "127.0.0.1:6379", "-stream", "out", "-state", "s"}, want: "-state is not used with -redis"},
		{name: "unknown flag", args: []string{"-slot", "x"}, want: "not defined"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := run(context.Background(), io.Discard, io.Discard, tc.args)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("run(%q) = %v, want an error containing %q", tc.args, err, tc.want)
			}
		})
	}
}
