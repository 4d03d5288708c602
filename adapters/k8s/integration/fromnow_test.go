package integration_test

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/resumable-go/resumable/adapters/k8s"
	"github.com/resumable-go/resumable/adapters/k8s/internal/testenv"
)

// TestFromNow starts NewRetryWatcherFromNow between two batches of creates:
// only the second batch is delivered, in order.
func TestFromNow(t *testing.T) {
	const n = 10
	env := testenv.Start(t)
	cs := newClient(t, env.Config())
	cms := createNamespace(t, cs, "fromnow")

	before := createConfigMaps(t, cms, "before", n)
	var rec recorder
	rw, err := k8s.NewRetryWatcherFromNow(t.Context(), rec.listWatch(cms))
	if err != nil {
		t.Fatalf("k8s.NewRetryWatcherFromNow() = %v", err)
	}
	c := consume(rw.ResultChan())
	t.Cleanup(func() { stopOurs(t, rw, c) })
	want := addedEvents(createConfigMaps(t, cms, "after", n))

	waitFor(t, fmt.Sprintf("%d events", n), func() (bool, string) {
		return c.Len() >= n || c.Closed(), fmt.Sprintf("events: %v", summarizeAll(c.Events()))
	})
	if diff := cmp.Diff(want, summarizeAll(c.Events())); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	calls, lists := rec.Calls(), rec.Lists()
	t.Logf("lists: %+v; watch calls: %s", lists, describeCalls(calls))
	if len(lists) != 1 {
		t.Errorf("%d list calls, want 1 (to learn the current resource version)", len(lists))
	}
	last := before[n-1].ResourceVersion
	if got := calls[0].Opts.ResourceVersion; rvNumber(t, got) < rvNumber(t, last) {
		t.Errorf("first watch from %s, want no older than the last create before the start, %s", got, last)
	}
}
