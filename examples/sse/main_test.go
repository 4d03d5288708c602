package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/resumable-go/resumable/adapters/sse"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestRun runs the demo as `go run ./examples/sse` does, with a few seeds,
// and asserts that its end check passed.
func TestRun(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		t.Run("seed="+strconv.FormatUint(seed, 10), func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var out bytes.Buffer
			if err := run(ctx, &out, []string{"-seed", strconv.FormatUint(seed, 10)}); err != nil {
				t.Fatalf("run() = %v, want nil; output:\n%s", err, out.String())
			}
			if !strings.Contains(out.String(), "ok: all 100 events arrived exactly once and in order") {
				t.Errorf("run() output lacks the end check's verdict:\n%s", out.String())
			}
			if !strings.Contains(out.String(), "reconnect after") {
				t.Errorf("run() output shows no reconnect:\n%s", out.String())
			}
		})
	}
}

func TestRunBadFlag(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), &out, []string{"-events", "0"}); err == nil {
		t.Errorf("run(-events 0) = nil, want an error")
	}
}

// TestChecker shows that the end check catches what it must.
func TestChecker(t *testing.T) {
	ev := func(n int) sse.Event { return sse.Event{ID: strconv.Itoa(n), Type: "tick", Data: payload(n)} }
	tests := []struct {
		name   string
		events []sse.Event
		ok     bool
	}{
		{name: "all in order", events: []sse.Event{ev(1), ev(2), ev(3)}, ok: true},
		{name: "duplicate", events: []sse.Event{ev(1), ev(2), ev(2), ev(3)}},
		{name: "gap", events: []sse.Event{ev(1), ev(3)}},
		{name: "missing tail", events: []sse.Event{ev(1), ev(2)}},
		{name: "reordered", events: []sse.Event{ev(2), ev(1), ev(3)}},
		{name: "wrong data", events: []sse.Event{ev(1), {ID: "2", Type: "tick", Data: "tick 2"}, ev(3)}},
		{name: "bad id", events: []sse.Event{ev(1), ev(2), {ID: "x"}, ev(3)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := checker{total: 3}
			for _, e := range tt.events {
				c.add(e)
			}
			if err := c.verify(); (err == nil) != tt.ok {
				t.Errorf("verify() = %v, want ok=%v", err, tt.ok)
			}
		})
	}
}

// TestRunCancelledMidStream: cancelling in the middle of the stream returns
// the context's error, and goleak (TestMain) shows that the server, its
// handlers and the client's connections are all gone.
func TestRunCancelledMidStream(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out bytes.Buffer // run writes from one goroutine
	cancelAtMarker := writerFunc(func(p []byte) (int, error) {
		if bytes.Contains(p, []byte("event 10 ")) {
			cancel()
		}
		return out.Write(p)
	})
	if err := run(ctx, cancelAtMarker, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("run() = %v, want %v; output:\n%s", err, context.Canceled, out.String())
	}
}

func TestRunCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := run(ctx, io.Discard, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("run(cancelled) = %v, want %v", err, context.Canceled)
	}
}

// TestStateSurvivesKill runs the program as a child process with -state
// against a server of this test (the program's own publisher, misbehaving
// as usual), kills it with SIGKILL several times in the middle of the
// stream, then lets a last run reach the end (204). Across the runs every
// event must have been handled: none lost, though some are handled twice.
// The stream starts from the empty cursor, with a heartbeat before the
// first id.
func TestStateSurvivesKill(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "sse")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	const total = 300
	kills := []int{20, 70, 120, 170, 220}

	var mu sync.Mutex
	var target int
	var reached chan struct{} // closed once the server sent event target
	pub := &publisher{total: total, pace: time.Millisecond, rng: rand.New(rand.NewPCG(7, 0)),
		sent: func(n int) {
			mu.Lock()
			defer mu.Unlock()
			if reached != nil && n >= target {
				close(reached)
				reached = nil
			}
		},
	}
	srv := httptest.NewServer(pub)
	defer srv.Close()

	state := filepath.Join(dir, "cursor")
	stdout := filepath.Join(dir, "out")
	args := []string{"-url", srv.URL + "/events", "-state", state}
	for i, k := range kills {
		ch := make(chan struct{})
		mu.Lock()
		target, reached = k, ch
		mu.Unlock()
		p := startChild(t, bin, args, stdout)
		select {
		case <-ch:
		case <-p.done:
			t.Fatalf("run %d ended before the server sent event %d:\n%s", i+1, k, tail(stdout))
		case <-time.After(time.Minute):
			t.Fatalf("run %d: the server did not send event %d within a minute:\n%s", i+1, k, tail(stdout))
		}
		p.kill()
		var exit *exec.ExitError
		if !errors.As(p.err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("run %d ended with %v, want killed by SIGKILL", i+1, p.err)
		}
	}
	mu.Lock()
	reached = nil
	mu.Unlock()
	p := startChild(t, bin, args, stdout)
	select {
	case <-p.done:
		if p.err != nil {
			t.Fatalf("the last run: %v, want exit status 0\n%s", p.err, tail(stdout))
		}
	case <-time.After(time.Minute):
		t.Fatalf("the last run did not end within a minute:\n%s", tail(stdout))
	}

	seen, starts, lines := readRuns(t, stdout)
	t.Logf("%d events handled %d times over %d runs; runs started: %q", total, lines, len(starts), starts)
	var lost []int
	for n := 1; n <= total; n++ {
		if !seen[n] {
			lost = append(lost, n)
		}
	}
	if len(lost) > 0 {
		t.Errorf("events lost across %d kills: %v", len(kills), lost)
	}
	if len(starts) != len(kills)+1 || starts[0] != `starting after id ""` {
		t.Errorf("runs started %q, want %d runs, the first from the empty cursor", starts, len(kills)+1)
	}
	if data, err := os.ReadFile(state); err != nil || string(data) != strconv.Itoa(total)+"\n" {
		t.Errorf("state file holds %q (%v), want %q", data, err, strconv.Itoa(total)+"\n")
	}
}

// child is one run of the program built by TestStateSurvivesKill.
type child struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once Wait returned
	err  error         // Wait's result, read after done is closed
}

// startChild starts bin with args, its output appended to the file at path;
// the child is killed when the test ends, if it has not ended by then.
func startChild(t *testing.T, bin string, args []string, path string) *child {
	t.Helper()
	out, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close() // the child has its own descriptor
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, done: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		close(c.done)
	}()
	t.Cleanup(c.kill)
	return c
}

// kill sends SIGKILL and waits until the child has been reaped.
func (c *child) kill() {
	_ = c.cmd.Process.Kill() // an ended child is not an error
	<-c.done
}

// tail returns the last lines of the file at path, for failure messages.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-20):], "\n")
}

// writerFunc is an io.Writer made of a function.
type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// readRuns reads the output of the runs: the events handled, the line each
// run started with, and how many event lines there were.
func readRuns(t *testing.T, path string) (seen map[int]bool, starts []string, lines int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	seen = map[int]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "starting after id ") {
			starts = append(starts, line)
		}
		if rest, ok := strings.CutPrefix(line, "event "); ok {
			id, _, _ := strings.Cut(rest, " ")
			n, err := strconv.Atoi(id)
			if err != nil {
				t.Fatalf("output line %q: %v", line, err)
			}
			seen[n] = true
			lines++
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return seen, starts, lines
}
