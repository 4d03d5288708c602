package kubetest_test

import (
	"testing"

	"github.com/resumable-go/resumable/internal/testkit/childproc"
	"github.com/resumable-go/resumable/internal/testkit/kubetest"
	"github.com/resumable-go/resumable/internal/testkit/testbin"
)

// TestStartWithoutBinaries: the test-server rule. Without the binaries a
// local run skips, naming the command that builds them; with CI set the
// test fails instead (CI never skips). Not opted in, it skips, naming the
// command that runs these tests.
func TestStartWithoutBinaries(t *testing.T) {
	t.Setenv(kubetest.EnvBin, t.TempDir()) // no binaries there
	childproc.CheckMissing(t, func(tb testing.TB) { kubetest.Start(tb) }, testbin.BuildCommand, kubetest.EnvIntegration)
}
