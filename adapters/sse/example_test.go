package sse_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/resumable-go/resumable/adapters/sse"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/stream"
)

// A Resumer over a Source reads every event of a stream, reconnecting with
// Last-Event-ID until the server answers 204 No Content.
func Example() {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Last-Event-ID") == "2" {
			w.WriteHeader(http.StatusNoContent) // no more events: stop reconnecting
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "id: 1\nevent: greeting\ndata: hello\n\n: a comment\nid: 2\ndata: two\ndata: lines\n\n")
	}))
	defer ts.Close()

	src, err := sse.NewSource(ts.URL, sse.WithClient(ts.Client()))
	if err != nil {
		fmt.Println(err)
		return
	}
	r, err := stream.New(src, sse.EventID, cursor.NewMemory(""))
	if err != nil {
		fmt.Println(err)
		return
	}
	err = r.Run(context.Background(), func(_ context.Context, ev sse.Event) error {
		fmt.Printf("%s %s %q\n", ev.ID, ev.Type, ev.Data)
		return nil
	})
	fmt.Println("Run:", err)
	// Output:
	// 1 greeting "hello"
	// 2 message "two\nlines"
	// Run: <nil>
}

// A dropped connection is reopened after the last event handled: the
// server sees it as Last-Event-ID and resumes after it. The event the drop
// cut in two is never delivered in part. A Source filled in as a literal
// works as one from NewSource.
func ExampleSource() {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		last := r.Header.Get("Last-Event-ID")
		fmt.Printf("server: GET, Last-Event-ID %q\n", last)
		w.Header().Set("Content-Type", "text/event-stream")
		switch last {
		case "":
			io.WriteString(w, "id: 1\ndata: one\n\nid: 2\ndata: tw")
			http.NewResponseController(w).Flush()
			panic(http.ErrAbortHandler) // the connection drops inside event 2
		case "1":
			io.WriteString(w, "id: 2\ndata: two\n\nid: 3\ndata: three\n\n")
		default:
			w.WriteHeader(http.StatusNoContent)
		}
	}))
	defer ts.Close()

	src := &sse.Source{URL: ts.URL, Client: ts.Client()}
	r, err := stream.New(src, sse.EventID, cursor.NewMemory(""))
	if err != nil {
		fmt.Println(err)
		return
	}
	err = r.Run(context.Background(), func(_ context.Context, ev sse.Event) error {
		fmt.Printf("handler: %s %q\n", ev.ID, ev.Data)
		return nil
	})
	fmt.Println("Run:", err)
	// Output:
	// server: GET, Last-Event-ID ""
	// handler: 1 "one"
	// server: GET, Last-Event-ID "1"
	// handler: 2 "two"
	// handler: 3 "three"
	// server: GET, Last-Event-ID "3"
	// Run: <nil>
}

// EventID is the extractor: an event's cursor is its ID. A heartbeat
// (a comment line) is progress only, and an ID that no HTTP header can carry
// is refused before its event is handled.
func ExampleEventID() {
	for _, ev := range []sse.Event{
		{ID: "7", Type: "message", Data: "x"},
		{ID: "7", Heartbeat: true},
		{ID: "8\x01", Type: "message", Data: "y"},
	} {
		c, err := sse.EventID(ev)
		fmt.Printf("%q progress-only=%v unsendable=%v\n", c, errors.Is(err, cursor.ProgressOnly), errors.Is(err, sse.ErrUnsendableID))
	}
	// Output:
	// "7" progress-only=false unsendable=false
	// "7" progress-only=true unsendable=false
	// "" progress-only=false unsendable=true
}
