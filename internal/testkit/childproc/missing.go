package childproc

import (
	"os"
	"testing"
)

// Missing ends a test whose server binary is missing, by the one rule of
// every harness here: with CI set (.ci/run sets it) it fails, for CI never
// skips; otherwise it skips. reason says what is missing and names the one
// command that installs or builds it.
func Missing(t testing.TB, reason string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("%s (CI is set: a test server is never skipped there)", reason)
	}
	t.Skipf("%s (CI unset: skipping)", reason)
}
