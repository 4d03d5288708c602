package badarg_test

import (
	"errors"
	"testing"
	"time"

	"github.com/resumable-go/resumable/internal/badarg"
	"github.com/resumable-go/resumable/stream"
)

var errMine = errors.New("mine: invalid")

func TestError(t *testing.T) {
	var nilPtr *int
	tests := []struct {
		name string
		err  error
		want string
		mark error
	}{
		{name: "string", err: badarg.New("redis: NewSource", "key", "", "must not be empty"), want: `redis: NewSource: key = "": must not be empty`},
		{name: "nil", err: badarg.New("etcd: NewSource", "client", nil, "required"), want: "etcd: NewSource: client = nil: required"},
		{name: "nil pointer", err: badarg.New("etcd: NewSource", "client", nilPtr, "required"), want: "etcd: NewSource: client = nil: required"},
		{name: "duration", err: badarg.New("k8s: WithPollInterval", "d", -time.Second, "must be positive"), want: "k8s: WithPollInterval: d = -1s: must be positive"},
		{name: "marked", err: &badarg.Error{Where: "postgres: NewStore", Arg: "table", Value: "a b", Why: "not an identifier", Mark: errMine}, want: `postgres: NewStore: table = "a b": not an identifier`, mark: errMine},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.err.Error(); got != tt.want {
				t.Errorf("Error() = %q, want %q", got, tt.want)
			}
			if !errors.Is(tt.err, stream.ErrInvalidOption) {
				t.Errorf("errors.Is(%v, stream.ErrInvalidOption) = false, want true", tt.err)
			}
			if tt.mark != nil && !errors.Is(tt.err, tt.mark) {
				t.Errorf("errors.Is(%v, mark) = false, want true", tt.err)
			}
			if errors.Is(tt.err, stream.ErrSourceChanged) {
				t.Errorf("errors.Is(%v, stream.ErrSourceChanged) = true, want false", tt.err)
			}
		})
	}
	joined := errors.Join(badarg.New("a", "b", 1, "c"), badarg.New("a", "d", 2, "e"))
	if !errors.Is(joined, stream.ErrInvalidOption) {
		t.Errorf("errors.Is(joined, stream.ErrInvalidOption) = false, want true")
	}
}
