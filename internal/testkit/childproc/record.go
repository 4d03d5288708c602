package childproc

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// Outcome is how a call ended the test it was given: skipped or failed,
// with the message (both false: it returned).
type Outcome struct {
	Skipped, Failed bool
	Msg             string
}

// Record calls f on a goroutine of its own with a testing.TB whose Skip
// and Fatal families record how f ended the test and end only that
// goroutine, as the real ones do, and returns the outcome once f returned
// or ended. The harnesses' tests of the Missing rule run through it.
func Record(t testing.TB, f func(testing.TB)) Outcome {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	return r.out
}

// recorder is Record's testing.TB.
type recorder struct {
	testing.TB
	out Outcome
}

func (r *recorder) Helper() {}

func (r *recorder) Skip(args ...any) { r.end(Outcome{Skipped: true, Msg: fmt.Sprint(args...)}) }

func (r *recorder) Skipf(format string, args ...any) {
	r.end(Outcome{Skipped: true, Msg: fmt.Sprintf(format, args...)})
}

func (r *recorder) Fatal(args ...any) { r.end(Outcome{Failed: true, Msg: fmt.Sprint(args...)}) }

func (r *recorder) Fatalf(format string, args ...any) {
	r.end(Outcome{Failed: true, Msg: fmt.Sprintf(format, args...)})
}

func (r *recorder) end(o Outcome) {
	r.out = o
	runtime.Goexit()
}

// CheckMissing checks the Missing rule on call, which the caller set up to
// find no binary: a local run skips and a run with CI set fails, both
// naming hint (the command that provides the binary). With optIn, the
// name of the variable that opts a package's tests in, those two runs are
// opted in, and a run not opted in must skip naming optIn=1.
func CheckMissing(t *testing.T, call func(testing.TB), hint, optIn string) {
	t.Helper()
	type rule struct {
		name, optIn, ci string
		skip            bool
		naming          string
	}
	tests := []rule{
		{name: "local run skips", optIn: "1", skip: true, naming: hint},
		{name: "CI fails", optIn: "1", ci: "true", naming: hint},
	}
	if optIn != "" {
		tests = append(tests, rule{name: "not opted in skips", skip: true, naming: optIn + "=1"})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if optIn != "" {
				t.Setenv(optIn, tt.optIn)
			}
			t.Setenv("CI", tt.ci)
			got := Record(t, call)
			if got.Skipped != tt.skip || got.Failed == tt.skip || !strings.Contains(got.Msg, tt.naming) {
				t.Errorf("got skipped=%v failed=%v %q, want skipped=%v failed=%v naming %q",
					got.Skipped, got.Failed, got.Msg, tt.skip, !tt.skip, tt.naming)
			}
		})
	}
}
