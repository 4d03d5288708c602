package redistest_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/resumable-go/resumable/internal/testkit/childproc"
	"github.com/resumable-go/resumable/internal/testkit/redistest"
)

// TestMissingBinary: without the binary, a local run skips naming the one
// install command, and a run with CI set fails.
func TestMissingBinary(t *testing.T) {
	t.Setenv(redistest.EnvBin, filepath.Join(t.TempDir(), "no-redis-server"))
	childproc.CheckMissing(t, func(tb testing.TB) { redistest.Start(tb) }, redistest.InstallCommand, "")
}

// TestBinFindsTheServer: Bin returns $RESUMABLE_REDIS_SERVER when it
// exists, and an error matching ErrNoBinary when it does not.
func TestBinFindsTheServer(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-redis-server")
	t.Setenv(redistest.EnvBin, missing)
	if _, err := redistest.Bin(); !errors.Is(err, redistest.ErrNoBinary) || !strings.Contains(err.Error(), missing) {
		t.Errorf("Bin() = %v, want an error matching ErrNoBinary naming %s", err, missing)
	}
	self, err := filepath.Abs("missing_test.go") // any file that exists
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(redistest.EnvBin, self)
	if got, err := redistest.Bin(); err != nil || got != self {
		t.Errorf("Bin() = %q, %v; want %q", got, err, self)
	}
}
