package k8s_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/resumable-go/resumable/adapters/k8s"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/stream"
)

// fakeAPI is an in-memory stand-in for the API server: a log of ConfigMap
// events. Each watch serves the events after the resource version asked
// for, and the server ends a watch after perWatch events, as a real one
// ends watches on a timeout.
type fakeAPI struct {
	mu       sync.Mutex
	watches  []string // the resource versions watched from
	log      []watch.Event
	perWatch int
	expireAt string // a watch from this resource version answers 410 Gone
}

func newFakeAPI(perWatch int, names ...string) *fakeAPI {
	api := &fakeAPI{perWatch: perWatch}
	for i, name := range names {
		api.log = append(api.log, watch.Event{Type: watch.Added, Object: &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: strconv.Itoa(11 + i)},
		}})
	}
	return api
}

// Watches returns the resource versions watched from so far.
func (api *fakeAPI) Watches() []string {
	api.mu.Lock()
	defer api.mu.Unlock()
	return append([]string(nil), api.watches...)
}

func (api *fakeAPI) ListWatch() *cache.ListWatch {
	return &cache.ListWatch{
		ListWithContextFunc: func(_ context.Context, _ metav1.ListOptions) (runtime.Object, error) {
			list := &corev1.ConfigMapList{ListMeta: metav1.ListMeta{ResourceVersion: strconv.Itoa(10 + len(api.log))}}
			for _, ev := range api.log {
				list.Items = append(list.Items, *ev.Object.(*corev1.ConfigMap))
			}
			return list, nil
		},
		WatchFuncWithContext: func(_ context.Context, o metav1.ListOptions) (watch.Interface, error) {
			api.mu.Lock()
			api.watches = append(api.watches, o.ResourceVersion)
			api.mu.Unlock()
			if o.ResourceVersion == api.expireAt {
				return nil, apierrors.NewResourceExpired("too old resource version")
			}
			from, _ := strconv.Atoi(o.ResourceVersion)
			ch := make(chan watch.Event, len(api.log))
			n := 0
			for _, ev := range api.log {
				rv, _ := strconv.Atoi(ev.Object.(*corev1.ConfigMap).ResourceVersion)
				if rv > from && n < api.perWatch {
					ch <- ev
					n++
				}
			}
			if n == api.perWatch {
				close(ch) // the server ends this watch
			}
			return watch.NewProxyWatcher(ch), nil
		},
	}
}

// Swapping client-go's RetryWatcher for this one changes one import and the
// package of one constructor; the watcher is used the same way. Here the
// server ends the first watch after two events, and the watcher reopens it
// from the resource version of the last event received.
func Example_swap() {
	api := newFakeAPI(2, "a", "b", "c")
	lw := api.ListWatch()
	ctx := context.Background()

	// Before:
	//	import watchtools "k8s.io/client-go/tools/watch"
	//	rw, err := watchtools.NewRetryWatcherWithContext(ctx, "10", lw)
	// After:
	//	import "github.com/resumable-go/resumable/adapters/k8s"
	rw, err := k8s.NewRetryWatcherWithContext(ctx, "10", lw)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() {
		rw.Stop()
		<-rw.Done()
	}()
	for ev := range rw.ResultChan() {
		cm := ev.Object.(*corev1.ConfigMap)
		fmt.Println(ev.Type, cm.Name, cm.ResourceVersion)
		if cm.Name == "c" {
			break
		}
	}
	fmt.Println("watched from", api.Watches())
	// Output:
	// ADDED a 11
	// ADDED b 12
	// ADDED c 13
	// watched from [10 12]
}

// With a resync, the watcher survives an expired resource version — which a
// real API server answers after every restart, and on which client-go's
// RetryWatcher retries forever. The replay comes between two marker
// bookmarks: the whole state, which replaces what the consumer had.
func ExampleWithResync() {
	api := newFakeAPI(10, "a", "b")
	api.expireAt = "5" // the server has forgotten resource version 5
	lw := api.ListWatch()

	infos := make(chan stream.ResyncEvent[string], 1)
	rw, err := k8s.NewRetryWatcherWithContext(context.Background(), "5", lw,
		k8s.WithResync(k8s.ListResync(lw)),
		k8s.WithHooks(stream.Hooks[string]{OnResync: func(i stream.ResyncEvent[string]) { infos <- i }}))
	if err != nil {
		fmt.Println(err)
		return
	}
	for ev := range rw.ResultChan() {
		rv := ev.Object.(*corev1.ConfigMap).ResourceVersion
		switch {
		case k8s.IsResyncMarker(ev):
			fmt.Println("resync: events after", rv, "were lost; the whole state follows")
		case k8s.IsResyncEnd(ev):
			fmt.Println("resync done: watching from", rv)
		default:
			fmt.Println(ev.Type, ev.Object.(*corev1.ConfigMap).Name, rv)
		}
		if k8s.IsResyncEnd(ev) {
			break
		}
	}
	info := <-infos // the hook runs once the end marker was received
	rw.Stop()
	<-rw.Done()
	fmt.Printf("resynced from %s to %s after %q; %d objects replayed\n", info.From, info.To, info.Cause, info.Replayed)
	// Output:
	// resync: events after 5 were lost; the whole state follows
	// ADDED a 11
	// ADDED b 12
	// resync done: watching from 12
	// resynced from 5 to 12 after "too old resource version"; 2 objects replayed
}

// With WithResyncDiff, a resync delivers only what changed while the watch
// was expired — including the deletions a list cannot show — so that a
// consumer applies it as any other events. Here the consumer received a and
// b; while its watch was expired, a was deleted, b updated and c created.
func ExampleWithResyncDiff() {
	cm := func(name string, rv int) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: name, ResourceVersion: strconv.Itoa(rv)}}
	}
	watches := 0
	lw := &cache.ListWatch{
		ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
			return &corev1.ConfigMapList{ListMeta: metav1.ListMeta{ResourceVersion: "15"},
				Items: []corev1.ConfigMap{*cm("b", 14), *cm("c", 15)}}, nil
		},
		WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) {
			watches++
			switch watches {
			case 1: // a and b, then the watch ends
				ch := make(chan watch.Event, 2)
				ch <- watch.Event{Type: watch.Added, Object: cm("a", 11)}
				ch <- watch.Event{Type: watch.Added, Object: cm("b", 12)}
				close(ch)
				return watch.NewProxyWatcher(ch), nil
			case 2: // the server restarted meanwhile
				return nil, apierrors.NewResourceExpired("too old resource version: 12 (14)")
			}
			return watch.NewProxyWatcher(make(chan watch.Event)), nil
		},
	}
	rw, err := k8s.NewRetryWatcherWithContext(context.Background(), "10", lw,
		k8s.WithResync(k8s.ListResync(lw)), k8s.WithResyncDiff(), k8s.WithMinRestartDelay(0))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() {
		rw.Stop()
		<-rw.Done()
	}()
	for ev := range rw.ResultChan() {
		obj := ev.Object.(*corev1.ConfigMap)
		switch {
		case k8s.IsResyncMarker(ev):
			fmt.Println("-- resync from", obj.ResourceVersion)
		case k8s.IsResyncEnd(ev):
			fmt.Println("-- resync done at", obj.ResourceVersion)
		default:
			fmt.Println(ev.Type, obj.Namespace+"/"+obj.Name, obj.ResourceVersion)
		}
		if k8s.IsResyncEnd(ev) {
			break
		}
	}
	// Output:
	// ADDED demo/a 11
	// ADDED demo/b 12
	// -- resync from 12
	// MODIFIED demo/b 14
	// ADDED demo/c 15
	// DELETED demo/a 11
	// -- resync done at 15
}

// WatchListResync streams the state in a WatchList request: the server
// sends each object as an Added event, then a bookmark annotated
// k8s.io/initial-events-end at the resource version to continue from.
// Here the first watch meets an expired resource version.
func ExampleWatchListResync() {
	cm := func(name string, rv int) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: name, ResourceVersion: strconv.Itoa(rv)}}
	}
	watches := 0
	lw := &cache.ListWatch{
		WatchFuncWithContext: func(_ context.Context, o metav1.ListOptions) (watch.Interface, error) {
			watches++
			switch {
			case watches == 1:
				return nil, apierrors.NewResourceExpired("too old resource version: 5 (15)")
			case o.SendInitialEvents != nil && *o.SendInitialEvents:
				end := cm("", 20)
				end.Annotations = map[string]string{metav1.InitialEventsAnnotationKey: "true"}
				ch := make(chan watch.Event, 3)
				ch <- watch.Event{Type: watch.Added, Object: cm("a", 11)}
				ch <- watch.Event{Type: watch.Added, Object: cm("b", 17)}
				ch <- watch.Event{Type: watch.Bookmark, Object: end}
				return watch.NewProxyWatcher(ch), nil
			}
			return watch.NewProxyWatcher(make(chan watch.Event)), nil // from 20: quiet
		},
	}
	rw, err := k8s.NewRetryWatcherWithContext(context.Background(), "5", lw,
		k8s.WithResync(k8s.WatchListResync(lw)), k8s.WithMinRestartDelay(0))
	if err != nil {
		fmt.Println(err)
		return
	}
	for ev := range rw.ResultChan() {
		obj := ev.Object.(*corev1.ConfigMap)
		switch {
		case k8s.IsResyncMarker(ev):
			fmt.Println("-- resync from", obj.ResourceVersion)
		case k8s.IsResyncEnd(ev):
			fmt.Println("-- resync done at", obj.ResourceVersion)
		default:
			fmt.Println(ev.Type, obj.Name, obj.ResourceVersion)
		}
		if k8s.IsResyncEnd(ev) {
			break
		}
	}
	rw.Stop()
	<-rw.Done()
	// Output:
	// -- resync from 5
	// ADDED a 11
	// ADDED b 17
	// -- resync done at 20
}

// Until waits for conditions on a watch that survives disconnects.
func ExampleUntil() {
	lw := newFakeAPI(10, "a", "ready", "c").ListWatch()
	ev, err := k8s.Until(context.Background(), "10", lw, func(ev watch.Event) (bool, error) {
		return ev.Object.(*corev1.ConfigMap).Name == "ready", nil
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("condition met at", ev.Object.(*corev1.ConfigMap).ResourceVersion)
	// Output:
	// condition met at 12
}

// The building blocks compose into a Resumer of your own: here one that
// keeps the resource version in a cursor.Store (a file, a database) so that
// a restarted process resumes where it stopped, and handles events in place
// instead of through a channel.
func Example_compose() {
	api := newFakeAPI(2, "a", "b", "c")
	lw := api.ListWatch()
	store := cursor.NewMemory("10") // cursor.File, or a store of your own

	r, err := stream.New(k8s.WatchSource(lw), k8s.ResourceVersion, store,
		stream.WithClassifier(k8s.StatusClassifier(false)))
	if err != nil {
		fmt.Println(err)
		return
	}
	errDone := errors.New("done")
	err = r.Run(context.Background(), func(_ context.Context, ev watch.Event) error {
		cm := ev.Object.(*corev1.ConfigMap)
		fmt.Println(ev.Type, cm.Name, cm.ResourceVersion)
		if cm.Name == "c" {
			return errDone
		}
		return nil
	})
	fmt.Println(err, "- resume after", r.Cursor(), "- watched from", api.Watches())
	// Output:
	// ADDED a 11
	// ADDED b 12
	// ADDED c 13
	// done - resume after 12 - watched from [10 12]
}
