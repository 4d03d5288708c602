package etcdcluster_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/resumable-go/resumable/internal/testkit/etcdcluster"
	"github.com/resumable-go/resumable/internal/testkit/testbin"
)

// outcome is how a harness call ended a test: skipped or failed, and why.
type outcome struct {
	skipped, failed bool
	msg             string
}

// recorder is a testing.TB whose Skip and Fatal end only the goroutine of
// the call under test, recording how.
type recorder struct {
	testing.TB
	out outcome
}

func (r *recorder) Helper() {}
func (r *recorder) Skip(args ...any) {
	r.out = outcome{skipped: true, msg: fmt.Sprint(args...)}
	runtime.Goexit()
}
func (r *recorder) Skipf(format string, args ...any) { r.Skip(fmt.Sprintf(format, args...)) }
func (r *recorder) Fatalf(format string, args ...any) {
	r.out = outcome{failed: true, msg: fmt.Sprintf(format, args...)}
	runtime.Goexit()
}

// skipIn calls etcdcluster.Skip in a goroutine of its own with r as its test.
func skipIn(t *testing.T) outcome {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		etcdcluster.Skip(r)
	}()
	<-done
	return r.out
}

// TestSkipWithoutBinary: the test-server rule. Without the etcd binary a
// local run skips, naming the command that builds it; with CI set the
// test fails instead (CI never skips). Not opted in, it skips, naming the
// command that runs these tests.
func TestSkipWithoutBinary(t *testing.T) {
	tests := []struct {
		name   string
		optIn  string
		ci     string
		want   outcome
		naming string
	}{
		{name: "local", optIn: "1", ci: "", want: outcome{skipped: true}, naming: testbin.BuildCommand},
		{name: "CI", optIn: "1", ci: "true", want: outcome{failed: true}, naming: testbin.BuildCommand},
		{name: "not opted in", optIn: "", ci: "", want: outcome{skipped: true}, naming: etcdcluster.EnvIntegration + "=1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(etcdcluster.EnvBin, t.TempDir()) // no binaries there
			t.Setenv(etcdcluster.EnvIntegration, tt.optIn)
			t.Setenv("CI", tt.ci)
			got := skipIn(t)
			if got.skipped != tt.want.skipped || got.failed != tt.want.failed || !strings.Contains(got.msg, tt.naming) {
				t.Errorf("Skip() skipped=%v failed=%v %q, want skipped=%v failed=%v naming %q",
					got.skipped, got.failed, got.msg, tt.want.skipped, tt.want.failed, tt.naming)
			}
		})
	}
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
