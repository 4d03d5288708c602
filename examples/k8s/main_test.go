package main

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
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

// TestPrintEvents runs the real-cluster mode's printing against the fake
// clientset, with watches the test drives: each one delivers an event, then
// the 410 Expired an API server sends after its restart.
func TestPrintEvents(t *testing.T) {
	tests := []struct {
		name    string
		resync  bool
		wantErr string   // "" for none
		want    []string // lines of the output, in order
	}{
		{
			name:    "no resync: stops with a hint",
			wantErr: "run with -resync",
			want: []string{
				"EXISTING demo/a rv=1",
				"EXISTING demo/b rv=2",
				`watching configmaps in "demo" from resource version`,
				"MODIFIED demo/a rv=3",
			},
		},
		{
			name:   "resync: relists and goes on",
			resync: true,
			want: []string{
				"EXISTING demo/a rv=1",
				"EXISTING demo/b rv=2",
				`watching configmaps in "demo" from resource version`,
				"MODIFIED demo/a rv=3",
				"-- resync: the API server no longer has resource version 3; what changed since follows --",
				"DELETED  demo/b rv=2",
				"-- resync done: watching from resource version",
				"ADDED    demo/c rv=9",
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cs := fake.NewClientset(configMap("a", "1"), configMap("b", "2"))
			watches := make(chan *watch.FakeWatcher, 4)
			cs.PrependWatchReactor("configmaps", func(k8stesting.Action) (bool, watch.Interface, error) {
				w := watch.NewFake()
				watches <- w
				return true, w, nil
			})
			out := &lockedBuffer{}
			done := make(chan error, 1)
			go func() { done <- printEvents(ctx, out, zap.NewNop(), cs, "demo", tc.resync) }()

			w := nextWatch(t, ctx, watches)
			w.Modify(configMap("a", "3"))
			// While the watch is expired, b is deleted: the resync's
			// list no longer has it.
			gvr := corev1.SchemeGroupVersion.WithResource("configmaps")
			if err := cs.Tracker().Update(gvr, configMap("a", "3"), "demo"); err != nil {
				t.Fatal(err)
			}
			if err := cs.Tracker().Delete(gvr, "demo", "b"); err != nil {
				t.Fatal(err)
			}
			w.Error(&apierrors.NewResourceExpired("too old resource version: 3 (7)").ErrStatus)
			if tc.resync {
				w = nextWatch(t, ctx, watches)
				w.Add(configMap("c", "9"))
				waitOutput(t, ctx, out, "demo/c")
				cancel()
			}
			err := <-done
			if (err == nil) != (tc.wantErr == "") || err != nil && !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("printEvents() = %v, want an error containing %q; output:\n%s", err, tc.wantErr, out)
			}
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			if len(lines) != len(tc.want) {
				t.Fatalf("got %d lines, want %d; output:\n%s", len(lines), len(tc.want), out)
			}
			for i, want := range tc.want {
				if !strings.HasPrefix(lines[i], want) {
					t.Errorf("line %d = %q, want it to start with %q; output:\n%s", i, lines[i], want, out)
				}
			}
		})
	}
}

func configMap(name, rv string) runtime.Object {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "demo", ResourceVersion: rv}}
}

// nextWatch returns the next watch the watcher opens.
func nextWatch(t *testing.T, ctx context.Context, watches <-chan *watch.FakeWatcher) *watch.FakeWatcher {
	t.Helper()
	select {
	case w := <-watches:
		return w
	case <-ctx.Done():
		t.Fatalf("no watch opened: %v", ctx.Err())
		return nil
	}
}

// waitOutput polls out until it contains s.
func waitOutput(t *testing.T, ctx context.Context, out *lockedBuffer, s string) {
	t.Helper()
	if err := waitFor(ctx, func() bool { return strings.Contains(out.String(), s) }); err != nil {
		t.Fatalf("output lacks %q: %v; output:\n%s", s, err, out)
	}
}

// lockedBuffer is a bytes.Buffer that may be read while it is written.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
