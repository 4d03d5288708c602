package errclass

import (
	"errors"
	"strconv"
	"time"
)

// Action is what a stream does about a failure.
type Action uint8

const (
	// Unknown means the classifier has no opinion; the next classifier in a
	// [Chain] decides, and a stream falls back to [Default].
	Unknown Action = iota
	// Retry reopens the stream after a delay.
	Retry
	// Fail ends the stream and returns the error.
	Fail
	// Expired means the cursor can no longer be resumed from: the stream
	// resynchronises if it has a resync hook, or returns the error.
	Expired
)

// String returns the action's lower-case name.
func (a Action) String() string {
	switch a {
	case Unknown:
		return "unknown"
	case Retry:
		return "retry"
	case Fail:
		return "fail"
	case Expired:
		return "expired"
	}
	return "action(" + strconv.Itoa(int(a)) + ")"
}

// Decision is a classifier's verdict on one error.
type Decision struct {
	// Action says what to do.
	Action Action
	// After is the least delay the server asked for before the next attempt.
	After time.Duration
}

// Classifier decides what an error means. Implementations must be safe for
// concurrent use, must not block, and must handle any error, including
// wrapped and joined ones; they are never called with nil by a stream.
type Classifier interface {
	Classify(err error) Decision
}

// Func adapts a function to a [Classifier].
type Func func(err error) Decision

// Classify calls f(err).
func (f Func) Classify(err error) Decision { return f(err) }

// Chain returns a Classifier that asks each of cs in turn (nils skipped) and
// returns the first decision that is not [Unknown], or an Unknown one.
func Chain(cs ...Classifier) Classifier {
	kept := make(chain, 0, len(cs))
	for _, c := range cs {
		if c != nil {
			kept = append(kept, c)
		}
	}
	return kept
}

type chain []Classifier

func (ch chain) Classify(err error) Decision {
	for _, c := range ch {
		if d := c.Classify(err); d.Action != Unknown {
			return d
		}
	}
	return Decision{}
}

// Default returns the classifier a stream uses when none is given or yours
// answers [Unknown]: the markers decide (see the package doc); any other
// error, nil included, is retried.
func Default() Classifier { return defaultClassifier{} }

type defaultClassifier struct{}

func (defaultClassifier) Classify(err error) Decision {
	if d := classifyMarkers(err); d.Action != Unknown {
		return d
	}
	return Decision{Action: Retry}
}

// Markers returns a classifier that decides for marked errors as [Default]
// does and answers [Unknown] for the rest, for use inside a [Chain].
func Markers() Classifier { return Func(classifyMarkers) }

// Is returns a classifier that answers d for every error that errors.Is
// target, and [Unknown] for the rest.
func Is(target error, d Decision) Classifier {
	return Func(func(err error) Decision {
		if errors.Is(err, target) {
			return d
		}
		return Decision{}
	})
}

// As returns a classifier that calls decide with the first error of type E
// in err's tree (as errors.As finds it), such as a [*StatusError], and
// answers [Unknown] when there is none.
func As[E error](decide func(E) Decision) Classifier {
	return Func(func(err error) Decision {
		var target E
		if decide != nil && errors.As(err, &target) {
			return decide(target)
		}
		return Decision{}
	})
}
