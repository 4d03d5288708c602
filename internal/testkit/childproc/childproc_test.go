package childproc_test

import (
	"net"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/resumable-go/resumable/internal/testkit/childproc"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestBinDir(t *testing.T) {
	t.Setenv(childproc.EnvBin, "")
	t.Setenv(childproc.EnvCache, "/cache")
	if got, want := childproc.BinDir("k8s-v1"), filepath.Join("/cache", "k8s-v1"); got != want {
		t.Errorf("BinDir() with %s = %q, want %q", childproc.EnvCache, got, want)
	}
	t.Setenv(childproc.EnvBin, "/bin/here")
	if got := childproc.BinDir("k8s-v1"); got != "/bin/here" {
		t.Errorf("BinDir() with %s = %q, want /bin/here", childproc.EnvBin, got)
	}
}

// FreePorts returns distinct ports, and has let go of each: a server can
// listen on every one of them.
func TestFreePorts(t *testing.T) {
	ports, err := childproc.FreePorts(5)
	if err != nil {
		t.Fatalf("FreePorts(5) = %v", err)
	}
	if len(ports) != 5 {
		t.Fatalf("FreePorts(5) returned %d ports, want 5", len(ports))
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if p <= 0 || seen[p] {
			t.Fatalf("FreePorts(5) = %v, want 5 distinct ports", ports)
		}
		seen[p] = true
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			t.Fatalf("listening on port %d from FreePorts: %v", p, err)
		}
		l.Close()
	}
}

// A child is stopped and continued, then ends on SIGTERM within the grace,
// and its output is in its file.
func TestProcLifecycle(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("childproc: process groups and /proc states are Linux's")
	}
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
