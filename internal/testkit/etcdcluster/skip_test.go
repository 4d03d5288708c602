package etcdcluster_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/resumable-go/resumable/internal/testkit/childproc"
	"github.com/resumable-go/resumable/internal/testkit/etcdcluster"
	"github.com/resumable-go/resumable/internal/testkit/testbin"
)

// TestSkipWithoutBinary: the test-server rule. Without the etcd binary a
// local run skips, naming the command that builds it; with CI set the
// test fails instead (CI never skips). Not opted in, it skips, naming the
// command that runs these tests.
func TestSkipWithoutBinary(t *testing.T) {
	t.Setenv(etcdcluster.EnvBin, t.TempDir()) // no binaries there
	childproc.CheckMissing(t, func(tb testing.TB) { etcdcluster.Skip(tb) }, testbin.BuildCommand, etcdcluster.EnvIntegration)
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
