package redistest_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/resumable-go/resumable/internal/testkit/redistest"
)

// recorder is a testing.TB whose Skipf and Fatalf record the message and
// end the goroutine, as the real ones do.
type recorder struct {
	testing.TB
	skipped, failed string
}

func (r *recorder) Helper() {}

func (r *recorder) Skipf(format string, args ...any) {
	r.skipped = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func (r *recorder) Fatal(args ...any) {
	r.failed = fmt.Sprint(args...)
	runtime.Goexit()
}

// start runs redistest.Start on r in a goroutine of its own (Skipf and
// Fatalf end it) and waits for it.
func start(r *recorder) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		redistest.Start(r)
	}()
	<-done
}

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
			r := &recorder{TB: t}
			start(r)
			msg := r.failed
			if tt.wantSkip {
				msg = r.skipped
			}
			if msg == "" {
				t.Fatalf("Start: skipped %q, failed %q; want skipped: %v", r.skipped, r.failed, tt.wantSkip)
			}
			if !strings.Contains(msg, redistest.InstallCommand) {
				t.Errorf("message %q does not name %q", msg, redistest.InstallCommand)
			}
			if tt.wantSkip && r.failed != "" || !tt.wantSkip && r.skipped != "" {
				t.Errorf("Start: skipped %q, failed %q; want skipped: %v", r.skipped, r.failed, tt.wantSkip)
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
