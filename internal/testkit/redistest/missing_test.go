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
	tests := []struct {
		name     string
		ci       string
		wantSkip bool
	}{
		{name: "local run skips", ci: "", wantSkip: true},
		{name: "CI fails", ci: "true", wantSkip: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(redistest.EnvBin, filepath.Join(t.TempDir(), "no-redis-server"))
			t.Setenv("CI", tt.ci)
			got := childproc.Record(t, func(tb testing.TB) { redistest.Start(tb) })
			if got.Skipped != tt.wantSkip || got.Failed == tt.wantSkip {
				t.Fatalf("Start: %+v; want skipped: %v", got, tt.wantSkip)
			}
			if !strings.Contains(got.Msg, redistest.InstallCommand) {
				t.Errorf("message %q does not name %q", got.Msg, redistest.InstallCommand)
			}
		})
	}
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
