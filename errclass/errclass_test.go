package errclass_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/resumable-go/resumable/errclass"
)

var errBase = errors.New("base")

// finalError says it is permanent without importing errclass.
type finalError struct{ final bool }

func (e finalError) Error() string   { return fmt.Sprintf("final=%v", e.final) }
func (e finalError) Permanent() bool { return e.final }

func TestDefault(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want errclass.Decision
	}{
		{name: "nil retries", err: nil, want: errclass.Decision{Action: errclass.Retry}},
		{name: "plain retries", err: errBase, want: errclass.Decision{Action: errclass.Retry}},
		{name: "permanent fails", err: errclass.Permanent(errBase), want: errclass.Decision{Action: errclass.Fail}},
		{name: "wrapped permanent fails", err: fmt.Errorf("open: %w", errclass.Permanent(errBase)), want: errclass.Decision{Action: errclass.Fail}},
		{name: "retry after", err: errclass.RetryAfter(errBase, 3*time.Second), want: errclass.Decision{Action: errclass.Retry, After: 3 * time.Second}},
		{name: "negative retry after is zero", err: errclass.RetryAfter(errBase, -time.Second), want: errclass.Decision{Action: errclass.Retry}},
		{name: "expired", err: errclass.CursorExpired(errBase), want: errclass.Decision{Action: errclass.Expired}},
		{name: "outer marker wins", err: errclass.Permanent(errclass.RetryAfter(errBase, time.Second)), want: errclass.Decision{Action: errclass.Fail}},
		{name: "outer retry-after wins over inner permanent", err: errclass.RetryAfter(errclass.Permanent(errBase), time.Second), want: errclass.Decision{Action: errclass.Retry, After: time.Second}},
		{name: "first of a join wins", err: errors.Join(errBase, errclass.CursorExpired(errBase), errclass.Permanent(errBase)), want: errclass.Decision{Action: errclass.Expired}},
		{name: "Permanent() true fails", err: fmt.Errorf("load: %w", finalError{final: true}), want: errclass.Decision{Action: errclass.Fail}},
		{name: "Permanent() false retries", err: finalError{final: false}, want: errclass.Decision{Action: errclass.Retry}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, errclass.Default().Classify(tt.err)); diff != "" {
				t.Errorf("Default().Classify(%v) (-want +got):\n%s", tt.err, diff)
			}
		})
	}
}

func TestMarkersKeepTheCause(t *testing.T) {
	tests := []struct {
		name        string
		err         error
		wantExpired bool
		wantText    string
	}{
		{name: "permanent", err: errclass.Permanent(errBase), wantText: "base"},
		{name: "retry after", err: errclass.RetryAfter(errBase, time.Second), wantText: "base (retry after 1s)"},
		{name: "expired", err: errclass.CursorExpired(errBase), wantExpired: true, wantText: "base"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !errors.Is(tt.err, errBase) {
				t.Errorf("errors.Is(%v, base) = false, want true", tt.err)
			}
			if got := errors.Is(tt.err, errclass.ErrExpired); got != tt.wantExpired {
				t.Errorf("errors.Is(%v, ErrExpired) = %v, want %v", tt.err, got, tt.wantExpired)
			}
			if got := tt.err.Error(); got != tt.wantText {
				t.Errorf("Error() = %q, want %q", got, tt.wantText)
			}
		})
	}
}

func TestMarkersOfNilAreNil(t *testing.T) {
	if err := errclass.Permanent(nil); err != nil {
		t.Errorf("Permanent(nil) = %v, want nil", err)
	}
	if err := errclass.RetryAfter(nil, time.Second); err != nil {
		t.Errorf("RetryAfter(nil) = %v, want nil", err)
	}
	if err := errclass.CursorExpired(nil); err != nil {
		t.Errorf("CursorExpired(nil) = %v, want nil", err)
	}
}

func TestChain(t *testing.T) {
	errAuth := errors.New("401")
	fail := errclass.Decision{Action: errclass.Fail}
	retry := errclass.Decision{Action: errclass.Retry, After: time.Second}
	tests := []struct {
		name  string
		chain errclass.Classifier
		err   error
		want  errclass.Decision
	}{
		{name: "empty chain is unknown", chain: errclass.Chain(), err: errAuth, want: errclass.Decision{}},
		{name: "nil links are skipped", chain: errclass.Chain(nil, errclass.Is(errAuth, fail), nil), err: errAuth, want: fail},
		{name: "first non-unknown wins", chain: errclass.Chain(errclass.Is(errAuth, fail), always(retry)), err: errAuth, want: fail},
		{name: "falls through unknown", chain: errclass.Chain(errclass.Is(errAuth, fail), always(retry)), err: errBase, want: retry},
		{name: "markers first", chain: errclass.Chain(errclass.Markers(), always(retry)), err: errclass.Permanent(errBase), want: fail},
		{name: "markers say nothing on plain errors", chain: errclass.Chain(errclass.Markers()), err: errBase, want: errclass.Decision{}},
		{name: "as reads the typed error", chain: errclass.Chain(errclass.As(func(e finalError) errclass.Decision { return retry })), err: fmt.Errorf("w: %w", finalError{}), want: retry},
		{name: "as with nil func is unknown", chain: errclass.Chain(errclass.As[finalError](nil)), err: finalError{}, want: errclass.Decision{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.chain.Classify(tt.err)); diff != "" {
				t.Errorf("Classify(%v) (-want +got):\n%s", tt.err, diff)
			}
		})
	}
}

func TestActionAndDecisionStrings(t *testing.T) {
	tests := []struct {
		name string
		got  string
		want string
	}{
		{name: "unknown", got: errclass.Unknown.String(), want: "unknown"},
		{name: "retry", got: errclass.Retry.String(), want: "retry"},
		{name: "fail", got: errclass.Fail.String(), want: "fail"},
		{name: "expired", got: errclass.Expired.String(), want: "expired"},
		{name: "out of range", got: errclass.Action(9).String(), want: "action(9)"},
		{name: "decision with after", got: errclass.Decision{Action: errclass.Retry, After: time.Second}.String(), want: "retry after 1s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("String() = %q, want %q", tt.got, tt.want)
			}
		})
	}
}

// cyclic unwraps to itself: a broken error type must not hang classification.
type cyclic struct{}

func (c *cyclic) Error() string { return "cyclic" }
func (c *cyclic) Unwrap() error { return c }

func TestCyclicErrorDoesNotHang(t *testing.T) {
	got := errclass.Default().Classify(&cyclic{})
	if got.Action != errclass.Retry {
		t.Errorf("Classify(cyclic) = %v, want retry", got)
	}
}

// always returns a classifier that answers d for every error.
func always(d errclass.Decision) errclass.Classifier {
	return errclass.Func(func(error) errclass.Decision { return d })
}
