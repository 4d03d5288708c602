package childproc

import (
	"fmt"
	"runtime"
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
