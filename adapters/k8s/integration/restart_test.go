package integration_test

import (
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/resumable-go/resumable/adapters/k8s"
	"github.com/resumable-go/resumable/adapters/k8s/internal/testenv"
	"github.com/resumable-go/resumable/stream"
)

// isExpired reports whether a watch call failed, or its watch ended, with
// 410 Gone or Expired.
func isExpired(c watchCall) bool {
	if c.Err != nil {
		return apierrors.IsResourceExpired(c.Err) || apierrors.IsGone(c.Err)
	}
	return c.ErrorEv != nil && c.ErrorEv.Code == http.StatusGone
}

// acceptedWithout410 returns a watch call made in epoch or later that the
// server accepted: no 410, and something delivered or a clean end. After a
// restart, that means the restarted server's watch cache took the old
// resource version, so that there is no 410 to test: the tests rely on the
// API server writing (its identity lease, say) when it starts, before its
// ConfigMap cache lists.
func acceptedWithout410(calls []watchCall, epoch int) (watchCall, bool) {
	for _, c := range calls {
		if c.Epoch >= epoch && c.Err == nil && c.ErrorEv == nil && (c.Events > 0 || len(c.Bookmarks) > 0 || c.Closed) {
			return c, true
		}
	}
	return watchCall{}, false
}

// TestAPIServerRestart restarts the API server under ours and client-go's
// RetryWatcher, with default options. The restarted server's watch cache
// starts over, so the watchers' resource version is too old for it: both
// must do the same thing with the 410. What this server does is send it as
// the first event of the new watch, which both forward before they stop;
// should a server return it from the watch call instead, both retry, and the
// test checks that they keep doing so alike.
func TestAPIServerRestart(t *testing.T) {
	const before = 10
	env := testenv.Start(t)
	cs := newClient(t, env.Config())
	cms := createNamespace(t, cs, "restart")

	rv0 := listRV(t, cms)
	var oursRec, upRec recorder
	rw, ours := startOurs(t, rv0, oursRec.listWatch(cms))
	_, up := startUpstream(t, rv0, upRec.listWatch(cms))
	watchers := []struct {
		name string
		c    *consumer
		rec  *recorder
	}{
		{name: "ours", c: ours, rec: &oursRec},
		{name: "client-go", c: up, rec: &upRec},
	}

	want := addedEvents(createConfigMaps(t, cms, "before", before))
	for _, w := range watchers {
		waitFor(t, fmt.Sprintf("%s to deliver %d events", w.name, before), func() (bool, string) {
			return w.c.Len() >= before || w.c.Closed(), fmt.Sprintf("events: %v", summarizeAll(w.c.Events()))
		})
	}
	t.Logf("before the restart: ours at resource version %s; last create at %s", rw.LastResourceVersion(), want[len(want)-1].RV)
	callsBefore := map[string]int{"ours": len(oursRec.Calls()), "client-go": len(upRec.Calls())}

	env.RestartAPIServer(t)
	oursRec.SetEpoch(1)
	upRec.SetEpoch(1)

	// Wait until each watcher has stopped, or has met a 410 at open three
	// times (it retries those).
	for _, w := range watchers {
		waitFor(t, w.name+" to stop or to retry a 410", func() (bool, string) {
			all := w.rec.Calls()
			if _, ok := acceptedWithout410(all, 1); ok {
				return true, ""
			}
			calls := all[callsBefore[w.name]:]
			expired := 0
			for _, c := range calls {
				if c.Err != nil && isExpired(c) {
					expired++
				}
			}
			return w.c.Closed() || expired >= 3, fmt.Sprintf("closed: %v; calls since the restart: %s", w.c.Closed(), describeCalls(calls))
		})
		if c, ok := acceptedWithout410(w.rec.Calls(), 1); ok {
			t.Fatalf("%s: after the restart the server accepted a watch from %s without a 410; this test needs one",
				w.name, c.Opts.ResourceVersion)
		}
	}

	got := map[string][]event{}
	for _, w := range watchers {
		calls := w.rec.Calls()
		after := calls[callsBefore[w.name]:]
		t.Logf("%s: closed: %v; events: %v", w.name, w.c.Closed(), summarizeAll(w.c.Events()))
		t.Logf("%s: watch calls since the restart: %s", w.name, describeCalls(after))
		for _, c := range after {
			switch {
			case c.Err != nil && isExpired(c):
				t.Logf("%s: 410 from the watch call: %v", w.name, c.Err)
			case c.ErrorEv != nil:
				t.Logf("%s: error event in the watch: %d %s: %s", w.name, c.ErrorEv.Code, c.ErrorEv.Reason, c.ErrorEv.Message)
			}
		}
		got[w.name] = summarizeAll(w.c.Events())
	}

	if ours.Closed() != up.Closed() {
		t.Fatalf("after the restart, ours closed: %v, client-go's closed: %v; want the same", ours.Closed(), up.Closed())
	}
	if diff := cmp.Diff(got["client-go"], got["ours"]); diff != "" {
		t.Errorf("events, client-go's (-) and ours (+):\n%s", diff)
	}
	if ours.Closed() {
		// The 410 came in the stream: forwarded, then the watcher stopped.
		want = append(want, event{Type: watch.Error, Code: http.StatusGone, Reason: metav1.StatusReasonExpired})
		select {
		case <-rw.Done():
		default:
			t.Errorf("ours: ResultChan closed but Done is not")
		}
	} else {
		t.Logf("the 410 came from the watch call: both watchers retry it")
	}
	if diff := cmp.Diff(want, got["ours"]); diff != "" {
		t.Errorf("ours: events (-want +got):\n%s", diff)
	}
}

// TestAPIServerRestartResync restarts the API server under our
// RetryWatcher with WithResync(ListResync(lw)) and an OnResync hook: it never
// stops; every ConfigMap created before the restart (consumed or not yet)
// and after it is delivered, live or in the resync's replay; the hook and a
// marker in the stream (IsResyncMarker) tell the consumer that a resync
// happened; and watching goes on after the replay.
func TestAPIServerRestartResync(t *testing.T) {
	const n = 10
	env := testenv.Start(t)
	cs := newClient(t, env.Config())
	cms := createNamespace(t, cs, "resync")

	var rec recorder
	lw := rec.listWatch(cms)
	var (
		mu      sync.Mutex
		resyncs []stream.ResyncEvent[string]
	)
	onResync := func(info stream.ResyncEvent[string]) {
		mu.Lock()
		defer mu.Unlock()
		resyncs = append(resyncs, info)
	}
	resynced := func() []stream.ResyncEvent[string] {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(resyncs)
	}

	rv0 := listRV(t, cms)
	rw, c := startOurs(t, rv0, lw, k8s.WithResync(k8s.ListResync(lw)), k8s.WithHooks(stream.Hooks[string]{OnResync: onResync}))

	created := createConfigMaps(t, cms, "before", n)
	waitFor(t, fmt.Sprintf("%d events before the restart", n), func() (bool, string) {
		return c.Len() >= n || c.Closed(), fmt.Sprintf("events: %v", summarizeAll(c.Events()))
	})
	// Created right before the restart, and maybe not delivered before it.
	created = append(created, createConfigMaps(t, cms, "late", n)...)
	env.RestartAPIServer(t)
	rec.SetEpoch(1)
	created = append(created, createConfigMaps(t, cms, "after", n)...)

	// seenAll reports whether an ADDED event for each of names was delivered.
	seenAll := func(names []string) (bool, string) {
		seen := map[string]bool{}
		for _, e := range summarizeAll(c.Events()) {
			if e.Type == watch.Added {
				seen[e.Name] = true
			}
		}
		var missing []string
		for _, name := range names {
			if !seen[name] {
				missing = append(missing, name)
			}
		}
		return len(missing) == 0, fmt.Sprintf("missing %v; closed: %v; resyncs: %d; calls: %s",
			missing, c.Closed(), len(resynced()), describeCalls(rec.Calls()))
	}
	createdNames := make([]string, len(created))
	for i, cm := range created {
		createdNames[i] = cm.Name
	}
	noResync := func() (watchCall, bool) {
		calls := rec.Calls() // before resynced(): a call after a resync comes after its hook
		if len(resynced()) > 0 {
			return watchCall{}, false
		}
		return acceptedWithout410(calls, 1)
	}
	waitFor(t, "every ConfigMap and a resync", func() (bool, string) {
		if _, ok := noResync(); ok {
			return true, ""
		}
		ok, state := seenAll(createdNames)
		return (ok && len(resynced()) > 0) || c.Closed(), state
	})
	if call, ok := noResync(); ok {
		t.Fatalf("after the restart the server accepted a watch from %s without a 410; this test needs one", call.Opts.ResourceVersion)
	}
	if c.Closed() {
		t.Fatalf("the watcher stopped; events: %v", summarizeAll(c.Events()))
	}

	// Watching goes on after the resync.
	final := createConfigMaps(t, cms, "final", n)
	finalNames := make([]string, n)
	for i, cm := range final {
		finalNames[i] = cm.Name
	}
	waitFor(t, "the ConfigMaps created after the resync", func() (bool, string) {
		ok, state := seenAll(finalNames)
		return ok || c.Closed(), state
	})

	events := summarizeAll(c.Events())
	infos := resynced()
	t.Logf("resyncs: %+v", infos)
	t.Logf("watch calls: %s", describeCalls(rec.Calls()))
	t.Logf("list calls: %+v", rec.Lists())
	t.Logf("events: %v", events)

	select {
	case <-rw.Done():
		t.Fatalf("Done closed: the watcher stopped")
	default:
	}
	if len(infos) != 1 {
		t.Errorf("%d resyncs, want 1: %+v", len(infos), infos)
	}
	for _, info := range infos {
		if !apierrors.IsResourceExpired(info.Cause) && !apierrors.IsGone(info.Cause) {
			t.Errorf("resync cause %v, want 410 Gone or Expired", info.Cause)
		}
		t.Logf("resync cause: %v", info.Cause)
		if rvNumber(t, info.To) <= rvNumber(t, info.From) {
			t.Errorf("resync from %s to %s, want forward", info.From, info.To)
		}
	}
	var starts, ends []int
	for i, e := range events {
		switch {
		case e.Type == watch.Error:
			t.Errorf("event #%d is %v, want no error", i, e)
		case e.Marker:
			starts = append(starts, i)
		case e.End:
			ends = append(ends, i)
		case e.Type == watch.Bookmark:
			t.Errorf("event #%d is a bookmark that is no resync marker: %v", i, e)
		}
	}
	if len(starts) != len(infos) || len(ends) != len(infos) {
		t.Fatalf("%d start and %d end markers in the stream, want %d of each (one per resync)", len(starts), len(ends), len(infos))
	}
	if len(infos) == 0 {
		return
	}
	m, end, info := starts[0], ends[0], infos[0]
	if got := events[m].RV; got != info.From {
		t.Errorf("start marker at resource version %s, want the expired %s", got, info.From)
	}
	if got := events[end].RV; got != info.To {
		t.Errorf("end marker at resource version %s, want the resync's %s", got, info.To)
	}
	// Before the marker: each ConfigMap once, in creation order.
	for i := 1; i < m; i++ {
		if rvNumber(t, events[i].RV) <= rvNumber(t, events[i-1].RV) {
			t.Errorf("before the resync, event #%d %v after #%d %v: not in order", i, events[i], i-1, events[i-1])
		}
	}
	// The replay, between the markers: what the list had, as ADDED events;
	// then live events after it.
	replay := events[m+1 : end]
	if len(replay) != info.Replayed {
		t.Errorf("%d events between the markers, want the %d the resync reported", len(replay), info.Replayed)
	}
	for _, e := range replay {
		if e.Type != watch.Added || rvNumber(t, e.RV) > rvNumber(t, info.To) {
			t.Errorf("replayed %v, want ADDED at or before %s", e, info.To)
		}
	}
	if info.Replayed < 2*n {
		t.Errorf("replayed %d events, want at least the %d created before the restart", info.Replayed, 2*n)
	}
	for i := end + 1; i < len(events); i++ {
		if rvNumber(t, events[i].RV) <= rvNumber(t, info.To) {
			t.Errorf("after the replay, event #%d %v is not after the resync's %s", i, events[i], info.To)
		}
	}
}
