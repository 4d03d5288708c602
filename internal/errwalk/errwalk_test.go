package errwalk_test

import (
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/resumable-go/resumable/internal/errwalk"
)

// loop is an error whose chain comes back to itself.
type loop struct{ next error }

func (l *loop) Error() string { return "loop" }
func (l *loop) Unwrap() error { return l.next }

// fan is an error whose tree branches back to itself twice at every level:
// an unbounded depth-first walk would visit 2^depth errors.
type fan struct{ self error }

func (f *fan) Error() string   { return "fan" }
func (f *fan) Unwrap() []error { return []error{f.self, f.self} }

func TestIs(t *testing.T) {
	cyc := &loop{}
	cyc.next = cyc
	wide := &fan{}
	wide.self = wide
	tests := []struct {
		name   string
		err    error
		target error
		want   bool
	}{
		{name: "nil", err: nil, target: io.EOF, want: false},
		{name: "itself", err: io.EOF, target: io.EOF, want: true},
		{name: "wrapped", err: fmt.Errorf("a: %w", io.EOF), target: io.EOF, want: true},
		{name: "joined", err: errors.Join(errors.New("x"), io.EOF), target: io.EOF, want: true},
		{name: "other", err: errors.New("x"), target: io.EOF, want: false},
		{name: "cycle", err: cyc, target: io.EOF, want: false},
		{name: "exponential fan", err: wide, target: io.EOF, want: false},
		{name: "Is method", err: isEOF{}, target: io.EOF, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := errwalk.Is(tt.err, tt.target); got != tt.want {
				t.Errorf("Is() = %v, want %v", got, tt.want)
			}
		})
	}
}

type isEOF struct{}

func (isEOF) Error() string        { return "eof-like" }
func (isEOF) Is(target error) bool { return target == io.EOF }
