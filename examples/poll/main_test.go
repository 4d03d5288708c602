package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// The demo consumes the feed in two runs, through a 503, 500s, empty polls
// and a 410 resync, and checks its state against the server's.
func TestDemo(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	state := filepath.Join(t.TempDir(), "changes.cursor")
	if err := run(ctx, &out, []string{"-state", state}); err != nil {
		t.Fatalf("run() = %v, want nil; output:\n%s", err, out.String())
	}
	for _, want := range []string{
		"applied change 20; stopping",
		"503 Service Unavailable (retry after 1s)",
		"410 Gone: starting again from the snapshot as of change 40",
		"applied change 60; stopping",
		"done: the consumer's 7 orders equal the server's as of change 60",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
