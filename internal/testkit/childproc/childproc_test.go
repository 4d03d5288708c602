package childproc_test

import (
	"net"
	"path/filepath"
	"strconv"
	"testing"

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
