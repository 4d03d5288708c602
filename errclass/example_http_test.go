package errclass_test

import (
	"fmt"
	"net/http"
	"net/url"

	"github.com/resumable-go/resumable/errclass"
)

// FromHTTP turns a response into the error a stream should see: nil for
// 2xx, and a marked *StatusError for the rest. Call it in a Source's Open
// (or a page fetch) right after the request.
func ExampleFromHTTP() {
	u, _ := url.Parse("https://example.com/feed")
	for _, resp := range []*http.Response{
		{StatusCode: 200},
		{StatusCode: 429, Header: http.Header{"Retry-After": {"30"}}},
		{StatusCode: 410},
		{StatusCode: 403},
	} {
		resp.Request = &http.Request{URL: u}
		err := errclass.FromHTTP(resp)
		if err == nil {
			fmt.Printf("%d: ok\n", resp.StatusCode)
			continue
		}
		fmt.Printf("%d: %v: %v\n", resp.StatusCode, err, errclass.Default().Classify(err))
	}
	// Output:
	// 200: ok
	// 429: errclass: https://example.com/feed: 429 Too Many Requests (retry after 30s): retry after 30s
	// 410: errclass: https://example.com/feed: 410 Gone: expired
	// 403: errclass: https://example.com/feed: 403 Forbidden: fail
}
