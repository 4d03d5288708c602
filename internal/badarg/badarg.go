// Package badarg builds the one error every constructor and option of
// resumable returns for a bad argument: it matches stream.ErrInvalidOption
// with errors.Is and names where it was given, the argument and its value.
//
//	badarg.New("redis: NewSource", "key", "", "must not be empty")
//	// redis: NewSource: key = "": must not be empty
//
// An adapter that keeps a sentinel of its own (postgres.ErrInvalid) sets
// [Error.Mark] so that the error matches both.
package badarg

import (
	"errors"
	"fmt"
	"reflect"

	"github.com/resumable-go/resumable/stream"
)

// Error is a bad argument. Its message is "Where: Arg = Value: Why"; it
// matches stream.ErrInvalidOption and, when set, Mark.
type Error struct {
	Where string // the package and the call or option: "redis: NewSource", "k8s: WithPollInterval"
	Arg   string // the argument's name: "key", "d"
	Value any    // the value given; strings are quoted, nil shows as nil
	Why   string // what was wrong with it: "must be positive"
	Mark  error  // another sentinel the error matches, or nil
}

// New returns an [*Error] for the argument arg of where, given value.
func New(where, arg string, value any, why string) error {
	return &Error{Where: where, Arg: arg, Value: value, Why: why}
}

// Error implements error.
func (e *Error) Error() string {
	return fmt.Sprintf("%s: %s = %s: %s", e.Where, e.Arg, show(e.Value), e.Why)
}

// Is reports whether target is stream.ErrInvalidOption or the Mark.
func (e *Error) Is(target error) bool {
	return target == stream.ErrInvalidOption || (e.Mark != nil && errors.Is(e.Mark, target))
}

// show formats a value for a message: strings quoted, nil (or a nil
// pointer, map, slice, func, chan or interface) as nil.
func show(v any) string {
	switch x := v.(type) {
	case nil:
		return "nil"
	case string:
		return fmt.Sprintf("%q", x)
	case fmt.Stringer:
		if isNil(v) {
			return "nil"
		}
		return x.String()
	}
	if isNil(v) {
		return "nil"
	}
	return fmt.Sprintf("%v", v)
}

func isNil(v any) bool {
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan, reflect.Interface:
		return rv.IsNil()
	}
	return false
}
