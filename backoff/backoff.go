package backoff

import (
	"fmt"
	"time"

	cbackoff "github.com/cenkalti/backoff/v4"
)

// Policy makes delay sequences. Policies are immutable and safe for
// concurrent use; each call to NewSequence returns an independent sequence.
type Policy interface {
	// NewSequence returns a fresh sequence, starting from its first step.
	NewSequence() Sequence
}

// Sequence is one stream's run of delays. It is not safe for concurrent use:
// a stream owns its sequence.
type Sequence interface {
	// Next returns the delay before the next attempt, or ok=false when the
	// policy gives up.
	Next() (delay time.Duration, ok bool)
	// Reset starts the sequence over, as after progress was made.
	Reset()
}

type funcPolicy func() cbackoff.BackOff

func (f funcPolicy) NewSequence() Sequence {
	b := f()
	b.Reset()
	return &cenkaltiSeq{b: b}
}

type cenkaltiSeq struct{ b cbackoff.BackOff }

func (s *cenkaltiSeq) Next() (time.Duration, bool) {
	d := s.b.NextBackOff()
	if d == cbackoff.Stop {
		return 0, false
	}
	if d < 0 {
		d = 0
	}
	return d, true
}

func (s *cenkaltiSeq) Reset() { s.b.Reset() }

// Constant returns a policy that waits d before every attempt and never gives
// up. A negative d counts as zero.
func Constant(d time.Duration) Policy {
	if d < 0 {
		d = 0
	}
	return funcPolicy(func() cbackoff.BackOff { return cbackoff.NewConstantBackOff(d) })
}

// Default returns the policy a stream uses when none is given: jittered
// exponential, starting at 500ms (±50%), growing 1.5× per failure, no step
// above 30s (jitter included), with no limit on attempts or elapsed time.
func Default() Policy { return Exponential() }

// Option configures [Exponential].
type Option interface{ apply(*expConfig) }

type expConfig struct {
	initial, max, maxElapsed time.Duration
	multiplier, jitter       float64
	maxRetries               int
}

type optionFunc func(*expConfig)

func (f optionFunc) apply(c *expConfig) { f(c) }

// WithInitialInterval sets the first delay (before jitter). Default 500ms.
func WithInitialInterval(d time.Duration) Option {
	return optionFunc(func(c *expConfig) { c.initial = d })
}

// WithMaxInterval caps every delay, jitter included (the interval grows up
// to d/(1+jitter)). Default 30s.
func WithMaxInterval(d time.Duration) Option {
	return optionFunc(func(c *expConfig) { c.max = d })
}

// WithMultiplier sets how much the delay grows per failure. Default 1.5; it
// must be at least 1.
func WithMultiplier(m float64) Option {
	return optionFunc(func(c *expConfig) { c.multiplier = m })
}

// WithJitter sets the randomization factor: each delay is drawn uniformly
// from [d·(1−j), d·(1+j)]. Default 0.5; 0 disables jitter; it must be in
// [0, 1].
func WithJitter(j float64) Option {
	return optionFunc(func(c *expConfig) { c.jitter = j })
}

// WithMaxElapsedTime makes the sequence give up once d has passed since its
// start or last reset. Default 0: never.
func WithMaxElapsedTime(d time.Duration) Option {
	return optionFunc(func(c *expConfig) { c.maxElapsed = d })
}

// WithMaxRetries makes the sequence give up after n delays without a reset.
// Default 0: never.
func WithMaxRetries(n int) Option {
	return optionFunc(func(c *expConfig) { c.maxRetries = n })
}

// Exponential returns a jittered exponential policy configured by opts. An
// option out of range gives a policy whose sequences give up at once and
// whose Validate() error, checked by stream.New and the adapters, names it.
func Exponential(opts ...Option) Policy {
	c := expConfig{
		initial:    cbackoff.DefaultInitialInterval,
		max:        30 * time.Second,
		multiplier: cbackoff.DefaultMultiplier,
		jitter:     cbackoff.DefaultRandomizationFactor,
	}
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	if err := c.check(); err != nil {
		return invalid{err: err}
	}
	return &exponential{c: c}
}

func (c *expConfig) check() error {
	switch {
	case c.initial < 0:
		return fmt.Errorf("backoff: initial interval %v is negative", c.initial)
	case c.max < 0:
		return fmt.Errorf("backoff: max interval %v is negative", c.max)
	case c.max < c.initial:
		return fmt.Errorf("backoff: max interval %v is below the initial interval %v", c.max, c.initial)
	case c.multiplier < 1 || c.multiplier != c.multiplier:
		return fmt.Errorf("backoff: multiplier %v is below 1", c.multiplier)
	case c.jitter < 0 || c.jitter > 1 || c.jitter != c.jitter:
		return fmt.Errorf("backoff: jitter %v is outside [0, 1]", c.jitter)
	case c.maxElapsed < 0:
		return fmt.Errorf("backoff: max elapsed time %v is negative", c.maxElapsed)
	case c.maxRetries < 0:
		return fmt.Errorf("backoff: max retries %d is negative", c.maxRetries)
	}
	return nil
}

type invalid struct{ err error }

func (p invalid) NewSequence() Sequence { return stopSeq{} }

// Validate reports the option error; stream.New calls it.
func (p invalid) Validate() error { return p.err }

type stopSeq struct{}

func (stopSeq) Next() (time.Duration, bool) { return 0, false }
func (stopSeq) Reset()                      {}

type exponential struct{ c expConfig }

func (p *exponential) NewSequence() Sequence {
	// The interval stops growing where jitter can take it no higher than
	// the cap.
	limit := time.Duration(float64(p.c.max) / (1 + p.c.jitter))
	b := cbackoff.NewExponentialBackOff(
		cbackoff.WithInitialInterval(min(p.c.initial, limit)),
		cbackoff.WithMaxInterval(limit),
		cbackoff.WithMultiplier(p.c.multiplier),
		cbackoff.WithRandomizationFactor(p.c.jitter),
		cbackoff.WithMaxElapsedTime(p.c.maxElapsed),
	)
	var bo cbackoff.BackOff = b
	if p.c.maxRetries > 0 {
		bo = cbackoff.WithMaxRetries(b, uint64(p.c.maxRetries))
	}
	bo.Reset()
	return &cenkaltiSeq{b: bo}
}
