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

// StatusError is a non-2xx HTTP response, as [FromHTTP] returns it (marked);
// a rule of your own reads it with [As] to treat a status otherwise.
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

var errNoResponse = errors.New("errclass: FromHTTP: nil response")

// FromHTTP returns nil for a 2xx response and otherwise a [*StatusError]
// marked by what the status means to a stream: 408, 425, 429 and 5xx as
// [RetryAfter] with the Retry-After header's delay (seconds or an HTTP date;
// zero if absent or unreadable), 410 Gone as [CursorExpired], any other
// status as [Permanent]. A nil response is a Permanent error. FromHTTP
// neither reads nor closes the body.
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

// retryAfter reads delay-seconds (saturating) or an HTTP date, taken relative
// to the Date header when there is one so that the two clocks need not agree.
// A missing, unreadable or past value gives zero.
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

// seconds parses delay-seconds (1*DIGIT), saturating at the longest Duration.
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
