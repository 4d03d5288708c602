package prom

import (
	"fmt"
	"math"
	"regexp"
	"slices"

	"github.com/resumable-go/resumable/stream"
)

// Option configures a [Collector]. Options are made by the With functions of
// this package; a nil Option is ignored.
type Option interface {
	apply(*config)
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// defaultDelayBuckets are the bounds of the reconnect delay histogram
// unless [WithDelayBuckets] says otherwise.
var defaultDelayBuckets = []float64{0, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}

type config struct {
	namespace string
	buckets   []float64
	errs      []error
}

// fail records a bad option: an error that reads "prom: " + the message
// and matches [stream.ErrInvalidOption].
func (c *config) fail(format string, args ...any) {
	c.errs = append(c.errs, &invalidError{msg: "prom: " + fmt.Sprintf(format, args...)})
}

// invalidError is the error of a bad option.
type invalidError struct{ msg string }

func (e *invalidError) Error() string        { return e.msg }
func (e *invalidError) Is(target error) bool { return target == stream.ErrInvalidOption }

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
// reconnect delay histogram (the +Inf bucket is implied). Default 0, 0.1,
// 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300 and 600; the 0 bucket counts
// the reopens that waited nothing (after a clean end). Bounds that are not
// strictly increasing, or none, make NewCollector fail.
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
