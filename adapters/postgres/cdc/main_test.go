package cdc_test

import (
	"context"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/resumable-go/resumable/adapters/postgres/internal/pgtest"
)

func TestMain(m *testing.M) {
	if os.Getenv(envRelay) != "" { // a relay process of TestStandbyKill
		os.Exit(relayMain())
	}
	goleak.VerifyTestMain(pgtest.Main(m))
}

// deadline bounds every wait of these tests; it guards against a hang and
// is never a timing assertion.
const deadline = 2 * time.Minute

// ctxFor returns a context bounded by deadline and ended with t.
func ctxFor(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), deadline)
	t.Cleanup(cancel)
	return ctx
}

// newDB returns the URL of a database of t's own on the shared server.
func newDB(t testing.TB) string {
	t.Helper()
	return pgtest.Shared(t).CreateDB(t)
}
