package integration_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/resumable-go/resumable/adapters/k8s"
	"github.com/resumable-go/resumable/adapters/k8s/internal/testenv"
)

// cutter is a ListerWatcher that can be cut off from the server: while cut,
// every call fails as a refused connection would, and Cut stops the watches
// open at that moment (their result channels close, as when a connection
// drops).
type cutter struct {
	lw cache.ListerWatcherWithContext

	mu   sync.Mutex
	cut  bool
	open []watch.Interface
}

// cutPageSize is the most objects a list page of a cutter holds.
const cutPageSize = 7

var errCut = fmt.Errorf("cutter: dial tcp 127.0.0.1: %w", syscall.ECONNREFUSED)

// Cut refuses calls from now on and stops the open watches.
func (c *cutter) Cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cut = true
	for _, w := range c.open {
		w.Stop()
	}
	c.open = nil
}

// Heal lets calls through again.
func (c *cutter) Heal() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cut = false
}

func (c *cutter) ListWithContext(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
	c.mu.Lock()
	cut := c.cut
	c.mu.Unlock()
	if cut {
		return nil, errCut
	}
	if o.Limit > cutPageSize {
		o.Limit = cutPageSize // many pages, so that cuts fall between them
	}
	return c.lw.ListWithContext(ctx, o)
}

func (c *cutter) WatchWithContext(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	c.mu.Lock()
	cut := c.cut
	c.mu.Unlock()
	if cut {
		return nil, errCut
	}
	w, err := c.lw.WatchWithContext(ctx, o)
	if err != nil || w == nil {
		return w, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cut { // cut while the call was made
		w.Stop()
		return nil, errCut
	}
	c.open = append(c.open, w)
	return w, nil
}

func (c *cutter) List(o metav1.ListOptions) (runtime.Object, error) {
	return c.ListWithContext(context.Background(), o)
}

func (c *cutter) Watch(o metav1.ListOptions) (watch.Interface, error) {
	return c.WatchWithContext(context.Background(), o)
}

// mirror is a consumer that keeps the state of the watched collection
// (name → resource version) from a RetryWatcher's events. Without diff it
// replaces its state with the replay between the resync markers; with it,
// it applies every event as it comes. It keeps the events of each replay.
type mirror struct {
	replace bool

	mu       sync.Mutex
	state    map[string]string
	next     map[string]string // the replay being collected (replace)
	inReplay bool
	replay   []event   // the events of the replay in progress
	replays  [][]event // the events of each completed replay
	errors   []event
	closed   chan struct{}
}

func startMirror(ch <-chan watch.Event, replace bool) *mirror {
	m := &mirror{replace: replace, state: map[string]string{}, closed: make(chan struct{})}
	go func() {
		defer close(m.closed)
		for ev := range ch {
			m.apply(ev)
		}
	}()
	return m
}

func (m *mirror) apply(ev watch.Event) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := summarize(ev)
	switch {
	case e.Marker:
		// A new start marker also drops a replay cut short.
		m.inReplay, m.replay, m.next = true, nil, map[string]string{}
		return
	case e.End:
		if m.replace {
			m.state = m.next
		}
		m.inReplay = false
		m.replays = append(m.replays, m.replay)
		m.replay = nil
		return
	case e.Type == watch.Error:
		m.errors = append(m.errors, e)
		return
	case e.Type == watch.Bookmark:
		return
	}
	target := m.state
	if m.inReplay {
		m.replay = append(m.replay, e)
		if m.replace {
			target = m.next
		}
	}
	if e.Type == watch.Deleted {
		delete(target, e.Name)
	} else {
		target[e.Name] = e.RV
	}
}

// State returns a copy of the state, and the replays completed so far.
func (m *mirror) State() (map[string]string, [][]event) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.state), slices.Clone(m.replays)
}

// Errors returns the Error events received.
func (m *mirror) Errors() []event {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.errors)
}

// listState lists cms and returns name → resource version.
func listState(t *testing.T, cms typedcorev1.ConfigMapInterface) map[string]string {
	t.Helper()
	list, err := cms.List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list ConfigMaps: %v", err)
	}
	out := map[string]string{}
	for _, cm := range list.Items {
		out[cm.Name] = cm.ResourceVersion
	}
	return out
}

// names returns the names of n ConfigMaps prefix-0 … prefix-(n-1).
func names(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = prefix + "-" + strconv.Itoa(i)
	}
	return out
}

// TestResyncAfterCut cuts the watcher off from the server while ConfigMaps
// are created, updated and deleted and the API server restarts; once the
// cut heals, the watch from the last resource version meets 410, the
// watcher resyncs, and a consumer mirroring the stream must equal a fresh
// list: applying each event with WithResyncDiff, replacing its state
// between the markers without. With WithResyncDiff no event arrives for an
// object that did not change, and every other change arrives as the event
// it is. Every List a resync makes is paginated, starting at the expired
// resource version; a WatchList resync makes none.
func TestResyncAfterCut(t *testing.T) {
	env := testenv.Start(t)
	cs := newClient(t, env.Config())
	const keep, update, remove, create = 20, 10, 10, 10
	modes := []struct {
		name      string
		diff      bool
		watchList bool
	}{
		{name: "list/replace"},
		{name: "list/diff", diff: true},
		{name: "watchlist/replace", watchList: true},
		{name: "watchlist/diff", diff: true, watchList: true},
	}
	for i, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			cms := createNamespace(t, cs, "cut-"+strconv.Itoa(i))
			var rec recorder
			c := &cutter{lw: rec.listWatch(cms)}
			resync := k8s.ListResync(c)
			if mode.watchList {
				resync = k8s.WatchListResync(c)
			}
			opts := []k8s.Option{k8s.WithResync(resync)}
			if mode.diff {
				opts = append(opts, k8s.WithResyncDiff())
			}
			rw, err := k8s.NewRetryWatcherWithContext(t.Context(), listRV(t, cms), c, opts...)
			if err != nil {
				t.Fatalf("k8s.NewRetryWatcherWithContext() = %v", err)
			}
			m := startMirror(rw.ResultChan(), !mode.diff)
			t.Cleanup(func() {
				rw.Stop()
				<-m.closed
				<-rw.Done()
			})

			for _, prefix := range []string{"keep", "update", "remove"} {
				n := map[string]int{"keep": keep, "update": update, "remove": remove}[prefix]
				createConfigMaps(t, cms, prefix, n)
			}
			waitFor(t, "the mirror to hold the first objects", func() (bool, string) {
				state, _ := m.State()
				return len(state) == keep+update+remove, fmt.Sprintf("%d objects; errors: %v", len(state), m.Errors())
			})
			before := rw.LastResourceVersion()

			c.Cut()
			for _, name := range names("update", update) {
				cm, err := cms.Get(t.Context(), name, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				cm.Data["updated"] = "true"
				if _, err := cms.Update(t.Context(), cm, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			for _, name := range names("remove", remove) {
				if err := cms.Delete(t.Context(), name, metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			createConfigMaps(t, cms, "create", create/2)
			env.RestartAPIServer(t)
			rec.SetEpoch(1)
			for _, name := range names("create", create)[create/2:] {
				createConfigMap(t, cms, name)
			}
			c.Heal()

			want := listState(t, cms)
			waitFor(t, "the mirror to equal a fresh list", func() (bool, string) {
				if c, ok := acceptedWithout410(rec.Calls(), 1); ok && c.Opts.SendInitialEvents == nil && c.Opts.ResourceVersion == before {
					t.Fatalf("after the restart the server accepted a watch from %s without a 410; this test needs one", c.Opts.ResourceVersion)
				}
				state, replays := m.State()
				return len(replays) > 0 && cmp.Equal(want, state),
					fmt.Sprintf("%d replays; errors: %v; diff (-list +mirror):\n%s", len(replays), m.Errors(), cmp.Diff(want, state))
			})
			_, replays := m.State()
			if len(replays) != 1 {
				t.Errorf("%d resyncs, want 1", len(replays))
			}
			if errs := m.Errors(); len(errs) > 0 {
				t.Errorf("Error events: %v", errs)
			}
			replay := replays[len(replays)-1]
			t.Logf("resync from %s: %d events; watch calls: %s", before, len(replay), describeCalls(rec.Calls()))
			checkReplay(t, replay, mode.diff, keep, update, remove, create)
			checkResyncRequests(t, &rec, before, mode.watchList)
		})
	}
}

// checkReplay checks the events of a replay: with a diff, one event per
// change and nothing for the objects kept; without, every object as ADDED.
func checkReplay(t *testing.T, replay []event, diff bool, keep, update, remove, create int) {
	t.Helper()
	got := map[string]watch.EventType{}
	for _, e := range replay {
		if _, dup := got[e.Name]; dup {
			t.Errorf("two events for %s in the replay", e.Name)
		}
		got[e.Name] = e.Type
	}
	want := map[string]watch.EventType{}
	add := func(names []string, typ watch.EventType) {
		for _, n := range names {
			want[n] = typ
		}
	}
	if diff {
		add(names("update", update), watch.Modified)
		add(names("remove", remove), watch.Deleted)
		add(names("create", create), watch.Added)
	} else {
		add(names("keep", keep), watch.Added)
		add(names("update", update), watch.Added)
		add(names("create", create), watch.Added)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("replay events by object (-want +got):\n%s", d)
	}
}

// checkResyncRequests checks the requests of the resync: every list
// paginated, the first at the expired resource version "not older than";
// a WatchList, when it was one, from there too and with no list at all.
func checkResyncRequests(t *testing.T, rec *recorder, from string, watchList bool) {
	t.Helper()
	lists := rec.Lists()
	var streams []metav1.ListOptions
	for _, c := range rec.Calls() {
		if c.Opts.SendInitialEvents != nil {
			streams = append(streams, c.Opts)
		}
	}
	if watchList {
		if len(lists) > 0 || len(streams) == 0 {
			t.Errorf("WatchList resync: %d lists, %d WatchList requests; want none and some", len(lists), len(streams))
		}
		for _, o := range streams {
			if !*o.SendInitialEvents || !o.AllowWatchBookmarks || o.ResourceVersionMatch != metav1.ResourceVersionMatchNotOlderThan {
				t.Errorf("WatchList request %+v, want SendInitialEvents, AllowWatchBookmarks and NotOlderThan", o)
			}
		}
		if len(streams) > 0 && streams[0].ResourceVersion != from {
			t.Errorf("first WatchList from %q, want the expired %s", streams[0].ResourceVersion, from)
		}
		return
	}
	if len(lists) == 0 || len(streams) > 0 {
		t.Fatalf("list resync: %d lists, %d WatchList requests; want some and none", len(lists), len(streams))
	}
	for i, o := range lists {
		if o.Limit != 7 {
			t.Errorf("list #%d %+v: not paginated by 7", i, o)
		}
	}
	if o := lists[0]; o.ResourceVersion != from || o.ResourceVersionMatch != metav1.ResourceVersionMatchNotOlderThan {
		t.Errorf("first list %+v, want resource version %s not older than", o, from)
	}
	if len(lists) < 2 {
		t.Errorf("%d lists of 7 for more than 7 objects, want several pages", len(lists))
	}
}
