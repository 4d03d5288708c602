package main

import (
	"context"
	"io"
	"strings"
	"testing"
)

// TestRunRefusesBadFlags: the pinned flags are all required, and the
// others are checked, before anything connects. The relay itself is
// tested against a real server by adapters/postgres/outbox_soak_test.go.
func TestRunRefusesBadFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{name: "none", args: nil, want: "all required"},
		{name: "no state", args: []string{"-dsn", "postgres://127.0.0.1/x", "-table", "outbox"}, want: "all required"},
		{name: "negative checkpoint", args: []string{"-dsn", "postgres://127.0.0.1/x", "-table", "outbox", "-state", "s", "-checkpoint=-1s"}, want: "-checkpoint"},
		{name: "unknown flag", args: []string{"-slot", "x"}, want: "not defined"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := run(context.Background(), io.Discard, io.Discard, tc.args)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("run(%q) = %v, want an error containing %q", tc.args, err, tc.want)
			}
		})
	}
}
