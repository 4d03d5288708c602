package cursor_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/resumable-go/resumable/cursor"
)

const (
	// crashPathEnv tells TestCrashChild, run by TestCrash in a child
	// process, the cursor file to save to.
	crashPathEnv = "CURSOR_CRASH_CHILD_PATH"
	// crashSeedEnv repeats a TestCrash run when set to the seed it logged.
	crashSeedEnv = "CURSOR_CRASH_SEED"
)

// TestCrash kills a process that saves cursors to a File store, at random
// moments, and checks after each kill that the file holds a valid cursor,
// no older than the last one whose Save had returned. A kill is not a power
// loss (the kernel keeps what was written), so this proves the atomicity of
// Save against torn and half-written files; durability rests on the syncs.
func TestCrash(t *testing.T) {
	switch runtime.GOOS {
	case "windows", "plan9", "js", "wasip1", "ios", "android":
		t.Skipf("no SIGKILL or no subprocesses on %s", runtime.GOOS)
	}
	kills := 100
	if testing.Short() {
		kills = 20
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv(crashSeedEnv); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("%s=%q: %v", crashSeedEnv, s, err)
		}
	}
	t.Logf("seed %d (set %s to repeat)", seed, crashSeedEnv)
	rng := rand.New(rand.NewPCG(seed, seed))

	dir := t.TempDir()
	path := filepath.Join(dir, "cursor")
	var durable int64 // the highest cursor a child reported durable
	var saves int
	start := time.Now()
	for kill := range kills {
		lines := rng.IntN(12) // lines to read before the kill; 0 kills during start-up
		run := runChild(t, path, lines)
		if run.loaded >= 0 && run.loaded != durable {
			t.Fatalf("kill %d (seed %d): the child loaded %d, want %d", kill, seed, run.loaded, durable)
		}
		if run.durable > durable {
			saves += int(run.durable - durable)
			durable = run.durable
		}

		f, err := cursor.NewFile(path, int64(0), cursor.Int64())
		if err != nil {
			t.Fatalf("kill %d (seed %d): NewFile() = %v", kill, seed, err)
		}
		got, err := f.Load(context.Background())
		if err != nil {
			t.Fatalf("kill %d (seed %d) after %d lines: Load() = %v, want a cursor ≥ %d", kill, seed, lines, err, durable)
		}
		// The file holds the last durable cursor, or the next one when the
		// kill came between Save returning and the line being written.
		if got != durable && got != durable+1 {
			t.Fatalf("kill %d (seed %d) after %d lines: Load() = %d, want %d or %d", kill, seed, lines, got, durable, durable+1)
		}
		durable = got
	}
	t.Logf("%d kills in %v, %d saves reported durable, last cursor %d, %d temporary files left by kills",
		kills, time.Since(start).Round(time.Millisecond), saves, durable, len(tempFiles(t, dir)))
}

// childRun is what a killed child reported.
type childRun struct {
	loaded  int64 // the cursor it loaded; -1 if it did not report one
	durable int64 // the last cursor it reported durable; -1 if none
}

// runChild starts TestCrashChild on path, reads lines "durable N" lines
// from it, kills it with SIGKILL and reads what it wrote before it died.
func runChild(t *testing.T, path string, lines int) childRun {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashPathEnv+"="+path)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	run := childRun{loaded: -1, durable: -1}
	var out strings.Builder
	sc := bufio.NewScanner(stdout)
	scan := func() bool {
		if !sc.Scan() {
			return false
		}
		line := sc.Text()
		fmt.Fprintln(&out, line)
		if n, ok := strings.CutPrefix(line, "durable "); ok {
			run.durable = mustParseInt(t, n)
		} else if n, ok := strings.CutPrefix(line, "loaded "); ok {
			run.loaded = mustParseInt(t, n)
		}
		return true
	}
	for read := 0; read < lines && scan(); {
		if strings.HasPrefix(sc.Text(), "durable ") {
			read++
		}
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatalf("Kill() = %v", err)
	}
	for scan() { // lines written before the kill landed
	}
	err = cmd.Wait()
	if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != -1 {
		t.Fatalf("child ended with %v, want killed by a signal\nstdout:\n%s\nstderr:\n%s", err, out.String(), stderr.String())
	}
	return run
}

func mustParseInt(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("child wrote %q: %v", s, err)
	}
	return n
}

// TestCrashChild runs in a child process of TestCrash: it saves increasing
// cursors to the file named by $CURSOR_CRASH_CHILD_PATH until it is killed,
// and writes "durable N" after each Save of N returned.
func TestCrashChild(t *testing.T) {
	path := os.Getenv(crashPathEnv)
	if path == "" {
		t.Skip("run by TestCrash")
	}
	f := mustNewFile(t, path, int64(0), cursor.Int64())
	n := mustLoad(t, f)
	if _, err := fmt.Printf("loaded %d\n", n); err != nil {
		return
	}
	for range 1_000_000 { // a bound in case nobody kills it
		n++
		mustSave(t, f, n)
		if _, err := fmt.Printf("durable %d\n", n); err != nil {
			return // the parent is gone
		}
	}
	t.Fatal("not killed")
}
