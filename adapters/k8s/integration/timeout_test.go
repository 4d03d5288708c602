package integration_test

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/resumable-go/resumable/adapters/k8s/internal/testenv"
)

// TestWatchTimeouts creates ConfigMaps while the server ends every watch
// after 5 to 10 s (--min-request-timeout=5): ours and client-go's
// RetryWatcher, on the same namespace from the same resource version, each
// deliver every ADDED event exactly once, in creation order, across several
// watches.
func TestWatchTimeouts(t *testing.T) {
	const (
		minObjects = 300
		minWatches = 3 // two server timeouts at least
		maxObjects = 5000
	)
	env := testenv.Start(t)
	cs := newClient(t, env.Config())
	cms := createNamespace(t, cs, "timeouts")
	// A slow writer, so that the creates span several watch timeouts: the
	// client's rate limiter paces it, nothing here sleeps.
	wcfg := env.Config()
	wcfg.QPS, wcfg.Burst = 25, 1
	writer := newClient(t, wcfg).CoreV1().ConfigMaps("timeouts")

	rv0 := listRV(t, cms)
	var oursRec, upRec recorder
	_, ours := startOurs(t, rv0, oursRec.listWatch(cms))
	_, up := startUpstream(t, rv0, upRec.listWatch(cms))

	// Create at least minObjects, and on until each watcher has opened
	// minWatches watches.
	var created []*corev1.ConfigMap
	for len(created) < minObjects || oursRec.Opened() < minWatches || upRec.Opened() < minWatches {
		if len(created) == maxObjects {
			t.Fatalf("created %d ConfigMaps and the watchers opened %d (ours) and %d (client-go) watches, want %d each",
				maxObjects, oursRec.Opened(), upRec.Opened(), minWatches)
		}
		created = append(created, createConfigMap(t, writer, fmt.Sprintf("cm-%04d", len(created))))
	}
	for i := 1; i < len(created); i++ {
		if rvNumber(t, created[i].ResourceVersion) <= rvNumber(t, created[i-1].ResourceVersion) {
			t.Fatalf("created %s at %s after %s at %s: resource versions not increasing",
				created[i].Name, created[i].ResourceVersion, created[i-1].Name, created[i-1].ResourceVersion)
		}
	}
	want := addedEvents(created)

	for _, w := range []struct {
		name string
		c    *consumer
		rec  *recorder
	}{
		{name: "ours", c: ours, rec: &oursRec},
		{name: "client-go", c: up, rec: &upRec},
	} {
		waitFor(t, w.name+" to deliver "+strconv.Itoa(len(want))+" events", func() (bool, string) {
			n := w.c.Len()
			return n >= len(want) || w.c.Closed(), fmt.Sprintf("%d events, closed: %v", n, w.c.Closed())
		})
		if diff := cmp.Diff(want, summarizeAll(w.c.Events())); diff != "" {
			t.Errorf("%s: events (-want +got):\n%s", w.name, diff)
		}
		calls := w.rec.Calls()
		t.Logf("%s: %d events over %d watch calls: %s", w.name, len(want), len(calls), describeCalls(calls))
		checkWatchCalls(t, w.name, rv0, calls)
		// Every watch but the last (still open, or stopped by us) was ended
		// by the server, cleanly: a timeout.
		for i, c := range calls[:len(calls)-1] {
			if c.Err != nil || c.ErrorEv != nil || !c.Closed {
				t.Errorf("%s: watch #%d: err %v, error event %v, closed by the server %v; want a clean end",
					w.name, i, c.Err, c.ErrorEv, c.Closed)
			}
		}
	}
}

// checkWatchCalls checks that every watch asked for bookmarks, that the
// first asked for rv0, and that each later one asked for a resource version
// no older than the previous one's.
func checkWatchCalls(t *testing.T, name, rv0 string, calls []watchCall) {
	t.Helper()
	if len(calls) == 0 {
		t.Errorf("%s: no watch calls", name)
		return
	}
	if got := calls[0].Opts.ResourceVersion; got != rv0 {
		t.Errorf("%s: first watch from %q, want %q", name, got, rv0)
	}
	for i, c := range calls {
		if !c.Opts.AllowWatchBookmarks {
			t.Errorf("%s: watch #%d: AllowWatchBookmarks = false, want true", name, i)
		}
		if i > 0 && rvNumber(t, c.Opts.ResourceVersion) < rvNumber(t, calls[i-1].Opts.ResourceVersion) {
			t.Errorf("%s: watch #%d from %s, after watch #%d from %s: went back",
				name, i, c.Opts.ResourceVersion, i-1, calls[i-1].Opts.ResourceVersion)
		}
	}
}
