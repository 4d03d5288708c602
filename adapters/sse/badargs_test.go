package sse_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/resumable-go/resumable/adapters/sse"
	"github.com/resumable-go/resumable/stream"
)

// TestBadArgumentsNameTheArgument gives NewSource and every option a bad
// value: each error matches stream.ErrInvalidOption and its message names
// the argument.
func TestBadArgumentsNameTheArgument(t *testing.T) {
	const u = "http://127.0.0.1:1/events"
	tests := []struct {
		name string
		url  string
		opts []sse.Option
		want []string // each in the message
	}{
		{name: "rawURL empty", url: "", want: []string{`sse: NewSource: rawURL = "": must be an absolute URL`}},
		{name: "rawURL relative", url: "/events", want: []string{`sse: NewSource: rawURL = "/events": must be an absolute URL`}},
		{name: "rawURL unparsable", url: "http://a b/", want: []string{`sse: NewSource: rawURL = "http://a b/": does not parse`}},
		{name: "WithClient", url: u, opts: []sse.Option{sse.WithClient(&http.Client{Timeout: time.Second})},
			want: []string{"sse: WithClient: c.Timeout = 1s"}},
		{name: "WithHeader", url: u, opts: []sse.Option{sse.WithHeader(http.Header{"Authorization": {"Bearer a\r\nX: y"}})},
			want: []string{`sse: WithHeader: h[Authorization] = "Bearer a\r\nX: y"`}},
		{name: "WithMaxEventSize", url: u, opts: []sse.Option{sse.WithMaxEventSize(0)}, want: []string{"sse: WithMaxEventSize: n = 0"}},
		{name: "every argument at once", url: "", opts: []sse.Option{sse.WithMaxEventSize(-1), sse.WithClient(&http.Client{Timeout: time.Second})},
			want: []string{`rawURL = ""`, "WithMaxEventSize: n = -1", "WithClient: c.Timeout = 1s"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src, err := sse.NewSource(tt.url, tt.opts...)
			if src != nil || !errors.Is(err, stream.ErrInvalidOption) {
				t.Fatalf("NewSource() = %v, %v, want nil and an error matching %v", src, err, stream.ErrInvalidOption)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("NewSource() = %q, want it to contain %q", err, w)
				}
			}
		})
	}
}

// TestNewSourceSetsTheFields: each option sets the field of its name, as a
// literal would.
func TestNewSourceSetsTheFields(t *testing.T) {
	c := &http.Client{}
	h := http.Header{"Authorization": {"Bearer x"}}
	src, err := sse.NewSource("https://example.com/events", sse.WithClient(c), sse.WithHeader(h), sse.WithMaxEventSize(64), nil)
	if err != nil {
		t.Fatalf("NewSource() = %v", err)
	}
	if src.URL != "https://example.com/events" || src.Client != c || src.Header.Get("Authorization") != "Bearer x" || src.MaxEventSize != 64 {
		t.Errorf("NewSource() = %+v, want the URL and every option's field set", src)
	}
	h.Set("Authorization", "changed")
	if got := src.Header.Get("Authorization"); got != "Bearer x" {
		t.Errorf("Header after the caller changed h = %q, want the copy taken at NewSource, %q", got, "Bearer x")
	}
}
