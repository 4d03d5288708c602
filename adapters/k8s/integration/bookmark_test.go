package integration_test

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/resumable-go/resumable/adapters/k8s/internal/testenv"
)

// TestBookmarks watches a quiet namespace while ConfigMaps are written in
// another one. The server sends bookmarks once its cache has moved past a
// watch's resource version; the watcher's next watch asks for the last
// bookmark's resource version, and no bookmark reaches the consumer. Once
// the resource version has advanced, a write in the quiet namespace is the
// one event delivered. Ours and client-go's behave alike.
func TestBookmarks(t *testing.T) {
	env := testenv.Start(t)
	cs := newClient(t, env.Config())
	quiet := createNamespace(t, cs, "quiet")
	busy := createNamespace(t, cs, "busy")

	rv0 := listRV(t, quiet)
	var oursRec, upRec recorder
	rw, ours := startOurs(t, rv0, oursRec.listWatch(quiet))
	_, up := startUpstream(t, rv0, upRec.listWatch(quiet))
	watchers := []struct {
		name string
		c    *consumer
		rec  *recorder
	}{
		{name: "ours", c: ours, rec: &oursRec},
		{name: "client-go", c: up, rec: &upRec},
	}

	// advanced reports whether a watch after the first asked for a newer
	// resource version than rv0: nothing happened in the quiet namespace, so
	// only a bookmark can have moved it.
	advanced := func(rec *recorder) bool {
		for i, c := range rec.Calls() {
			if i > 0 && rvNumber(t, c.Opts.ResourceVersion) > rvNumber(t, rv0) {
				return true
			}
		}
		return false
	}
	writes := 0
	waitFor(t, "both watchers to reopen from a bookmark's resource version", func() (bool, string) {
		if advanced(&oursRec) && advanced(&upRec) {
			return true, ""
		}
		createConfigMap(t, busy, fmt.Sprintf("busy-%d", writes))
		writes++
		return false, fmt.Sprintf("%d writes elsewhere; ours: %s; client-go: %s",
			writes, describeCalls(oursRec.Calls()), describeCalls(upRec.Calls()))
	})
	if got := rvNumber(t, rw.LastResourceVersion()); got <= rvNumber(t, rv0) {
		t.Errorf("ours: LastResourceVersion() = %d, want more than %s", got, rv0)
	}

	for _, w := range watchers {
		calls := w.rec.Calls()
		t.Logf("%s, after %d writes elsewhere: %s", w.name, writes, describeCalls(calls))
		checkWatchCalls(t, w.name, rv0, calls)
		bookmarks := 0
		for i, c := range calls {
			bookmarks += len(c.Bookmarks)
			if c.Events != 0 {
				t.Errorf("%s: watch #%d received %d events from the quiet namespace, want none", w.name, i, c.Events)
			}
			if i == 0 || calls[i-1].Err != nil {
				continue
			}
			// The next watch asks for the last bookmark of the previous one,
			// or for the same resource version if it had none.
			prev := calls[i-1]
			want := prev.Opts.ResourceVersion
			if n := len(prev.Bookmarks); n > 0 {
				want = prev.Bookmarks[n-1]
			}
			if got := c.Opts.ResourceVersion; got != want {
				t.Errorf("%s: watch #%d from %s, want %s (bookmarks of #%d: %v)", w.name, i, got, want, i-1, prev.Bookmarks)
			}
		}
		if bookmarks == 0 {
			t.Errorf("%s: no bookmark received", w.name)
		}
		if n := w.c.Len(); n != 0 {
			t.Errorf("%s: the consumer received %d events, want none: %v", w.name, n, summarizeAll(w.c.Events()))
		}
	}

	// Watching from the bookmark's resource version still sees what comes.
	want := addedEvents(createConfigMaps(t, quiet, "quiet", 1))
	for _, w := range watchers {
		waitFor(t, w.name+" to deliver the quiet namespace's ConfigMap", func() (bool, string) {
			return w.c.Len() >= len(want) || w.c.Closed(), fmt.Sprintf("events: %v", summarizeAll(w.c.Events()))
		})
		if diff := cmp.Diff(want, summarizeAll(w.c.Events())); diff != "" {
			t.Errorf("%s: events (-want +got):\n%s", w.name, diff)
		}
	}
}
