package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"k8s.io/apimachinery/pkg/watch"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestRunFake(t *testing.T) {
	tests := []struct {
		name string
		args []string
	}{
		{name: "defaults", args: nil},
		{name: "one round", args: []string{"-rounds", "1", "-namespace", "demo"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("KUBECONFIG", "") // never a real cluster here
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var out bytes.Buffer
			if err := run(ctx, &out, tc.args); err != nil {
				t.Fatalf("run() = %v, want nil; output:\n%s", err, out.String())
			}
			for _, want := range []string{"exactly once and in order", "the server ends the watch", "watch opened from resource version"} {
				if !strings.Contains(out.String(), want) {
					t.Errorf("output lacks %q:\n%s", want, out.String())
				}
			}
		})
	}
}

func TestRunRejectsBadFlags(t *testing.T) {
	t.Setenv("KUBECONFIG", "")
	tests := []struct {
		name string
		args []string
	}{
		{name: "no rounds", args: []string{"-rounds", "0"}},
		{name: "unknown flag", args: []string{"-nope"}},
		{name: "missing kubeconfig", args: []string{"-kubeconfig", "/nonexistent/kubeconfig"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			if err := run(context.Background(), &out, tc.args); err == nil {
				t.Errorf("run(%v) = nil, want an error", tc.args)
			}
		})
	}
}

func TestCheck(t *testing.T) {
	a := write{typ: watch.Added, name: "a", rv: "2"}
	b := write{typ: watch.Added, name: "b", rv: "3"}
	c := write{typ: watch.Modified, name: "a", rv: "4"}
	tests := []struct {
		name    string
		seen    []write
		wantErr string
	}{
		{name: "all, in order", seen: []write{a, b, c}},
		{name: "one missing", seen: []write{a, c}, wantErr: "event 1"},
		{name: "the last missing", seen: []write{a, b}, wantErr: "never seen"},
		{name: "a repeat", seen: []write{a, b, b, c}, wantErr: "event 2"},
		{name: "out of order", seen: []write{b, a, c}, wantErr: "event 0"},
		{name: "one too many", seen: []write{a, b, c, c}, wantErr: "matches no write"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := check(tc.seen, []write{a, b, c})
			if (err == nil) != (tc.wantErr == "") || err != nil && !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("check() = %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}
