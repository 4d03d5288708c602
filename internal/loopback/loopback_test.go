package loopback_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/resumable-go/resumable/internal/loopback"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestServeAndShutdown(t *testing.T) {
	// A streaming handler that only returns when its request context ends.
	started := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hello" {
			_, _ = io.WriteString(w, "hello")
			return
		}
		w.(http.Flusher).Flush()
		close(started)
		<-r.Context().Done()
	})
	base, shutdown, err := loopback.Serve(context.Background(), h)
	if err != nil {
		t.Fatalf("Serve() = %v", err)
	}
	if !strings.HasPrefix(base, "http://127.0.0.1:") {
		t.Errorf("base = %q, want a loopback URL", base)
	}
	resp, err := http.Get(base + "/hello")
	if err != nil {
		t.Fatalf("GET /hello: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "hello" {
		t.Errorf("GET /hello = %q, want %q", body, "hello")
	}
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	streamDone := make(chan error, 1)
	go func() {
		resp, err := client.Get(base + "/stream")
		if err == nil {
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		streamDone <- err
	}()
	<-started
	// Shutdown must end the streaming handler rather than wait 5s for it.
	if err := shutdown(); err != nil {
		t.Errorf("shutdown() = %v, want nil", err)
	}
	<-streamDone
	http.DefaultClient.CloseIdleConnections()
}
