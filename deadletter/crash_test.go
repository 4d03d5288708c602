package deadletter_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/resumable-go/resumable/backoff"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/deadletter"
	"github.com/resumable-go/resumable/errclass"
	"github.com/resumable-go/resumable/stream"
	"github.com/resumable-go/resumable/stream/streamtest"
)

const (
	// crashDirEnv tells TestCrashChild, run by TestCrashBetweenParkAndCommit
	// in a child process, the directory of its cursor and dead-letter files.
	crashDirEnv = "DEADLETTER_CRASH_DIR"
	// crashKillEnv tells it where to kill itself: "after-park N" (Park of
	// event N returned, its cursor not committed yet), "before-park N" (the
	// handler was called with event N, nothing parked yet), or nothing.
	crashKillEnv = "DEADLETTER_CRASH_KILL"

	crashEvents = 40
)

// crashPoison are the events the child's handler can never handle: the
// permanent ones are parked after one try, the others after three.
var crashPoison = map[int64]bool{5: true, 12: false, 20: true, 31: false}

// TestCrashBetweenParkAndCommit runs a stream that parks to a File and
// keeps its cursor in a cursor.File, in a child process killed (SIGKILL) at
// chosen moments, and checks the rule of the dead letter: an event killed
// after its Park returned but before its commit is parked again by the next
// run (twice in all), one killed before its Park is parked once, by the
// next run; none is ever lost, and every other event is handled.
func TestCrashBetweenParkAndCommit(t *testing.T) {
	switch runtime.GOOS {
	case "windows", "plan9", "js", "wasip1", "ios", "android":
		t.Skipf("no SIGKILL or no subprocesses on %s", runtime.GOOS)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "parked.jsonl")
	runs := []struct {
		kill  string
		after map[int64]int // parked records per cursor once the run ended
	}{
		{kill: "after-park 5", after: map[int64]int{5: 1}},
		{kill: "before-park 12", after: map[int64]int{5: 2}},
		{kill: "after-park 20", after: map[int64]int{5: 2, 12: 1, 20: 1}},
		{kill: "", after: map[int64]int{5: 2, 12: 1, 20: 2, 31: 1}},
	}
	for i, run := range runs {
		out, killed := runCrashChild(t, dir, run.kill)
		if killed != (run.kill != "") {
			t.Fatalf("run %d (%q): killed = %v, want %v; output:\n%s", i, run.kill, killed, run.kill != "", out)
		}
		got := make(map[int64]int)
		for r, err := range deadletter.Read[streamtest.Event[int], int64](path) {
			if err != nil {
				t.Fatalf("run %d: Read() = %v", i, err)
			}
			got[r.Cursor]++
			want := 3
			if crashPoison[r.Cursor] {
				want = 1 // permanent: never retried
			}
			if r.Tries != want {
				t.Errorf("run %d: record of %d says %d tries, want %d", i, r.Cursor, r.Tries, want)
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(run.after) {
			t.Fatalf("run %d (%q): parked records per cursor = %v, want %v; output:\n%s", i, run.kill, got, run.after, out)
		}
	}
	store, err := cursor.NewFile(filepath.Join(dir, "cursor"), int64(0), cursor.Int64())
	if err != nil {
		t.Fatal(err)
	}
	if c, err := store.Load(context.Background()); err != nil || c != crashEvents {
		t.Errorf("cursor after the last run = %d, %v; want %d", c, err, crashEvents)
	}
	handled := readHandled(t, filepath.Join(dir, "handled"))
	for seq := int64(1); seq <= crashEvents; seq++ {
		if _, poison := crashPoison[seq]; poison == (handled[seq] > 0) {
			t.Errorf("event %d handled %d times (poison: %v)", seq, handled[seq], poison)
		}
	}
}

// runCrashChild runs TestCrashChild in dir, to be killed as kill says, and
// returns its output and whether it was killed by a signal.
func runCrashChild(t *testing.T, dir, kill string) (string, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), crashDirEnv+"="+dir, crashKillEnv+"="+kill)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil && (cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != -1) {
		t.Fatalf("child (kill %q) = %v, want a clean end or a kill; output:\n%s", kill, err, out.String())
	}
	return out.String(), err != nil
}

// readHandled counts the lines "N" of the child's log of handled events.
func readHandled(t *testing.T, path string) map[int64]int {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := make(map[int64]int)
	for _, s := range strings.Fields(string(data)) {
		seq, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("handled log: %v", err)
		}
		n[seq]++
	}
	return n
}

// TestCrashChild runs in a child process of TestCrashBetweenParkAndCommit:
// one run of the stream over the events 1..crashEvents, which kills itself
// where $DEADLETTER_CRASH_KILL says.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		t.Skip("run by TestCrashBetweenParkAndCommit")
	}
	var killAt int64
	killAfterPark := false
	if kill := os.Getenv(crashKillEnv); kill != "" {
		where, n, _ := strings.Cut(kill, " ")
		var err error
		if killAt, err = strconv.ParseInt(n, 10, 64); err != nil {
			t.Fatalf("%s=%q: %v", crashKillEnv, kill, err)
		}
		killAfterPark = where == "after-park"
	}
	store, err := cursor.NewFile(filepath.Join(dir, "cursor"), int64(0), cursor.Int64())
	if err != nil {
		t.Fatal(err)
	}
	dl, err := deadletter.Open(filepath.Join(dir, "parked.jsonl"), streamtest.Extract[int])
	if err != nil {
		t.Fatal(err)
	}
	defer dl.Close()
	handled, err := os.OpenFile(filepath.Join(dir, "handled"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer handled.Close()

	park := func(ctx context.Context, e streamtest.Event[int], err error) error {
		if err := dl.Park(ctx, e, err); err != nil {
			return err
		}
		if killAfterPark && e.Seq == killAt {
			killSelf() // parked and durable; the cursor not committed
		}
		return nil
	}
	errPoison := errors.New("poison")
	handle := func(_ context.Context, e streamtest.Event[int]) error {
		if !killAfterPark && e.Seq == killAt {
			killSelf() // in the handler, before any park
		}
		if permanent, poison := crashPoison[e.Seq]; poison {
			if permanent {
				return errclass.Permanent(errPoison)
			}
			return errPoison
		}
		_, err := fmt.Fprintln(handled, e.Seq)
		return err
	}
	src := streamtest.NewSource(make([]int, crashEvents))
	r, err := stream.New(src, streamtest.Extract[int], store,
		stream.WithBackoff(backoff.Constant(0)),
		stream.WithHandlerRetry(3, backoff.Constant(0)),
		stream.WithDeadLetter(park))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Run(context.Background(), handle); err != nil {
		t.Fatalf("Run() = %v, want nil", err)
	}
	if killAt != 0 {
		t.Fatalf("not killed at %d", killAt)
	}
}

// killSelf kills the process with SIGKILL, as a crash would, and never
// returns.
func killSelf() {
	p, err := os.FindProcess(os.Getpid())
	if err == nil {
		err = p.Kill()
	}
	panic(fmt.Sprintf("still alive after killing itself: %v", err))
}
