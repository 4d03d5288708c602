package errclass_test

import (
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/resumable-go/resumable/errclass"
)

// response returns a response to a GET of u with the given status and
// header fields.
func response(code int, u string, header map[string]string) *http.Response {
	resp := &http.Response{StatusCode: code, Header: http.Header{}}
	if u != "" {
		parsed, err := url.Parse(u)
		if err != nil {
			panic(err)
		}
		resp.Request = &http.Request{Method: http.MethodGet, URL: parsed}
	}
	for k, v := range header {
		resp.Header.Set(k, v)
	}
	return resp
}

func TestFromHTTP(t *testing.T) {
	const (
		feed = "https://example.com/feed?page=3"
		date = "Mon, 02 Jan 2006 15:04:05 GMT"
	)
	retry := errclass.Decision{Action: errclass.Retry}
	fail := errclass.Decision{Action: errclass.Fail}
	tests := []struct {
		name     string
		code     int
		url      string
		header   map[string]string
		wantNil  bool
		want     errclass.Decision
		wantText string
	}{
		{name: "200", code: 200, url: feed, wantNil: true},
		{name: "204", code: 204, url: feed, wantNil: true},
		{name: "299", code: 299, url: feed, wantNil: true},
		{name: "101", code: 101, url: feed, want: fail},
		{name: "301 not followed", code: 301, url: feed, want: fail, wantText: "errclass: " + feed + ": 301 Moved Permanently"},
		{name: "304", code: 304, url: feed, want: fail},
		{name: "307 not followed", code: 307, url: feed, want: fail},
		{name: "400", code: 400, url: feed, want: fail, wantText: "errclass: " + feed + ": 400 Bad Request"},
		{name: "401", code: 401, url: feed, want: fail},
		{name: "403", code: 403, url: feed, want: fail},
		{name: "404", code: 404, url: feed, want: fail},
		{name: "404 ignores Retry-After", code: 404, url: feed, header: map[string]string{"Retry-After": "5"}, want: fail},
		{name: "408", code: 408, url: feed, want: retry},
		{name: "410 expires the cursor", code: 410, url: feed, want: errclass.Decision{Action: errclass.Expired}, wantText: "errclass: " + feed + ": 410 Gone"},
		{name: "422", code: 422, url: feed, want: fail},
		{name: "425", code: 425, url: feed, want: retry},
		{name: "429", code: 429, url: feed, want: retry, wantText: "errclass: " + feed + ": 429 Too Many Requests (retry after 0s)"},
		{name: "499 unknown 4xx", code: 499, url: feed, want: fail, wantText: "errclass: " + feed + ": 499"},
		{name: "500", code: 500, url: feed, want: retry},
		{name: "501", code: 501, url: feed, want: retry},
		{name: "503", code: 503, url: feed, want: retry},
		{name: "599", code: 599, url: feed, want: retry},
		{name: "600", code: 600, url: feed, want: fail},
		{name: "Retry-After seconds", code: 429, url: feed, header: map[string]string{"Retry-After": "7"}, want: errclass.Decision{Action: errclass.Retry, After: 7 * time.Second}},
		{name: "Retry-After seconds with spaces", code: 503, url: feed, header: map[string]string{"Retry-After": " 7 "}, want: errclass.Decision{Action: errclass.Retry, After: 7 * time.Second}},
		{name: "Retry-After zero", code: 503, url: feed, header: map[string]string{"Retry-After": "0"}, want: retry},
		{name: "Retry-After too large saturates", code: 503, url: feed, header: map[string]string{"Retry-After": "99999999999999999999999"}, want: errclass.Decision{Action: errclass.Retry, After: math.MaxInt64}},
		{name: "Retry-After HTTP date, from the Date header", code: 503, url: feed, header: map[string]string{"Date": date, "Retry-After": "Mon, 02 Jan 2006 15:05:35 GMT"}, want: errclass.Decision{Action: errclass.Retry, After: 90 * time.Second}},
		{name: "Retry-After RFC 850 date", code: 503, url: feed, header: map[string]string{"Date": date, "Retry-After": "Monday, 02-Jan-06 15:04:15 GMT"}, want: errclass.Decision{Action: errclass.Retry, After: 10 * time.Second}},
		{name: "Retry-After ANSI C date", code: 503, url: feed, header: map[string]string{"Date": date, "Retry-After": "Mon Jan  2 15:04:25 2006"}, want: errclass.Decision{Action: errclass.Retry, After: 20 * time.Second}},
		{name: "Retry-After date in the past", code: 503, url: feed, header: map[string]string{"Date": date, "Retry-After": "Mon, 02 Jan 2006 15:00:00 GMT"}, want: retry},
		{name: "Retry-After past date, no Date header", code: 503, url: feed, header: map[string]string{"Retry-After": "Mon, 02 Jan 2006 15:00:00 GMT"}, want: retry},
		{name: "Retry-After garbage", code: 503, url: feed, header: map[string]string{"Retry-After": "soon"}, want: retry},
		{name: "Retry-After negative", code: 503, url: feed, header: map[string]string{"Retry-After": "-5"}, want: retry},
		{name: "Retry-After fraction", code: 503, url: feed, header: map[string]string{"Retry-After": "1.5"}, want: retry},
		{name: "password redacted", code: 404, url: "https://user:secret@example.com/feed", want: fail, wantText: "errclass: https://user:xxxxx@example.com/feed: 404 Not Found"},
		{name: "no request", code: 502, want: retry, wantText: "errclass: 502 Bad Gateway (retry after 0s)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := errclass.FromHTTP(response(tt.code, tt.url, tt.header))
			if tt.wantNil {
				if err != nil {
					t.Fatalf("FromHTTP() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("FromHTTP() = nil, want an error")
			}
			if diff := cmp.Diff(tt.want, errclass.Default().Classify(err)); diff != "" {
				t.Errorf("Default().Classify(FromHTTP()) (-want +got):\n%s", diff)
			}
			// A marker decides: Markers alone answers the same.
			if diff := cmp.Diff(tt.want, errclass.Markers().Classify(err)); diff != "" {
				t.Errorf("Markers().Classify(FromHTTP()) (-want +got):\n%s", diff)
			}
			var se *errclass.StatusError
			if !errors.As(err, &se) || se.Code != tt.code {
				t.Errorf("FromHTTP() = %v, want a *StatusError with Code %d", err, tt.code)
			}
			if got := errors.Is(err, errclass.ErrExpired); got != (tt.code == 410) {
				t.Errorf("errors.Is(FromHTTP(), ErrExpired) = %v, want %v", got, tt.code == 410)
			}
			if tt.wantText != "" && err.Error() != tt.wantText {
				t.Errorf("FromHTTP().Error() = %q, want %q", err, tt.wantText)
			}
		})
	}
}

// A Retry-After date with no Date header is taken relative to the local
// clock.
func TestFromHTTPRetryAfterDateLocalClock(t *testing.T) {
	when := time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)
	err := errclass.FromHTTP(response(503, "https://example.com/", map[string]string{"Retry-After": when}))
	got := errclass.Default().Classify(err)
	if got.Action != errclass.Retry || got.After <= 58*time.Minute || got.After > time.Hour {
		t.Errorf("Default().Classify(FromHTTP()) = %v, want retry after about 1h", got)
	}
}

func TestFromHTTPNil(t *testing.T) {
	err := errclass.FromHTTP(nil)
	if got := errclass.Default().Classify(err); got.Action != errclass.Fail {
		t.Errorf("Default().Classify(FromHTTP(nil)) = %v, want fail; error %v", got, err)
	}
}

// TestFromHTTPRealResponse reads a response from a real server: the URL in
// the error is the request's, and the body is left for the caller.
func TestFromHTTPRealResponse(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "3")
		http.Error(w, "busy", http.StatusServiceUnavailable)
	}))
	defer ts.Close()
	resp, err := ts.Client().Get(ts.URL + "/feed")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	err = errclass.FromHTTP(resp)
	want := "errclass: " + ts.URL + "/feed: 503 Service Unavailable (retry after 3s)"
	if err == nil || err.Error() != want {
		t.Errorf("FromHTTP() = %v, want %q", err, want)
	}
	body := make([]byte, 16)
	if n, _ := resp.Body.Read(body); string(body[:n]) != "busy\n" {
		t.Errorf("body after FromHTTP = %q, want %q", body[:n], "busy\n")
	}
}
