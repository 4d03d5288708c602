// Package loopback starts the HTTP servers of the repository's example
// programs on a free 127.0.0.1 port and shuts them down without leaving a
// goroutine behind. It is for our examples and tests, not for users.
package loopback

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"
)

// Serve serves h on a free loopback port and returns the server's base URL
// ("http://127.0.0.1:PORT") and a shutdown function. Request contexts derive
// from ctx; shutdown cancels them (so that streaming handlers return), waits
// up to 5s for the server to stop, and reports any error the server met.
// Call shutdown exactly once.
func Serve(ctx context.Context, h http.Handler) (base string, shutdown func() error, err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	baseCtx, cancel := context.WithCancel(ctx)
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return baseCtx },
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	return "http://" + ln.Addr().String(), func() error {
		cancel() // handlers watch their request's context, derived from baseCtx
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer scancel()
		err := srv.Shutdown(sctx)
		if serr := <-done; !errors.Is(serr, http.ErrServerClosed) {
			err = errors.Join(err, serr)
		}
		return err
	}, nil
}
