package cdc_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/resumable-go/resumable/internal/testkit/pgtest"
)

func TestMain(m *testing.M) {
	if os.Getenv(envRelay) != "" { // a relay process of TestStandbyKill
		os.Exit(relayMain())
	}
	goleak.VerifyTestMain(pgtest.Main(m))
}
