package prom

import (
	"regexp"

	"github.com/resumable-go/resumable/stream"
)

// delayBuckets are the bounds, in seconds, of the reconnect delay
// histogram; the 0 bucket counts the reopens that waited nothing (after a
// clean end).
var delayBuckets = []float64{0, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}

// invalidError is the error of a bad option.
type invalidError struct{ msg string }

func (e *invalidError) Error() string        { return e.msg }
func (e *invalidError) Is(target error) bool { return target == stream.ErrInvalidOption }

// namespaceRE is what a metric name prefix may be.
var namespaceRE = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)
