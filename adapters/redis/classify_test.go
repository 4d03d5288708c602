package redis_test

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/resumable-go/resumable/adapters/redis"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/errclass"
)

// serverError is an error as go-redis reports a server's error reply.
type serverError string

func (e serverError) Error() string { return string(e) }
func (serverError) RedisError()     {}

func TestClassify(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want errclass.Action
	}{
		{name: "wrong type", err: serverError("WRONGTYPE Operation against a key holding the wrong kind of value"), want: errclass.Fail},
		{name: "no permission", err: serverError("NOPERM User has no permissions to run the 'xread' command"), want: errclass.Fail},
		{name: "wrong password", err: serverError("WRONGPASS invalid username-password pair"), want: errclass.Fail},
		{name: "invalid ID", err: serverError("ERR Invalid stream ID specified as stream command argument"), want: errclass.Fail},
		{name: "loading", err: serverError("LOADING Redis is loading the dataset in memory"), want: errclass.Retry},
		{name: "busy", err: serverError("BUSY Redis is busy running a script"), want: errclass.Retry},
		{name: "try again", err: serverError("TRYAGAIN Multiple keys request during rehashing of slot"), want: errclass.Retry},
		{name: "connection refused", err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, want: errclass.Retry},
		{name: "connection reset", err: &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}, want: errclass.Retry},
		{name: "closed by the server", err: io.EOF, want: errclass.Retry},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := redis.Classify("XREAD s", tt.err)
			if got := errclass.Default().Classify(err).Action; got != tt.want {
				t.Errorf("Classify(%v) = %v, want %v", tt.err, got, tt.want)
			}
			if errors.Is(err, io.EOF) {
				t.Errorf("Classify(%v) matches io.EOF, which a Conn returns only for a clean end", tt.err)
			}
		})
	}
}

// TestWrongType: a key that holds no stream stops Run at once.
func TestWrongType(t *testing.T) {
	_, rdb := server(t)
	rdb.Set(context.Background(), "s", "v", 0)
	src, _ := redis.NewSource(rdb, "s")
	r, _ := redis.NewResumer(src, cursor.NewMemory(""))
	if err := r.Run(t.Context(), func(context.Context, redis.Entry) error { return nil }); errclass.Default().Classify(err).Action != errclass.Fail {
		t.Errorf("Run() = %v, want a permanent error", err)
	}
	g := newGroup(t, rdb, "c1")
	rg, _ := redis.NewGroupResumer(g)
	err := rg.Run(t.Context(), g.Handler(func(context.Context, redis.Entry) error { return nil }))
	if errclass.Default().Classify(err).Action != errclass.Fail {
		t.Errorf("group Run() = %v, want a permanent error", err)
	}
}
