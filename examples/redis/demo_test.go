package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/resumable-go/resumable/internal/testkit/redistest"
)

// wantDemo is the demo's stdout: the same every run (the entries have
// explicit IDs, the consumers' steps are sequenced).
const wantDemo = `demo: stream orders, group demo: entries 1-1 1-2 1-3
a: handling 1-1 1-2 1-3; its handler hangs
a: cut off from Redis, as if its process died, with 3 entries pending: 1-1 1-2 1-3
b: handled 1-1, claimed from a
b: handled 1-2, claimed from a
b: handled 1-3, claimed from a
demo: adding 1-4 1-5 1-6; the handler fails on 1-5 every time
b: handled 1-4
b: handler failed on 1-5 (poison), call 1 of at most 3
b: handler failed on 1-5 (poison), call 2 of at most 3
b: handler failed on 1-5 (poison), call 3 of at most 3
b: parked 1-5 in the dead-letter file
b: handled 1-6
ok: a's entries claimed and handled once by b, 1-5 parked after 3 calls, nothing left pending
`

// serverDir returns the demo's temporary directory, which it names on
// stderr.
func serverDir(t *testing.T, stderr string) string {
	t.Helper()
	m := regexp.MustCompile(`demo: redis-server on 127\.0\.0\.1:\d+, in (\S+)`).FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("stderr does not name the server's address and directory:\n%s", stderr)
	}
	return m[1]
}

// TestDemo runs the demo in this process (under -race, goroutines checked
// by TestMain): consumer a's entries are claimed and handled by b, the
// poison entry parked after 3 calls; it returns nil and removes its
// server's directory.
func TestDemo(t *testing.T) {
	t.Setenv("RESUMABLE_REDIS_SERVER", redistest.Require(t))
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(t.Context(), wait)
	defer cancel()
	if err := run(ctx, &stdout, &stderr, nil); err != nil {
		t.Fatalf("run() = %v; stderr:\n%s", err, stderr.String())
	}
	if got := stdout.String(); got != wantDemo {
		t.Errorf("stdout:\n%s\nwant:\n%s", got, wantDemo)
	}
	if _, err := os.Stat(serverDir(t, stderr.String())); !os.IsNotExist(err) {
		t.Errorf("the demo's directory is left behind: %v", err)
	}
}

// TestDemoCommand: the program with no arguments runs the demo and exits
// with status 0.
func TestDemoCommand(t *testing.T) {
	cmd := exec.CommandContext(t.Context(), bin)
	cmd.Env = append(os.Environ(), "RESUMABLE_REDIS_SERVER="+redistest.Require(t))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); exitCode(err) != 0 {
		t.Fatalf("exit = %v, want status 0; stderr:\n%s", err, stderr.String())
	}
	if got := stdout.String(); got != wantDemo {
		t.Errorf("stdout:\n%s\nwant:\n%s", got, wantDemo)
	}
	if _, err := os.Stat(serverDir(t, stderr.String())); !os.IsNotExist(err) {
		t.Errorf("the demo's directory is left behind: %v", err)
	}
}

// TestDemoWithoutServer: without redis-server the program prints the one
// command that installs it and exits with status 2.
func TestDemoWithoutServer(t *testing.T) {
	cmd := exec.CommandContext(t.Context(), bin)
	cmd.Env = append(os.Environ(), "RESUMABLE_REDIS_SERVER="+filepath.Join(t.TempDir(), "no-redis-server"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); exitCode(err) != 2 {
		t.Fatalf("exit = %v, want status 2; stderr:\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "\n\tapt-get install redis-server\n") {
		t.Errorf("stderr does not give the install command on a line of its own:\n%s", stderr.String())
	}
	if stdout.Len() != 0 {
		t.Errorf("stdout = %q, want nothing", stdout.String())
	}
}
