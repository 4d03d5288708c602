//go:build linux

package deadletter_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/resumable-go/resumable/deadletter"
	"github.com/resumable-go/resumable/stream/streamtest"
)

// fsizeEnv tells TestWriteFailureChild, run by TestWriteFailure in a child
// process, the dead-letter file to fill.
const fsizeEnv = "DEADLETTER_FSIZE_CHILD_PATH"

// fsizeLimit is the child's file size limit (RLIMIT_FSIZE): a few records
// fit, and the write of the next one stops part way.
const fsizeLimit = 1000

// TestWriteFailure fills a dead-letter file in a child process whose file
// size limit makes a write stop part way (EFBIG after a short write), as a
// full disk would: that Park fails, every later one fails with the same
// cause, the torn line left behind is skipped by Read and cut by the next
// Open, and the records parked before are intact.
func TestWriteFailure(t *testing.T) {
	path := filepath.Join(t.TempDir(), "parked.jsonl")
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestWriteFailureChild$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), fsizeEnv+"="+path)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("child: %v; output:\n%s", err, out.String())
	}
	parked := -1
	for _, line := range strings.Split(out.String(), "\n") {
		if n, ok := strings.CutPrefix(line, "parked "); ok {
			parked, _ = strconv.Atoi(n)
		}
	}
	if parked < 1 {
		t.Fatalf("child output lacks a count of parked events, want one ≥ 1:\n%s", out.String())
	}

	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) != fsizeLimit || data[len(data)-1] == '\n' {
		t.Fatalf("the file holds %d bytes ending in %q, want %d ending in a torn line (the fault did not fire)",
			len(data), data[len(data)-1:], fsizeLimit)
	}
	recs := mustReadAll(t, path)
	if len(recs) != parked {
		t.Fatalf("Read() = %d records, want the %d parked before the failure", len(recs), parked)
	}
	for i, r := range recs {
		if r.Cursor != int64(i+1) {
			t.Errorf("record %d has cursor %d, want %d", i, r.Cursor, i+1)
		}
	}

	f := mustOpen(t, path)
	mustPark(t, f, event{Seq: 99, Value: "after the repair"}, errors.New("x"))
	mustClose(t, f)
	recs = mustReadAll(t, path)
	if len(recs) != parked+1 || recs[parked].Cursor != 99 {
		t.Errorf("after reopening, Read() = %d records ending at %d, want %d ending at 99", len(recs), recs[len(recs)-1].Cursor, parked+1)
	}
}

// TestWriteFailureChild runs in a child process of TestWriteFailure: it
// parks events under a small file size limit until a Park fails, checks
// that the next one fails with the same cause, and prints how many it
// parked.
func TestWriteFailureChild(t *testing.T) {
	path := os.Getenv(fsizeEnv)
	if path == "" {
		t.Skip("run by TestWriteFailure")
	}
	f, err := deadletter.Open(path, streamtest.Extract[string])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		t.Fatal(err)
	}
	lim.Cur = fsizeLimit // the Go runtime ignores SIGXFSZ: the write fails with EFBIG
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		t.Fatal(err)
	}
	parked := 0
	for seq := int64(1); ; seq++ {
		err := f.Park(context.Background(), event{Seq: seq, Value: strings.Repeat("v", 50)}, errors.New("poison"))
		if err != nil {
			if !errors.Is(err, syscall.EFBIG) {
				t.Fatalf("Park(%d) = %v, want an error matching EFBIG", seq, err)
			}
			break
		}
		parked++
	}
	err = f.Park(context.Background(), event{Seq: 100, Value: "tiny"}, errors.New("poison"))
	if !errors.Is(err, syscall.EFBIG) || !strings.Contains(err.Error(), "an earlier write failed") {
		t.Fatalf("Park after a failed write = %v, want the earlier EFBIG", err)
	}
	fmt.Printf("parked %d\n", parked)
}
