package stream_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/stream"
)

const (
	// crashCursorEnv tells TestConcurrencyCrashChild, run by
	// TestConcurrencyCrash in a child process, the cursor file to use.
	crashCursorEnv = "RESUMABLE_CONCURRENCY_CRASH_CURSOR"
	// crashKillsEnv sets how many times TestConcurrencyCrash kills a child
	// (default crashKills).
	crashKillsEnv = "RESUMABLE_CRASH_KILLS"
	// crashSeedEnv repeats a TestConcurrencyCrash run when set to the seed
	// it logged.
	crashSeedEnv = "RESUMABLE_CONCURRENCY_CRASH_SEED"

	crashKills   = 5 // by default: a handful; RESUMABLE_CRASH_KILLS=100 for the full run
	crashN       = 16
	crashKeys    = 20
	crashWindow  = 64
	crashCadence = 8 // WithCheckpointEvery

	// crashLifeBound bounds one child's life; it detects a hang, it is not
	// a timing check.
	crashLifeBound = time.Minute
)

// TestConcurrencyCrash kills a process that handles an endless stream with
// 16 handlers and 20 keys, saving to a cursor.File, at random moments
// (SIGKILL), and checks after every kill that no event up to the saved
// cursor was lost, that within the process's life every key's events were
// handled one after the other in stream order with no gap, and that what
// the next process will deliver again — events handled but beyond the
// saved cursor — is no more than the window plus the checkpoint cadence.
func TestConcurrencyCrash(t *testing.T) {
	switch runtime.GOOS {
	case "windows", "plan9", "js", "wasip1", "ios", "android":
		t.Skipf("no SIGKILL or no subprocesses on %s", runtime.GOOS)
	}
	kills := crashKills
	if s := os.Getenv(crashKillsEnv); s != "" {
		var err error
		if kills, err = strconv.Atoi(s); err != nil || kills < 1 {
			t.Fatalf("%s=%q: want a positive count", crashKillsEnv, s)
		}
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv(crashSeedEnv); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("%s=%q: %v", crashSeedEnv, s, err)
		}
	}
	t.Logf("seed %d (set %s to repeat), %d kills (set %s for more)", seed, crashSeedEnv, kills, crashKillsEnv)
	rng := rand.New(rand.NewPCG(seed, seed))

	path := filepath.Join(t.TempDir(), "cursor")
	handled := map[int64]bool{} // every event handled by some life
	var saved int64             // the cursor in the file
	var total, redeliveredAll, mostRedelivered int
	start := time.Now()
	for kill := range kills {
		target := rng.IntN(600) // events handled before the kill; 0 kills during start-up
		life := runCrashChild(t, path, target)
		if life.loaded >= 0 && life.loaded != saved {
			t.Fatalf("kill %d (seed %d): the child loaded %d, the file held %d", kill, seed, life.loaded, saved)
		}
		checkLifeOrder(t, kill, saved, life.handled)
		for _, s := range life.handled {
			handled[s] = true
		}
		total += len(life.handled)

		f, err := cursor.NewFile(path, int64(0), cursor.Int64())
		if err != nil {
			t.Fatalf("kill %d: NewFile() = %v", kill, err)
		}
		got, err := f.Load(context.Background())
		if err != nil {
			t.Fatalf("kill %d (seed %d): Load() = %v", kill, seed, err)
		}
		if got < saved {
			t.Fatalf("kill %d (seed %d): the saved cursor went back from %d to %d", kill, seed, saved, got)
		}
		for s := saved + 1; s <= got; s++ {
			if !handled[s] {
				t.Fatalf("kill %d (seed %d): event %d lost: saved cursor %d, never handled", kill, seed, s, got)
			}
		}
		redelivered := 0
		for _, s := range life.handled {
			if s > got {
				redelivered++
			}
		}
		if redelivered > 2*crashWindow+crashCadence {
			t.Errorf("kill %d (seed %d): %d events handled beyond the saved cursor %d, to be delivered again; want at most %d (two windows %d + cadence %d)",
				kill, seed, redelivered, got, 2*crashWindow+crashCadence, crashWindow, crashCadence)
		}
		redeliveredAll += redelivered
		mostRedelivered = max(mostRedelivered, redelivered)
		saved = got
	}
	t.Logf("%d kills in %v: %d events handled, saved cursor %d, %d to be redelivered in all, at most %d after one kill (bound %d: two windows and the cadence)",
		kills, time.Since(start).Round(time.Millisecond), total, saved, redeliveredAll, mostRedelivered, 2*crashWindow+crashCadence)
}

// checkLifeOrder checks the events one life handled, in the order they
// finished: per key, the key's events after the loaded cursor, in stream
// order, none skipped (events of one key never overlap, so the order they
// finished in is the order they ran in).
func checkLifeOrder(t *testing.T, kill int, loaded int64, handled []int64) {
	t.Helper()
	prev := map[int]int64{}
	for _, s := range handled {
		k := ccKey(s, crashKeys)
		from, ok := prev[k]
		if !ok {
			from = loaded
		}
		want := from + 1
		for ccKey(want, crashKeys) != k {
			want++
		}
		if s != want {
			t.Fatalf("kill %d: key %d handled event %d after %d, want %d next", kill, k, s, from, want)
		}
		prev[k] = s
	}
}

// crashLife is what one killed child reported.
type crashLife struct {
	loaded  int64   // the cursor it loaded; -1 if it did not say
	handled []int64 // the events it handled, in the order they finished
}

// runCrashChild starts TestConcurrencyCrashChild on path, kills it with
// SIGKILL once it reported target events handled, and reads what it wrote
// before it died.
func runCrashChild(t *testing.T, path string, target int) crashLife {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestConcurrencyCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashCursorEnv+"="+path)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	life := crashLife{loaded: -1}
	sc := bufio.NewScanner(stdout)
	scan := func() bool {
		if !sc.Scan() {
			return false
		}
		line := sc.Text()
		if n, ok := strings.CutPrefix(line, "handled "); ok {
			life.handled = append(life.handled, crashParse(t, n))
		} else if n, ok := strings.CutPrefix(line, "loaded "); ok {
			life.loaded = crashParse(t, n)
		}
		return true
	}
	var hung atomic.Bool
	bound := time.AfterFunc(crashLifeBound, func() {
		hung.Store(true)
		_ = cmd.Process.Kill()
	})
	for len(life.handled) < target && scan() {
	}
	bound.Stop()
	if err := cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Fatalf("Kill() = %v", err)
	}
	for scan() { // lines written before the kill landed
	}
	err = cmd.Wait()
	if hung.Load() {
		t.Fatalf("the child handled %d events in %v, want %d\nstderr:\n%s", len(life.handled), crashLifeBound, target, stderr.String())
	}
	if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != -1 {
		t.Fatalf("child ended with %v, want killed by a signal\nstderr:\n%s", err, stderr.String())
	}
	return life
}

func crashParse(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("child wrote %q: %v", s, err)
	}
	return n
}

// TestConcurrencyCrashChild runs in a child process of
// TestConcurrencyCrash: it handles an endless stream with 16 handlers and
// 20 keys, saving to the cursor file named by
// $RESUMABLE_CONCURRENCY_CRASH_CURSOR, until it is killed. It writes
// "loaded N" first, and "handled N" as each handler finishes (one write,
// before the handler returns, so a committed event has always been
// reported).
func TestConcurrencyCrashChild(t *testing.T) {
	path := os.Getenv(crashCursorEnv)
	if path == "" {
		t.Skip("run by TestConcurrencyCrash")
	}
	store, err := cursor.NewFile(path, int64(0), cursor.Int64())
	if err != nil {
		t.Fatal(err)
	}
	loaded, err := store.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fmt.Printf("loaded %d\n", loaded); err != nil {
		return
	}
	endless := stream.SourceFunc[ev, int64](func(_ context.Context, after int64) (stream.Conn[ev], error) {
		next := after
		return recvFunc{recv: func(context.Context) (ev, error) {
			next++
			return ev{Seq: next}, nil
		}}, nil
	})
	r, err := stream.New(endless, extract, store,
		stream.WithConcurrency(crashN), stream.WithWindow(crashWindow),
		stream.WithOrderKey(func(e ev) int { return ccKey(e.Seq, crashKeys) }),
		stream.WithCheckpointEvery(crashCadence))
	if err != nil {
		t.Fatal(err)
	}
	err = r.Run(context.Background(), func(_ context.Context, e ev) error {
		time.Sleep(time.Duration(ccMix(e.Seq) % uint64(300*time.Microsecond)))
		line := append(strconv.AppendInt([]byte("handled "), e.Seq, 10), '\n')
		if _, err := os.Stdout.Write(line); err != nil {
			return err
		}
		return nil
	})
	t.Fatalf("Run() = %v before the kill", err)
}
