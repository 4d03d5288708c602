//go:build linux

package childproc_test

import (
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/resumable-go/resumable/internal/testkit/childproc"
)

// Process groups, SIGSTOP and /proc states are Linux's.

// A child is stopped and continued, then ends on SIGTERM within the grace,
// and its output is in its file.
func TestProcLifecycle(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skipf("childproc: no sh: %v", err)
	}
	out := filepath.Join(t.TempDir(), "child.log")
	p, err := childproc.Start("child", sh, []string{"-c", "echo started; exec sleep 60"}, out, out)
	if err != nil {
		t.Fatalf("Start() = %v", err)
	}
	defer p.Kill()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(childproc.Tail(out, 1), "started") {
		if time.Now().After(deadline) {
			t.Fatalf("the child wrote %q, want started", childproc.Tail(out, 1))
		}
		time.Sleep(10 * time.Millisecond) // polling a file the child writes
	}
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		t.Fatalf("Signal(SIGSTOP) = %v", err)
	}
	if err := p.AwaitStopped(30 * time.Second); err != nil {
		t.Fatalf("AwaitStopped() = %v", err)
	}
	if err := p.Signal(syscall.SIGCONT); err != nil {
		t.Fatalf("Signal(SIGCONT) = %v", err)
	}
	if graceful, err := p.Stop(syscall.SIGTERM, 30*time.Second); err != nil || !graceful {
		t.Fatalf("Stop(SIGTERM) = %v, %v, want a graceful end", graceful, err)
	}
	if exited, _ := p.Exited(); !exited {
		t.Error("Exited() = false after Stop, want true")
	}
}
