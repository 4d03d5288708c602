package errclass

import (
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/resumable-go/resumable/internal/digits"
)

// StatusError is an HTTP response other than the one asked for. [FromHTTP]
// returns it, marked, for every status outside 2xx; a rule of your own reads
// it with [As] (to retry a 403, say).
type StatusError struct {
	// Code is the response's status code.
	Code int
	// URL is the request's URL with any password redacted; empty when the
	// response has no request.
	URL string
}

// Error returns, for example, "errclass: https://example.com/feed: 503
// Service Unavailable".
func (e *StatusError) Error() string {
	var b strings.Builder
	b.WriteString("errclass: ")
	if e.URL != "" {
		b.WriteString(e.URL)
		b.WriteString(": ")
	}
	b.WriteString(strconv.Itoa(e.Code))
	if text := http.StatusText(e.Code); text != "" {
		b.WriteString(" ")
		b.WriteString(text)
	}
	return b.String()
}

// errNoResponse is what FromHTTP says of a nil response.
var errNoResponse = errors.New("errclass: FromHTTP: nil response")

// FromHTTP returns nil for a 2xx response, and otherwise a [*StatusError]
// marked by what its status means to a stream:
//   - 408, 425, 429 and 5xx: [RetryAfter], with the delay the Retry-After
//     header asks for (delay-seconds, or an HTTP date taken relative to the
//     response's Date header when it has one), zero when it has none or
//     cannot be read.
//   - 410 Gone: [CursorExpired].
//   - 3xx (a redirect the client did not follow), any other 4xx, and any
//     other status: [Permanent].
//
// Every error it returns carries a marker, so [Markers] decides for it in a
// [Chain]. FromHTTP neither reads nor closes the body: close it as always.
// A nil response is a [Permanent] error (check Do's error first).
func FromHTTP(resp *http.Response) error {
	if resp == nil {
		return Permanent(errNoResponse)
	}
	code := resp.StatusCode
	if code >= 200 && code <= 299 {
		return nil
	}
	err := &StatusError{Code: code}
	if resp.Request != nil && resp.Request.URL != nil {
		err.URL = resp.Request.URL.Redacted()
	}
	switch {
	case code == http.StatusRequestTimeout, code == http.StatusTooEarly,
		code == http.StatusTooManyRequests, code >= 500 && code <= 599:
		return RetryAfter(err, retryAfter(resp.Header))
	case code == http.StatusGone:
		return CursorExpired(err)
	}
	return Permanent(err)
}

// retryAfter reads a Retry-After header: delay-seconds, or an HTTP date
// taken relative to the Date header when there is one (so that the two
// clocks need not agree) and to the local clock if not. It returns zero for
// a missing, unreadable or past value; a number of seconds too large for a
// time.Duration saturates.
func retryAfter(h http.Header) time.Duration {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if n, ok := seconds(v); ok {
		return n
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0
	}
	now, err := http.ParseTime(h.Get("Date"))
	if err != nil {
		now = time.Now()
	}
	return max(t.Sub(now), 0)
}

// seconds parses delay-seconds (1*DIGIT), saturating at the longest
// time.Duration.
func seconds(v string) (time.Duration, bool) {
	const limit = math.MaxInt64 / int64(time.Second)
	n, ok := digits.Parse(v, limit)
	if !ok {
		return 0, false
	}
	if n > limit {
		return math.MaxInt64, true
	}
	return time.Duration(n) * time.Second, true
}
