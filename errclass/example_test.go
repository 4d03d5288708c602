package errclass_test

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/resumable-go/resumable/errclass"
)

// Stock pieces in a chain: your rules first, then Default (the markers,
// else retry). The first decision that is not Unknown wins.
func ExampleChain() {
	errUnauthorized := errors.New("401 unauthorized")
	c := errclass.Chain(
		errclass.Is(errUnauthorized, errclass.Decision{Action: errclass.Fail}),
		errclass.Default(),
	)
	for _, err := range []error{
		fmt.Errorf("open: %w", errUnauthorized),
		errclass.RetryAfter(errors.New("429 too many requests"), 2*time.Second),
		errclass.CursorExpired(errors.New("410 gone")),
		errors.New("connection reset"),
	} {
		fmt.Printf("%v: %v\n", err, c.Classify(err))
	}
	// Output:
	// open: 401 unauthorized: fail
	// 429 too many requests (retry after 2s): retry after 2s
	// 410 gone: expired
	// connection reset: retry
}

// HTTPError is a transport's error that carries a status code.
type HTTPError struct {
	Code       int
	RetryAfter time.Duration
}

func (e *HTTPError) Error() string { return fmt.Sprintf("http %d", e.Code) }

// A custom classifier reads a typed error with errclass.As and maps status
// codes to decisions; what it has no opinion on stays Unknown, so a stream
// falls back to errclass.Default for it.
func ExampleAs() {
	byStatus := errclass.As(func(e *HTTPError) errclass.Decision {
		switch {
		case e.Code == http.StatusTooManyRequests || e.Code == http.StatusServiceUnavailable:
			return errclass.Decision{Action: errclass.Retry, After: e.RetryAfter}
		case e.Code == http.StatusGone:
			return errclass.Decision{Action: errclass.Expired}
		case e.Code >= 400 && e.Code < 500 && e.Code != http.StatusRequestTimeout:
			return errclass.Decision{Action: errclass.Fail}
		}
		return errclass.Decision{} // 5xx and the rest: Unknown
	})
	for _, err := range []error{
		&HTTPError{Code: 429, RetryAfter: time.Second},
		&HTTPError{Code: 403},
		&HTTPError{Code: 410},
		fmt.Errorf("stream: %w", &HTTPError{Code: 502}),
		errors.New("connection reset"),
	} {
		fmt.Printf("%v: %v\n", err, byStatus.Classify(err))
	}
	// Output:
	// http 429: retry after 1s
	// http 403: fail
	// http 410: expired
	// stream: http 502: unknown
	// connection reset: unknown
}

// Markers wrap an error without hiding it.
func ExamplePermanent() {
	err := errclass.Permanent(fmt.Errorf("token revoked"))
	fmt.Println(err, errclass.Default().Classify(err))
	fmt.Println(errclass.Permanent(nil) == nil)
	// Output:
	// token revoked fail
	// true
}
