package kubetest_test

import (
	"strings"
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
	tests := []struct {
		name   string
		optIn  string
		ci     string
		want   childproc.Outcome
		naming string
	}{
		{name: "local", optIn: "1", ci: "", want: childproc.Outcome{Skipped: true}, naming: testbin.BuildCommand},
		{name: "CI", optIn: "1", ci: "true", want: childproc.Outcome{Failed: true}, naming: testbin.BuildCommand},
		{name: "not opted in", optIn: "", ci: "", want: childproc.Outcome{Skipped: true}, naming: kubetest.EnvIntegration + "=1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(kubetest.EnvBin, t.TempDir()) // no binaries there
			t.Setenv(kubetest.EnvIntegration, tt.optIn)
			t.Setenv("CI", tt.ci)
			got := childproc.Record(t, func(tb testing.TB) { kubetest.Start(tb) })
			if got.Skipped != tt.want.Skipped || got.Failed != tt.want.Failed || !strings.Contains(got.Msg, tt.naming) {
				t.Errorf("Start() skipped=%v failed=%v %q, want skipped=%v failed=%v naming %q",
					got.Skipped, got.Failed, got.Msg, tt.want.Skipped, tt.want.Failed, tt.naming)
			}
		})
	}
}
