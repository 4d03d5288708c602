package k8s_test

import (
	"context"
	"errors"
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
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/resumable-go/resumable/adapters/k8s"
	"github.com/resumable-go/resumable/errclass"
	"github.com/resumable-go/resumable/stream"
)

// annotated is a Bookmark at rv with annotation set, with an object of
// obj's type.
func annotated(obj runtime.Object, annotation string, rv int) watch.Event {
	annotations := map[string]string{annotation: "true"}
	meta := metav1.ObjectMeta{ResourceVersion: strconv.Itoa(rv), Annotations: annotations}
	switch obj.(type) {
	case *corev1.ConfigMap:
		return watch.Event{Type: watch.Bookmark, Object: &corev1.ConfigMap{ObjectMeta: meta}}
	case *corev1.Secret:
		return watch.Event{Type: watch.Bookmark, Object: &corev1.Secret{ObjectMeta: meta}}
	}
	return watch.Event{Type: watch.Bookmark, Object: &metav1.PartialObjectMetadata{ObjectMeta: meta}}
}

// marker is the start marker a RetryWatcher delivers before a replay from
// rv (the resource version that expired), with an object of obj's type.
func marker(obj runtime.Object, rv int) watch.Event {
	return annotated(obj, k8s.ResyncAnnotation, rv)
}

// endMarker is the end marker a RetryWatcher delivers after a replay, at
// the resource version it continues from.
func endMarker(obj runtime.Object, rv int) watch.Event {
	return annotated(obj, k8s.ResyncEndAnnotation, rv)
}

func secret(rv int) watch.Event {
	return watch.Event{Type: watch.Added, Object: &corev1.Secret{ObjectMeta: metav1.ObjectMeta{
		Name: "s-" + strconv.Itoa(rv), ResourceVersion: strconv.Itoa(rv),
	}}}
}

// resyncScript is a ResyncFunc that answers from a list of results, one per
// call, and counts its calls.
type resyncScript struct {
	mu      sync.Mutex
	results []resyncResult
	calls   int
	froms   []string // the from of each call
}

// resyncResult is what one call of a resyncScript does: it emits replay,
// then returns rv and err.
type resyncResult struct {
	rv     string
	replay []watch.Event
	err    error
}

func (s *resyncScript) resync(_ context.Context, from string, emit func(watch.Event) error) (string, error) {
	s.mu.Lock()
	r := s.results[min(s.calls, len(s.results)-1)]
	s.calls++
	s.froms = append(s.froms, from)
	s.mu.Unlock()
	for _, ev := range r.replay {
		if err := emit(ev); err != nil {
			return "", err
		}
	}
	return r.rv, r.err
}

func TestRetryWatcherResync(t *testing.T) {
	t.Parallel()
	gone := statusEvent(newGone("too old resource version: 5 (10)").ErrStatus)
	openGone := newGone("too old")
	openExpired := apierrors.NewResourceExpired("too old resource version: 5 (10)")
	listed := resyncResult{rv: "20", replay: []watch.Event{added(18), added(19)}}
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "", errors.New("cannot list"))
	tests := []struct {
		name        string
		steps       []step
		results     []resyncResult
		want        []watch.Event
		wantRVs     []string
		wantInfos   []stream.ResyncEvent[string] // Cause compared by message
		wantResyncs int
		wantMessage string // the watcher stops with an Error event whose Status says this
	}{
		{
			name:        "410 Gone at open",
			steps:       []step{{err: openGone}, {events: []watch.Event{added(21)}}},
			results:     []resyncResult{listed},
			want:        []watch.Event{marker(&corev1.ConfigMap{}, 5), added(18), added(19), endMarker(&corev1.ConfigMap{}, 20), added(21)},
			wantRVs:     []string{"5", "20", "21"},
			wantInfos:   []stream.ResyncEvent[string]{{Cause: openGone, From: "5", To: "20", Replayed: 2}},
			wantResyncs: 1,
		},
		{
			name:        "Expired at open",
			steps:       []step{{err: openExpired}, {events: []watch.Event{added(21)}}},
			results:     []resyncResult{listed},
			want:        []watch.Event{marker(&corev1.ConfigMap{}, 5), added(18), added(19), endMarker(&corev1.ConfigMap{}, 20), added(21)},
			wantRVs:     []string{"5", "20", "21"},
			wantInfos:   []stream.ResyncEvent[string]{{Cause: openExpired, From: "5", To: "20", Replayed: 2}},
			wantResyncs: 1,
		},
		{
			name:        "410 Gone in the stream is not forwarded",
			steps:       []step{{events: []watch.Event{added(6), gone, added(7)}}, {events: []watch.Event{added(21)}}},
			results:     []resyncResult{listed},
			want:        []watch.Event{added(6), marker(&corev1.ConfigMap{}, 6), added(18), added(19), endMarker(&corev1.ConfigMap{}, 20), added(21)},
			wantRVs:     []string{"5", "20", "21"},
			wantInfos:   []stream.ResyncEvent[string]{{Cause: &k8s.EventError{Event: gone, Err: apierrors.FromObject(gone.Object)}, From: "6", To: "20", Replayed: 2}},
			wantResyncs: 1,
		},
		{
			name:        "a failing ResyncFunc is retried",
			steps:       []step{{err: openGone}, {err: openGone}, {err: openGone}},
			results:     []resyncResult{{err: errTest}, {err: apierrors.NewInternalError(errTest)}, listed},
			want:        []watch.Event{marker(&corev1.ConfigMap{}, 5), added(18), added(19), endMarker(&corev1.ConfigMap{}, 20)},
			wantRVs:     []string{"5", "5", "5", "20"},
			wantInfos:   []stream.ResyncEvent[string]{{Cause: openGone, From: "5", To: "20", Replayed: 2}},
			wantResyncs: 3,
		},
		{
			name:        "a ResyncFunc that gives up stops the watcher",
			steps:       []step{{err: openGone}},
			results:     []resyncResult{{err: errclass.Permanent(errTest)}},
			wantRVs:     []string{"5"},
			wantResyncs: 1,
			wantMessage: errTest.Error(),
		},
		{
			name:        "a ResyncFunc that is forbidden stops the watcher with its Status",
			steps:       []step{{events: []watch.Event{gone}}},
			results:     []resyncResult{{err: forbidden}},
			wantRVs:     []string{"5"},
			wantResyncs: 1,
			wantMessage: forbidden.ErrStatus.Message,
		},
		{
			name:        "a ResyncFunc that returns no resource version stops the watcher",
			steps:       []step{{err: openGone}},
			results:     []resyncResult{{rv: "", replay: []watch.Event{added(18)}}},
			want:        []watch.Event{marker(&corev1.ConfigMap{}, 5), added(18)},
			wantRVs:     []string{"5"},
			wantResyncs: 1,
			wantMessage: `the ResyncFunc returned resource version ""`,
		},
		{
			name:        "the marker takes the type of the replay",
			steps:       []step{{events: []watch.Event{added(6), gone}}},
			results:     []resyncResult{{rv: "20", replay: []watch.Event{secret(19)}}},
			want:        []watch.Event{added(6), marker(&corev1.Secret{}, 6), secret(19), endMarker(&corev1.Secret{}, 20)},
			wantRVs:     []string{"5", "20"},
			wantInfos:   []stream.ResyncEvent[string]{{Cause: &k8s.EventError{Event: gone, Err: apierrors.FromObject(gone.Object)}, From: "6", To: "20", Replayed: 1}},
			wantResyncs: 1,
		},
		{
			name:        "an empty replay: the marker takes the type of the last event",
			steps:       []step{{events: []watch.Event{added(6), gone}}},
			results:     []resyncResult{{rv: "20"}},
			want:        []watch.Event{added(6), marker(&corev1.ConfigMap{}, 6), endMarker(&corev1.ConfigMap{}, 20)},
			wantRVs:     []string{"5", "20"},
			wantInfos:   []stream.ResyncEvent[string]{{Cause: &k8s.EventError{Event: gone, Err: apierrors.FromObject(gone.Object)}, From: "6", To: "20", Replayed: 0}},
			wantResyncs: 1,
		},
		{
			name:        "no type known: the marker is a PartialObjectMetadata",
			steps:       []step{{err: openGone}},
			results:     []resyncResult{{rv: "20"}},
			want:        []watch.Event{marker(nil, 5), endMarker(nil, 20)},
			wantRVs:     []string{"5", "20"},
			wantInfos:   []stream.ResyncEvent[string]{{Cause: openGone, From: "5", To: "20", Replayed: 0}},
			wantResyncs: 1,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			lw := newScripted(tc.steps...)
			rs := &resyncScript{results: tc.results}
			var mu sync.Mutex
			var infos []stream.ResyncEvent[string]
			rw, err := k8s.NewRetryWatcherWithContext(context.Background(), "5", lw,
				k8s.WithMinRestartDelay(0),
				k8s.WithResync(rs.resync),
				k8s.WithHooks(stream.Hooks[string]{OnResync: func(i stream.ResyncEvent[string]) {
					mu.Lock()
					infos = append(infos, i)
					mu.Unlock()
				}}))
			if err != nil {
				t.Fatal(err)
			}
			got := receive(t, rw, len(tc.want))
			if tc.wantMessage != "" {
				last := receive(t, rw, 1)[0]
				waitClosed(t, rw)
				st, ok := last.Object.(*metav1.Status)
				if last.Type != watch.Error || !ok || !strings.Contains(st.Message, tc.wantMessage) {
					t.Errorf("last event = %v %+v, want an Error whose Status says %q", last.Type, last.Object, tc.wantMessage)
				}
			} else {
				lw.waitIdle(t)
				stop(t, rw)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			for i, ev := range got {
				if (k8s.IsResyncMarker(ev) || k8s.IsResyncEnd(ev)) != (ev.Type == watch.Bookmark) {
					t.Errorf("event %d: a %v event that is a marker, or a marker that is not a Bookmark", i, ev.Type)
				}
			}
			if diff := cmp.Diff(tc.wantRVs, lw.rvs(t)); diff != "" {
				t.Errorf("watch resource versions (-want +got):\n%s", diff)
			}
			rs.mu.Lock()
			if rs.calls != tc.wantResyncs {
				t.Errorf("ResyncFunc called %d times, want %d", rs.calls, tc.wantResyncs)
			}
			rs.mu.Unlock()
			mu.Lock()
			defer mu.Unlock()
			errMessage := cmp.Comparer(func(a, b error) bool { return a.Error() == b.Error() })
			if diff := cmp.Diff(tc.wantInfos, infos, errMessage); diff != "" {
				t.Errorf("OnResync calls (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRetryWatcherResyncCauseType checks that OnResync hands over the
// failure itself, not a wrapper.
func TestRetryWatcherResyncCauseType(t *testing.T) {
	t.Parallel()
	lw := newScripted(step{err: newGone("too old")})
	infos := make(chan stream.ResyncEvent[string], 1)
	rw, err := k8s.NewRetryWatcherWithContext(context.Background(), "5", lw,
		k8s.WithResync(func(context.Context, string, func(watch.Event) error) (string, error) { return "9", nil }),
		k8s.WithHooks(stream.Hooks[string]{OnResync: func(i stream.ResyncEvent[string]) { infos <- i }}))
	if err != nil {
		t.Fatal(err)
	}
	receive(t, rw, 2)
	info := <-infos
	stop(t, rw)
	if _, ok := info.Cause.(*apierrors.StatusError); !ok || !apierrors.IsGone(info.Cause) {
		t.Errorf("ResyncInfo.Cause = %T %v, want the *StatusError of the watch call", info.Cause, info.Cause)
	}
}

func TestIsResyncMarker(t *testing.T) {
	t.Parallel()
	annotated := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{k8s.ResyncAnnotation: "true"}}}
	tests := []struct {
		name string
		ev   watch.Event
		want bool
	}{
		{name: "marker", ev: marker(&corev1.ConfigMap{}, 3), want: true},
		{name: "partial marker", ev: marker(nil, 3), want: true},
		{name: "plain bookmark", ev: bookmark(3)},
		{name: "annotated but not a bookmark", ev: watch.Event{Type: watch.Added, Object: annotated}},
		{name: "annotated false", ev: watch.Event{Type: watch.Bookmark, Object: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{k8s.ResyncAnnotation: "false"}}}}},
		{name: "nil object", ev: watch.Event{Type: watch.Bookmark}},
		{name: "object without metadata", ev: watch.Event{Type: watch.Bookmark, Object: &noRV{}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := k8s.IsResyncMarker(tc.ev); got != tc.want {
				t.Errorf("IsResyncMarker() = %v, want %v", got, tc.want)
			}
		})
	}
}

// configMap is a ConfigMap named name whose content carries resource
// version rv: client-go's fake tracker versions objects without writing the
// version into them, so the tests write it themselves.
func configMap(name string, rv int) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", ResourceVersion: strconv.Itoa(rv)}}
}

// listWatch returns a ListWatch over the ConfigMaps of the fake clientset.
func listWatch(cs *fake.Clientset) *cache.ListWatch {
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return cs.CoreV1().ConfigMaps("default").List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return cs.CoreV1().ConfigMaps("default").Watch(ctx, o)
		},
	}
}

// recordLists records the options of every list made through cs.
func recordLists(cs *fake.Clientset) func() []metav1.ListOptions {
	var mu sync.Mutex
	var lists []metav1.ListOptions
	cs.PrependReactor("list", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		lists = append(lists, a.(k8stesting.ListActionImpl).GetListOptions())
		mu.Unlock()
		return false, nil, nil
	})
	return func() []metav1.ListOptions {
		mu.Lock()
		defer mu.Unlock()
		return append([]metav1.ListOptions(nil), lists...)
	}
}

// TestListResyncEndToEnd watches a fake clientset whose first watch answers
// 410 Gone, as a restarted API server does.
func TestListResyncEndToEnd(t *testing.T) {
	t.Parallel()
	cs := fake.NewClientset(configMap("a", 2), configMap("b", 3))
	lw := listWatch(cs)
	first := true
	watchFunc := lw.WatchFuncWithContext
	lw.WatchFuncWithContext = func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		if first {
			first = false
			return nil, apierrors.NewResourceExpired("too old resource version: 1 (3)")
		}
		return watchFunc(ctx, o)
	}
	rw, err := k8s.NewRetryWatcherWithContext(context.Background(), "1", lw, k8s.WithResync(k8s.ListResync(lw)), k8s.WithMinRestartDelay(0))
	if err != nil {
		t.Fatal(err)
	}
	defer stop(t, rw)
	got := receive(t, rw, 4)
	if !k8s.IsResyncMarker(got[0]) || got[0].Object.(*corev1.ConfigMap).ResourceVersion != "1" {
		t.Errorf("first event = %v %+v, want the resync marker from 1", got[0].Type, got[0].Object)
	}
	for i, name := range []string{"a", "b"} {
		if ev := got[i+1]; ev.Type != watch.Added || ev.Object.(*corev1.ConfigMap).Name != name {
			t.Errorf("event %d = %v %v, want Added %s", i+1, ev.Type, ev.Object, name)
		}
	}
	if !k8s.IsResyncEnd(got[3]) || got[3].Object.(*corev1.ConfigMap).ResourceVersion != "3" {
		t.Errorf("fourth event = %v %+v, want the end marker at 3", got[3].Type, got[3].Object)
	}
	// Live events follow.
	if _, err := cs.CoreV1().ConfigMaps("default").Create(context.Background(), configMap("c", 4), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ev := receive(t, rw, 1)[0]
	if ev.Type != watch.Added || ev.Object.(*corev1.ConfigMap).Name != "c" {
		t.Errorf("live event = %v %v, want Added c", ev.Type, ev.Object)
	}
}

func TestNewRetryWatcherFromNow(t *testing.T) {
	t.Parallel()
	cs := fake.NewClientset(configMap("old", 2))
	lists := recordLists(cs)
	var mu sync.Mutex
	var watchRVs []string
	lw := listWatch(cs)
	watchFunc := lw.WatchFuncWithContext
	lw.WatchFuncWithContext = func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		mu.Lock()
		watchRVs = append(watchRVs, o.ResourceVersion)
		mu.Unlock()
		return watchFunc(ctx, o)
	}
	rw, err := k8s.NewRetryWatcherFromNow(context.Background(), lw)
	if err != nil {
		t.Fatalf("NewRetryWatcherFromNow() = %v", err)
	}
	defer stop(t, rw)
	if _, err := cs.CoreV1().ConfigMaps("default").Create(context.Background(), configMap("new", 3), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got := receive(t, rw, 1)
	if name := got[0].Object.(*corev1.ConfigMap).Name; got[0].Type != watch.Added || name != "new" {
		t.Errorf("first event = %v %s, want Added new (the object from before must not be replayed)", got[0].Type, name)
	}
	if diff := cmp.Diff([]metav1.ListOptions{{Limit: 1}}, lists()); diff != "" {
		t.Errorf("list options (-want +got):\n%s", diff)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(watchRVs) == 0 || watchRVs[0] != "2" {
		t.Errorf("watch resource versions = %v, want the list's (2) first", watchRVs)
	}
}

func TestNewRetryWatcherFromNowErrors(t *testing.T) {
	t.Parallel()
	list := func(obj runtime.Object, err error) cache.ListerWatcher {
		return &cache.ListWatch{
			ListWithContextFunc:  func(context.Context, metav1.ListOptions) (runtime.Object, error) { return obj, err },
			WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) { return nil, errTest },
		}
	}
	tests := []struct {
		name    string
		lw      cache.ListerWatcher
		wantErr string
	}{
		{name: "nil", lw: nil, wantErr: "k8s: NewRetryWatcherFromNow: lw = nil: must not be nil"},
		{name: "list fails", lw: list(nil, errTest), wantErr: errTest.Error()},
		{name: "not a list", lw: list(&corev1.ConfigMap{}, nil), wantErr: "not a list"},
		{name: "no resource version", lw: list(&corev1.ConfigMapList{}, nil), wantErr: `the list returned resource version ""`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rw, err := k8s.NewRetryWatcherFromNow(context.Background(), tc.lw)
			if err == nil {
				stop(t, rw)
				t.Fatalf("NewRetryWatcherFromNow() = nil error, want %q", tc.wantErr)
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("NewRetryWatcherFromNow() = %q, want it to contain %q", err, tc.wantErr)
			}
		})
	}
}
