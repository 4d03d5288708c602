package prom

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
)

// ErrInvalidOption is matched by the error [NewCollector] returns for a bad
// option.
var ErrInvalidOption = errors.New("prom: invalid option")

// Option configures a [Collector]. Options are made by the With functions of
// this package; a nil Option is ignored.
type Option interface {
	apply(*config)
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// DefaultDelayBuckets are the upper bounds, in seconds, of the reconnect
// delay histogram unless [WithDelayBuckets] says otherwise. The 0 bucket
// counts the reopens that waited nothing (after a clean end).
var DefaultDelayBuckets = []float64{0, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}

type config struct {
	namespace string
	buckets   []float64
	errs      []error
}

func (c *config) fail(format string, args ...any) {
	c.errs = append(c.errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidOption}, args...)...))
}

// namespaceRE is what a metric name prefix may be.
var namespaceRE = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)

// WithNamespace sets the prefix of every metric name: ns + "_" + the name.
// Default "resumable"; "" means no prefix. A prefix that is not a valid
// metric name makes NewCollector fail.
func WithNamespace(ns string) Option {
	return optionFunc(func(c *config) {
		if ns != "" && !namespaceRE.MatchString(ns) {
			c.fail("WithNamespace(%q): not a valid metric name prefix", ns)
			return
		}
		c.namespace = ns
	})
}

// WithDelayBuckets sets the upper bounds, in seconds, of the buckets of the
// reconnect delay histogram (the +Inf bucket is implied). Default
// [DefaultDelayBuckets]. Bounds that are not strictly increasing, or none,
// make NewCollector fail.
func WithDelayBuckets(buckets ...float64) Option {
	b := slices.Clone(buckets)
	return optionFunc(func(c *config) {
		if len(b) == 0 {
			c.fail("WithDelayBuckets: no buckets")
			return
		}
		for i := range b {
			if math.IsNaN(b[i]) || i > 0 && !(b[i] > b[i-1]) {
				c.fail("WithDelayBuckets(%v): the bounds are not strictly increasing", b)
				return
			}
		}
		c.buckets = b
	})
}
