package k8s_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	goruntime "runtime"
	"runtime/debug"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/resumable-go/resumable/adapters/k8s"
)

// envStackChild makes the test binary the child of TestIdleWatcherStack.
const envStackChild = "RESUMABLE_K8S_STACK_CHILD"

// TestIdleWatcherStack checks that a RetryWatcher gets to its idle wait (a
// watch open, nothing arriving) within a 4 KiB goroutine stack, as
// client-go's does: one step deeper and every idle watcher keeps 8 KiB
// (BenchmarkIdle, where 10,000 watchers are measured). A child process
// caps every goroutine's stack at 4 KiB (debug.SetMaxStack), so a deeper
// call chain is a fatal stack overflow there, reported here with its trace.
func TestIdleWatcherStack(t *testing.T) {
	if raceEnabled {
		t.Skip("-race deepens every frame; .ci/run runs this test without it")
	}
	if os.Getenv(envStackChild) == "1" {
		idleUnderCappedStack(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestIdleWatcherStack$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), envStackChild+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child with 4 KiB stacks: %v\n%s", err, out)
	}
	if !bytes.Contains(out, []byte("idle within 4 KiB")) {
		t.Fatalf("child did not reach the idle wait:\n%s", out)
	}
}

// idleUnderCappedStack starts a watcher with stacks capped, waits until
// its goroutine is parked in the watch's Recv, then lifts the cap to stop
// it (stopping may go deeper: only the idle watcher is measured).
func idleUnderCappedStack(t *testing.T) {
	opened := make(chan struct{}, 1)
	lw := &cache.ListWatch{WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) {
		opened <- struct{}{}
		return watch.NewProxyWatcher(make(chan watch.Event)), nil
	}}
	old := debug.SetMaxStack(4096)
	rw, err := k8s.NewRetryWatcherWithContext(context.Background(), "1", lw)
	if err != nil {
		debug.SetMaxStack(old)
		t.Fatal(err)
	}
	<-opened
	buf := make([]byte, 1<<20)
	for stop := time.Now().Add(deadline); ; {
		n := goruntime.Stack(buf, true)
		if bytes.Contains(buf[:n], []byte("k8s.(*conn).Recv")) {
			break
		}
		if time.Now().After(stop) {
			debug.SetMaxStack(old)
			t.Fatalf("the watcher never parked in Recv:\n%s", buf[:n])
		}
		goruntime.Gosched()
	}
	debug.SetMaxStack(old)
	t.Log("idle within 4 KiB")
	rw.Stop()
	<-rw.Done()
}
