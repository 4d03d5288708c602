package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	wrote chan struct{} // signalled after each Write, when made
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, err := b.buf.Write(p)
	if b.wrote != nil {
		select {
		case b.wrote <- struct{}{}:
		default:
		}
	}
	return n, err
}

// awaitLines waits until the buffer holds n lines, or ctx ends.
func (b *syncBuffer) awaitLines(ctx context.Context, n int) {
	for len(strings.Split(strings.TrimSpace(b.String()), "\n")) < n {
		select {
		case <-b.wrote:
		case <-ctx.Done():
			return
		}
	}
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestDemo(t *testing.T) {
	var stdout, stderr syncBuffer
	if err := run(t.Context(), &stdout, &stderr, nil); err != nil {
		t.Fatalf("run() = %v; stderr:\n%s", err, stderr.String())
	}
	if want := "demo: 45 events written to 3 streams, each handled exactly once across the handoffs"; !strings.Contains(stdout.String(), want) {
		t.Errorf("stdout lacks %q:\n%s", want, stdout.String())
	}
	if want := "w2 owner orders"; !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
	}
}

// TestWorker runs the program as a worker against an embedded etcd: one
// line per event in the pinned format, and a clean exit on cancellation.
func TestWorker(t *testing.T) {
	srv, endpoint, err := startEmbedded()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.close()
	writer, err := newClient(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Close()

	ctx, cancel := context.WithCancel(t.Context())
	stdout, stderr := syncBuffer{wrote: make(chan struct{}, 1)}, syncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, &stdout, &stderr, []string{"-endpoints", strings.TrimPrefix(endpoint, "http://"), "-streams", "a,b", "-id", "w1", "-ttl", "2s"})
	}()
	var want []string
	for i, key := range []string{"/streams/a/1", "/streams/b/1", "/streams/a/2", "/streams/other/1"} {
		resp, err := writer.Put(ctx, key, fmt.Sprint(i))
		if err != nil {
			t.Fatalf("Put() = %v", err)
		}
		if !strings.HasPrefix(key, "/streams/other/") {
			want = append(want, fmt.Sprintf("handled %s %s %d", strings.Split(key, "/")[2], key, resp.Header.Revision))
		}
	}
	waitCtx, waitCancel := context.WithTimeout(ctx, time.Minute)
	stdout.awaitLines(waitCtx, len(want))
	waitCancel()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run() after cancellation = %v, want nil; stderr:\n%s", err, stderr.String())
	}
	got := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if !sameLines(want, got) {
		t.Errorf("stdout = %q, want %q in some interleaving of the streams", got, want)
	}
	for _, s := range []string{"owner a", "owner b", "released a", "released b"} {
		if !strings.Contains(stderr.String(), s) {
			t.Errorf("stderr lacks %q:\n%s", s, stderr.String())
		}
	}
}

// sameLines reports whether got holds the lines of want, each once, with
// each stream's lines in want's order.
func sameLines(want, got []string) bool {
	if len(want) != len(got) {
		return false
	}
	byStream := func(lines []string) map[string][]string {
		m := map[string][]string{}
		for _, l := range lines {
			f := strings.Fields(l)
			if len(f) != 4 {
				return nil
			}
			m[f[1]] = append(m[f[1]], l)
		}
		return m
	}
	w, g := byStream(want), byStream(got)
	return g != nil && fmt.Sprint(w) == fmt.Sprint(g)
}

func TestBadFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{name: "streams without endpoints", args: []string{"-streams", "a", "-id", "w"}, want: "need -endpoints"},
		{name: "no streams", args: []string{"-endpoints", "127.0.0.1:1", "-id", "w"}, want: "-streams is empty"},
		{name: "no id", args: []string{"-endpoints", "127.0.0.1:1", "-streams", "a"}, want: "-id is empty"},
		{name: "no checkpoint", args: []string{"-endpoints", "127.0.0.1:1", "-streams", "a", "-id", "w", "-checkpoint-every", "0", "-checkpoint-interval", "0"}, want: "both 0"},
		{name: "extra argument", args: []string{"-endpoints", "127.0.0.1:1", "x"}, want: "unexpected arguments"},
		{name: "unknown flag", args: []string{"-nope"}, want: "not defined"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr syncBuffer
			err := run(t.Context(), &stdout, &stderr, tt.args)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("run(%q) = %v, want an error containing %q", tt.args, err, tt.want)
			}
		})
	}
}
