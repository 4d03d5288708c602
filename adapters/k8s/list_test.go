package k8s_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/resumable-go/resumable/adapters/k8s"
)

// cluster is a ListerWatcher whose watch calls follow a script (see
// scripted) and whose lists are served in pages from a fixed set of
// ConfigMaps, with the page's start index as the continue token. listErr,
// when set, decides for each list call (numbered from 0) whether it fails.
type cluster struct {
	*scripted
	items   []corev1.ConfigMap
	rv      string
	listErr func(call int, o metav1.ListOptions) error
	pageCap int64 // when set, pages hold at most this many items, whatever the Limit

	mu    sync.Mutex
	lists []metav1.ListOptions
	pages []*corev1.ConfigMapList
}

func newCluster(rv string, n int, steps ...step) *cluster {
	c := &cluster{scripted: newScripted(steps...), rv: rv}
	for i := range n {
		c.items = append(c.items, *configMap("item-"+strconv.Itoa(i), 10+i))
	}
	return c
}

func (c *cluster) ListWithContext(_ context.Context, o metav1.ListOptions) (runtime.Object, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	call := len(c.lists)
	c.lists = append(c.lists, o)
	if c.listErr != nil {
		if err := c.listErr(call, o); err != nil {
			return nil, err
		}
	}
	start := 0
	if o.Continue != "" {
		start, _ = strconv.Atoi(o.Continue)
	}
	end, cont := len(c.items), ""
	limit := o.Limit
	if c.pageCap > 0 && (limit <= 0 || limit > c.pageCap) {
		limit = c.pageCap // a server may page below the Limit
	}
	if limit > 0 && start+int(limit) < end {
		end = start + int(limit)
		cont = strconv.Itoa(end)
	}
	page := &corev1.ConfigMapList{ListMeta: metav1.ListMeta{ResourceVersion: c.rv, Continue: cont}}
	page.Items = append(page.Items, c.items[start:end]...)
	c.pages = append(c.pages, page)
	return page, nil
}

func (c *cluster) List(o metav1.ListOptions) (runtime.Object, error) {
	return c.ListWithContext(context.Background(), o)
}

func (c *cluster) Watch(o metav1.ListOptions) (watch.Interface, error) {
	return c.WatchWithContext(context.Background(), o)
}

// Lists returns the options of the list calls so far.
func (c *cluster) Lists() []metav1.ListOptions {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]metav1.ListOptions(nil), c.lists...)
}

// items returns the Added events of the ConfigMaps from index i to j.
func (c *cluster) added(i, j int) []watch.Event {
	var out []watch.Event
	for k := i; k < j; k++ {
		out = append(out, watch.Event{Type: watch.Added, Object: &c.items[k]})
	}
	return out
}

// cat concatenates event lists.
func cat(parts ...[]watch.Event) []watch.Event {
	var out []watch.Event
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

var cmMarker = &corev1.ConfigMap{}

// tooLarge is the error of a server asked for a resource version newer than
// it knows.
func tooLarge() error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: 504, Reason: metav1.StatusReasonTimeout,
		Message: "Too large resource version",
		Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{Type: metav1.CauseTypeResourceVersionTooLarge}}},
	}}
}

func TestListResyncPages(t *testing.T) {
	t.Parallel()
	gone := apierrors.NewResourceExpired("too old resource version: 5 (10)")
	continueExpired := apierrors.NewResourceExpired("The provided continue parameter is too old")
	notOlder := func(rv string) metav1.ListOptions {
		return metav1.ListOptions{ResourceVersion: rv, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan, Limit: 500}
	}
	page := func(cont string) metav1.ListOptions { return metav1.ListOptions{Limit: 500, Continue: cont} }
	failOn := func(calls ...int) func(int, metav1.ListOptions) error {
		return func(call int, _ metav1.ListOptions) error {
			for _, c := range calls {
				if c == call {
					return continueExpired
				}
			}
			return nil
		}
	}
	tests := []struct {
		name      string
		steps     []step // the watch calls; each opening with 410 asks for a resync
		listErr   func(int, metav1.ListOptions) error
		wantLists []metav1.ListOptions
		want      func(c *cluster) []watch.Event
	}{
		{
			name:      "pages from the expired resource version",
			steps:     []step{{err: gone}},
			wantLists: []metav1.ListOptions{notOlder("5"), page("2"), page("4")},
			want: func(c *cluster) []watch.Event {
				return cat([]watch.Event{marker(cmMarker, 5)}, c.added(0, 5), []watch.Event{endMarker(cmMarker, 40)})
			},
		},
		{
			name:  "410 at the resource version: a consistent read",
			steps: []step{{err: gone}},
			listErr: func(call int, _ metav1.ListOptions) error {
				if call == 0 {
					return gone
				}
				return nil
			},
			wantLists: []metav1.ListOptions{notOlder("5"), {Limit: 500}, page("2"), page("4")},
			want: func(c *cluster) []watch.Event {
				return cat([]watch.Event{marker(cmMarker, 5)}, c.added(0, 5), []watch.Event{endMarker(cmMarker, 40)})
			},
		},
		{
			name:  "too large a resource version: a consistent read",
			steps: []step{{err: gone}},
			listErr: func(call int, _ metav1.ListOptions) error {
				if call == 0 {
					return tooLarge()
				}
				return nil
			},
			wantLists: []metav1.ListOptions{notOlder("5"), {Limit: 500}, page("2"), page("4")},
			want: func(c *cluster) []watch.Event {
				return cat([]watch.Event{marker(cmMarker, 5)}, c.added(0, 5), []watch.Event{endMarker(cmMarker, 40)})
			},
		},
		{
			name:      "an expired continue token starts the replay over",
			steps:     []step{{err: gone}},
			listErr:   failOn(1),
			wantLists: []metav1.ListOptions{notOlder("5"), page("2"), notOlder("5"), page("2"), page("4")},
			want: func(c *cluster) []watch.Event {
				return cat([]watch.Event{marker(cmMarker, 5)}, c.added(0, 2),
					[]watch.Event{marker(cmMarker, 5)}, c.added(0, 5), []watch.Event{endMarker(cmMarker, 40)})
			},
		},
		{
			name:    "a second expiry fails the resync, which is retried",
			steps:   []step{{err: gone}, {err: gone}},
			listErr: failOn(1, 3),
			wantLists: []metav1.ListOptions{notOlder("5"), page("2"), notOlder("5"), page("2"),
				notOlder("5"), page("2"), page("4")},
			want: func(c *cluster) []watch.Event {
				return cat([]watch.Event{marker(cmMarker, 5)}, c.added(0, 2),
					[]watch.Event{marker(cmMarker, 5)}, c.added(0, 2),
					[]watch.Event{marker(cmMarker, 5)}, c.added(0, 5), []watch.Event{endMarker(cmMarker, 40)})
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newCluster("40", 5, tc.steps...)
			c.listErr = tc.listErr
			c.pageCap = 2
			rw, err := k8s.NewRetryWatcherWithContext(context.Background(), "5", c,
				k8s.WithMinRestartDelay(0), k8s.WithResync(k8s.ListResync(c)))
			if err != nil {
				t.Fatal(err)
			}
			want := tc.want(c)
			got := receive(t, rw, len(want))
			c.waitIdle(t)
			stop(t, rw)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantLists, c.Lists()); diff != "" {
				t.Errorf("list calls (-want +got):\n%s", diff)
			}
			// Each object is delivered in an allocation of its own: a
			// consumer that keeps one does not keep its page.
			c.mu.Lock()
			defer c.mu.Unlock()
			for _, ev := range got {
				for _, p := range c.pages {
					for i := range p.Items {
						if ev.Object == runtime.Object(&p.Items[i]) {
							t.Fatalf("%s was delivered inside its page", p.Items[i].Name)
						}
					}
				}
			}
		})
	}
}

func TestListResyncBadArguments(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		f           k8s.ResyncFunc
		wantMessage string
	}{
		{name: "nil ListerWatcher", f: k8s.ListResync(nil), wantMessage: "k8s: ListResync: lw = nil: must not be nil"},
		{name: "nil ListerWatcher, WatchList", f: k8s.WatchListResync(nil), wantMessage: "k8s: WatchListResync: lw = nil: must not be nil"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			lw := newScripted(step{err: newGone("too old")})
			rw, err := k8s.NewRetryWatcherWithContext(context.Background(), "5", lw, k8s.WithResync(tc.f))
			if err != nil {
				t.Fatal(err)
			}
			last := receive(t, rw, 1)[0]
			waitClosed(t, rw)
			st, ok := last.Object.(*metav1.Status)
			if last.Type != watch.Error || !ok || !strings.Contains(st.Message, tc.wantMessage) {
				t.Errorf("last event = %v %+v, want an Error whose Status says %q", last.Type, last.Object, tc.wantMessage)
			}
		})
	}
}

// initialEventsEnd is the bookmark that ends a WatchList's initial events.
func initialEventsEnd(rv int) watch.Event {
	return annotated(&corev1.ConfigMap{}, metav1.InitialEventsAnnotationKey, rv)
}

// watchList is the options of a WatchList request from rv.
func watchList(rv string) metav1.ListOptions {
	return metav1.ListOptions{
		ResourceVersion:      rv,
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
		SendInitialEvents:    ref(true),
		AllowWatchBookmarks:  true,
		TimeoutSeconds:       ref[int64](600),
	}
}

// watchFrom is the options of a plain watch from rv.
func watchFrom(rv string) metav1.ListOptions {
	return metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true}
}

func TestWatchListResync(t *testing.T) {
	t.Parallel()
	gone := apierrors.NewResourceExpired("too old resource version: 5 (10)")
	invalid := apierrors.NewInvalid(schema.GroupKind{Kind: "ListOptions"}, "", field.ErrorList{
		field.Forbidden(field.NewPath("sendInitialEvents"), "sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled"),
	})
	a, b := added(31), added(32)
	plainBookmark := bookmark(33)
	tests := []struct {
		name        string
		steps       []step
		wantWatches []metav1.ListOptions
		wantLists   int // list calls
		want        func(c *cluster) []watch.Event
	}{
		{
			name:        "streams the initial events",
			steps:       []step{{err: gone}, {events: []watch.Event{a, b, initialEventsEnd(35)}, keepOpen: true}},
			wantWatches: []metav1.ListOptions{watchFrom("5"), watchList("5"), watchFrom("35")},
			want: func(*cluster) []watch.Event {
				return []watch.Event{marker(cmMarker, 5), a, b, endMarker(cmMarker, 35)}
			},
		},
		{
			name:        "410 from the expired resource version: from the current state",
			steps:       []step{{err: gone}, {err: gone}, {events: []watch.Event{a, initialEventsEnd(35)}}},
			wantWatches: []metav1.ListOptions{watchFrom("5"), watchList("5"), watchList(""), watchFrom("35")},
			want: func(*cluster) []watch.Event {
				return []watch.Event{marker(cmMarker, 5), a, endMarker(cmMarker, 35)}
			},
		},
		{
			name:        "too large a resource version in the stream: from the current state",
			steps:       []step{{err: gone}, {events: []watch.Event{statusEvent(tooLarge().(*apierrors.StatusError).ErrStatus)}}, {events: []watch.Event{a, initialEventsEnd(35)}}},
			wantWatches: []metav1.ListOptions{watchFrom("5"), watchList("5"), watchList(""), watchFrom("35")},
			want: func(*cluster) []watch.Event {
				return []watch.Event{marker(cmMarker, 5), a, endMarker(cmMarker, 35)}
			},
		},
		{
			name:  "refused as invalid: lists, then and after",
			steps: []step{{err: gone}, {err: invalid}, {err: gone}},
			// The second resync lists without asking again.
			wantWatches: []metav1.ListOptions{watchFrom("5"), watchList("5"), watchFrom("40"), watchFrom("40")},
			wantLists:   2,
			want: func(c *cluster) []watch.Event {
				return cat([]watch.Event{marker(cmMarker, 5)}, c.added(0, 3), []watch.Event{endMarker(cmMarker, 40)},
					[]watch.Event{marker(cmMarker, 40)}, c.added(0, 3), []watch.Event{endMarker(cmMarker, 40)})
			},
		},
		{
			name:        "the server ignores SendInitialEvents: the replay starts over from a list, then and after",
			steps:       []step{{err: gone}, {events: []watch.Event{a, plainBookmark}}, {err: gone}},
			wantWatches: []metav1.ListOptions{watchFrom("5"), watchList("5"), watchFrom("40"), watchFrom("40")},
			wantLists:   2,
			want: func(c *cluster) []watch.Event {
				return cat([]watch.Event{marker(cmMarker, 5), a, marker(cmMarker, 5)}, c.added(0, 3), []watch.Event{endMarker(cmMarker, 40)},
					[]watch.Event{marker(cmMarker, 40)}, c.added(0, 3), []watch.Event{endMarker(cmMarker, 40)})
			},
		},
		{
			name:        "a change before the end bookmark: the server ignores SendInitialEvents",
			steps:       []step{{err: gone}, {events: []watch.Event{a, modified(34)}}},
			wantWatches: []metav1.ListOptions{watchFrom("5"), watchList("5"), watchFrom("40")},
			wantLists:   1,
			want: func(c *cluster) []watch.Event {
				return cat([]watch.Event{marker(cmMarker, 5), a, marker(cmMarker, 5)}, c.added(0, 3), []watch.Event{endMarker(cmMarker, 40)})
			},
		},
		{
			name: "the stream ends before the end bookmark: lists this time only",
			steps: []step{{err: gone}, {events: []watch.Event{a}}, {err: gone},
				{events: []watch.Event{b, initialEventsEnd(45)}}},
			wantWatches: []metav1.ListOptions{watchFrom("5"), watchList("5"), watchFrom("40"), watchList("40"), watchFrom("45")},
			wantLists:   1,
			want: func(c *cluster) []watch.Event {
				return cat([]watch.Event{marker(cmMarker, 5), a, marker(cmMarker, 5)}, c.added(0, 3), []watch.Event{endMarker(cmMarker, 40)},
					[]watch.Event{marker(cmMarker, 40), b, endMarker(cmMarker, 45)})
			},
		},
		{
			name:        "another failure before any event: lists, without a second start marker",
			steps:       []step{{err: gone}, {err: apierrors.NewInternalError(errTest)}},
			wantWatches: []metav1.ListOptions{watchFrom("5"), watchList("5"), watchFrom("40")},
			wantLists:   1,
			want: func(c *cluster) []watch.Event {
				return cat([]watch.Event{marker(cmMarker, 5)}, c.added(0, 3), []watch.Event{endMarker(cmMarker, 40)})
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newCluster("40", 3, tc.steps...)
			rw, err := k8s.NewRetryWatcherWithContext(context.Background(), "5", c,
				k8s.WithMinRestartDelay(0), k8s.WithResync(k8s.WatchListResync(c)))
			if err != nil {
				t.Fatal(err)
			}
			want := tc.want(c)
			got := receive(t, rw, len(want))
			c.waitIdle(t)
			stop(t, rw)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			c.scripted.mu.Lock()
			watches := append([]metav1.ListOptions(nil), c.scripted.calls...)
			c.scripted.mu.Unlock()
			if diff := cmp.Diff(tc.wantWatches, watches); diff != "" {
				t.Errorf("watch calls (-want +got):\n%s", diff)
			}
			if got := len(c.Lists()); got != tc.wantLists {
				t.Errorf("%d list calls, want %d", got, tc.wantLists)
			}
		})
	}
}

// TestWatchListResyncFakeClient checks that a client that says it does not
// serve WatchList (client-go's fakes) is listed at once.
func TestWatchListResyncFakeClient(t *testing.T) {
	t.Parallel()
	cs := fake.NewClientset(configMap("a", 2), configMap("b", 3))
	lists := recordLists(cs)
	lw := listWatch(cs)
	first := true
	watchFunc := lw.WatchFuncWithContext
	var mu sync.Mutex
	var watches []metav1.ListOptions
	lw.WatchFuncWithContext = func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		mu.Lock()
		watches = append(watches, o)
		defer mu.Unlock()
		if first {
			first = false
			return nil, apierrors.NewResourceExpired("too old resource version: 1 (3)")
		}
		return watchFunc(ctx, o)
	}
	semantic := cache.ToListWatcherWithWatchListSemantics(lw, cs)
	rw, err := k8s.NewRetryWatcherWithContext(context.Background(), "1", lw,
		k8s.WithResync(k8s.WatchListResync(semantic)), k8s.WithMinRestartDelay(0))
	if err != nil {
		t.Fatal(err)
	}
	got := receive(t, rw, 4)
	stop(t, rw)
	if !k8s.IsResyncMarker(got[0]) || !k8s.IsResyncEnd(got[3]) {
		t.Errorf("events = %v, want a replay between markers", got)
	}
	if n := len(lists()); n != 1 {
		t.Errorf("%d list calls, want 1", n)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, o := range watches {
		if o.SendInitialEvents != nil {
			t.Errorf("a watch call asked for initial events: %+v", o)
		}
	}
}

// ref returns a pointer to v.
func ref[T any](v T) *T { return &v }
