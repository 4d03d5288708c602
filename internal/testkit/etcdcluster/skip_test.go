package etcdcluster_test

import (
	"strings"
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
	tests := []struct {
		name   string
		optIn  string
		ci     string
		want   childproc.Outcome
		naming string
	}{
		{name: "local", optIn: "1", ci: "", want: childproc.Outcome{Skipped: true}, naming: testbin.BuildCommand},
		{name: "CI", optIn: "1", ci: "true", want: childproc.Outcome{Failed: true}, naming: testbin.BuildCommand},
		{name: "not opted in", optIn: "", ci: "", want: childproc.Outcome{Skipped: true}, naming: etcdcluster.EnvIntegration + "=1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(etcdcluster.EnvBin, t.TempDir()) // no binaries there
			t.Setenv(etcdcluster.EnvIntegration, tt.optIn)
			t.Setenv("CI", tt.ci)
			got := childproc.Record(t, func(tb testing.TB) { etcdcluster.Skip(tb) })
			if got.Skipped != tt.want.Skipped || got.Failed != tt.want.Failed || !strings.Contains(got.Msg, tt.naming) {
				t.Errorf("Skip() skipped=%v failed=%v %q, want skipped=%v failed=%v naming %q",
					got.Skipped, got.Failed, got.Msg, tt.want.Skipped, tt.want.Failed, tt.naming)
			}
		})
	}
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
