package backoff_test

import (
	"fmt"
	"time"

	"github.com/resumable-go/resumable/backoff"
)

// Each stream takes its own sequence from a shared policy.
func ExampleExponential() {
	p := backoff.Exponential(
		backoff.WithInitialInterval(100*time.Millisecond),
		backoff.WithMaxInterval(time.Second),
		backoff.WithMultiplier(2),
		backoff.WithJitter(0), // deterministic for the example
	)
	s := p.NewSequence()
	var delays []time.Duration
	for range 6 {
		d, _ := s.Next()
		delays = append(delays, d)
	}
	fmt.Println(delays)
	s.Reset() // a connection made progress
	d, _ := s.Next()
	fmt.Println(d)
	// Output:
	// [100ms 200ms 400ms 800ms 1s 1s]
	// 100ms
}
