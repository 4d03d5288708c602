package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestRun(t *testing.T) {
	tests := []struct {
		name string
		args []string
	}{
		{name: "defaults", args: nil},
		{name: "another seed", args: []string{"-seed", "7", "-events", "60"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var out bytes.Buffer
			if err := run(ctx, &out, tt.args); err != nil {
				t.Fatalf("run() = %v, want nil; output:\n%s", err, out.String())
			}
			if !strings.Contains(out.String(), "exactly once and in order") {
				t.Errorf("output lacks the end check:\n%s", out.String())
			}
			if !strings.Contains(out.String(), "reconnect after cursor") {
				t.Errorf("output shows no reconnect:\n%s", out.String())
			}
		})
	}
}

func TestRunRejectsBadFlags(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), &out, []string{"-events", "0"}); err == nil {
		t.Error("run(-events 0) = nil, want an error")
	}
}
