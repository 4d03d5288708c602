package backoff_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/resumable-go/resumable/backoff"
)

// steps draws n delays, stopping early when the sequence gives up.
func steps(s backoff.Sequence, n int) (out []time.Duration, gaveUp bool) {
	for range n {
		d, ok := s.Next()
		if !ok {
			return out, true
		}
		out = append(out, d)
	}
	return out, false
}

func TestConstantAndNone(t *testing.T) {
	tests := []struct {
		name   string
		policy backoff.Policy
		want   time.Duration
	}{
		{name: "constant", policy: backoff.Constant(3 * time.Second), want: 3 * time.Second},
		{name: "negative constant is zero", policy: backoff.Constant(-time.Second), want: 0},
		{name: "none", policy: backoff.Constant(0), want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, gaveUp := steps(tt.policy.NewSequence(), 50)
			if gaveUp || len(got) != 50 {
				t.Fatalf("gave up after %d steps, want never", len(got))
			}
			for i, d := range got {
				if d != tt.want {
					t.Fatalf("step %d = %v, want %v", i, d, tt.want)
				}
			}
		})
	}
}

func TestExponentialGrowsWithinBoundsAndNeverGivesUp(t *testing.T) {
	p := backoff.Exponential(
		backoff.WithInitialInterval(10*time.Millisecond),
		backoff.WithMaxInterval(80*time.Millisecond),
		backoff.WithMultiplier(2),
		backoff.WithJitter(0),
	)
	got, gaveUp := steps(p.NewSequence(), 200)
	if gaveUp {
		t.Fatal("exponential gave up, want never")
	}
	want := []time.Duration{10, 20, 40, 80, 80}
	for i, w := range want {
		if got[i] != w*time.Millisecond {
			t.Errorf("step %d = %v, want %v", i, got[i], w*time.Millisecond)
		}
	}
	if last := got[len(got)-1]; last != 80*time.Millisecond {
		t.Errorf("step 200 = %v, want the cap 80ms", last)
	}
}

func TestDefaultIsJitteredAndCapped(t *testing.T) {
	got, gaveUp := steps(backoff.Default().NewSequence(), 100)
	if gaveUp {
		t.Fatal("Default gave up, want never")
	}
	if first := got[0]; first < 250*time.Millisecond || first >= time.Second {
		t.Errorf("first step = %v, want in [250ms, 1s)", first)
	}
	for i, d := range got {
		if d > 30*time.Second { // the cap holds with jitter
			t.Errorf("step %d = %v, want at most 30s", i, d)
		}
	}
	// At the cap, jitter still spreads the steps: [10s, 30s] for ±50%.
	lo, hi := got[len(got)-1], got[len(got)-1]
	for _, d := range got[50:] {
		lo, hi = min(lo, d), max(hi, d)
	}
	if lo >= 20*time.Second || hi <= 20*time.Second {
		t.Errorf("steps 50-100 within [%v, %v], want spread across 20s", lo, hi)
	}
}

func TestExponentialLimits(t *testing.T) {
	p := backoff.Exponential(backoff.WithInitialInterval(time.Millisecond), backoff.WithMaxRetries(3))
	s := p.NewSequence()
	got, gaveUp := steps(s, 10)
	if !gaveUp || len(got) != 3 {
		t.Fatalf("got %d steps, gave up %v; want 3 then give up", len(got), gaveUp)
	}
	s.Reset()
	if got, _ := steps(s, 10); len(got) != 3 {
		t.Errorf("after Reset got %d steps, want 3", len(got))
	}
}

func TestExponentialRejectsBadOptions(t *testing.T) {
	tests := []struct {
		name string
		opt  backoff.Option
	}{
		{name: "negative initial", opt: backoff.WithInitialInterval(-time.Second)},
		{name: "negative max", opt: backoff.WithMaxInterval(-time.Second)},
		{name: "max below initial", opt: backoff.WithMaxInterval(time.Millisecond)},
		{name: "multiplier below 1", opt: backoff.WithMultiplier(0.5)},
		{name: "jitter above 1", opt: backoff.WithJitter(1.5)},
		{name: "negative jitter", opt: backoff.WithJitter(-0.1)},
		{name: "negative elapsed", opt: backoff.WithMaxElapsedTime(-time.Second)},
		{name: "negative retries", opt: backoff.WithMaxRetries(-1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := backoff.Exponential(tt.opt)
			v, ok := p.(interface{ Validate() error }) // what stream.New checks
			if !ok {
				t.Fatal("Exponential() has no Validate method, want one reporting the bad option")
			}
			if err := v.Validate(); err == nil || !strings.HasPrefix(err.Error(), "backoff: ") {
				t.Errorf("Validate() = %v, want an error prefixed \"backoff: \"", err)
			}
			if _, ok := p.NewSequence().Next(); ok {
				t.Error("an invalid policy's sequence went on, want it to give up at once")
			}
		})
	}
}

// Each sequence is independent, so one policy can serve many streams
// concurrently (run with -race).
func TestSequencesAreIndependent(t *testing.T) {
	p := backoff.Exponential(backoff.WithInitialInterval(time.Millisecond), backoff.WithJitter(0), backoff.WithMultiplier(2))
	var wg sync.WaitGroup
	results := make([][]time.Duration, 8)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], _ = steps(p.NewSequence(), 5)
		}()
	}
	wg.Wait()
	for i, r := range results {
		if r[0] != time.Millisecond || r[4] != 16*time.Millisecond {
			t.Errorf("sequence %d = %v, want to start at 1ms and reach 16ms", i, r)
		}
	}
}
