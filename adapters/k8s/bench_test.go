package k8s_test

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/resumable-go/resumable/adapters/k8s"
)

// watcher is what the benchmarks need of either RetryWatcher.
type watcher interface {
	watch.Interface
	Done() <-chan struct{}
}

// impls are the two RetryWatchers compared, built the same way.
var impls = []struct {
	name string
	new  func(ctx context.Context, rv string, w cache.WatcherWithContext) (watcher, error)
}{
	{name: "impl=client-go", new: func(ctx context.Context, rv string, w cache.WatcherWithContext) (watcher, error) {
		return watchtools.NewRetryWatcherWithContext(ctx, rv, w)
	}},
	{name: "impl=resumable", new: func(ctx context.Context, rv string, w cache.WatcherWithContext) (watcher, error) {
		return k8s.NewRetryWatcherWithContext(ctx, rv, w)
	}},
}

// BenchmarkEvents measures the per-event cost of a RetryWatcher: b.N
// ConfigMap events flow from a watch.ProxyWatcher to a consumer reading
// ResultChan. One op is one event. With source=buffered the watch's channel
// holds all b.N events before the clock starts (two goroutines: the
// watcher's and the consumer); with source=producer a goroutine sends them
// through a 128-slot channel, standing in for client-go's StreamWatcher,
// which decodes on a goroutine of its own.
func BenchmarkEvents(b *testing.B) {
	ev := watch.Event{Type: watch.Modified, Object: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: "bench", Namespace: "default", ResourceVersion: "123456789",
	}}}
	// Ours again with a resync, and with a resync and WithResyncDiff: the
	// per-event path of each.
	withResync := func(opts ...k8s.Option) func(ctx context.Context, rv string, w cache.WatcherWithContext) (watcher, error) {
		return func(ctx context.Context, rv string, w cache.WatcherWithContext) (watcher, error) {
			resync := func(context.Context, string, func(watch.Event) error) (string, error) { return "1", nil }
			return k8s.NewRetryWatcherWithContext(ctx, rv, w, append(opts, k8s.WithResync(resync))...)
		}
	}
	all := append(impls[:len(impls):len(impls)],
		struct {
			name string
			new  func(ctx context.Context, rv string, w cache.WatcherWithContext) (watcher, error)
		}{name: "impl=resumable+resync", new: withResync()},
		struct {
			name string
			new  func(ctx context.Context, rv string, w cache.WatcherWithContext) (watcher, error)
		}{name: "impl=resumable+resync+diff", new: withResync(k8s.WithResyncDiff())},
	)
	for _, source := range []string{"buffered", "producer"} {
		for _, impl := range all {
			b.Run("source="+source+"/"+impl.name, func(b *testing.B) {
				var ch chan watch.Event
				if source == "buffered" {
					ch = make(chan watch.Event, b.N)
					for range b.N {
						ch <- ev
					}
				} else {
					ch = make(chan watch.Event, 128)
				}
				lw := &cache.ListWatch{WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) {
					return watch.NewProxyWatcher(ch), nil
				}}
				rw, err := impl.new(context.Background(), "1", lw)
				if err != nil {
					b.Fatal(err)
				}
				var produced sync.WaitGroup
				b.ReportAllocs()
				b.ResetTimer()
				if source == "producer" {
					produced.Add(1)
					go func() {
						// Plain sends: the consumer reads all b.N events,
						// so the producer always finishes.
						defer produced.Done()
						for range b.N {
							ch <- ev
						}
					}()
				}
				results := rw.ResultChan()
				for range b.N {
					if _, ok := <-results; !ok {
						b.Fatal("ResultChan closed")
					}
				}
				b.StopTimer()
				rw.Stop()
				<-rw.Done()
				produced.Wait()
			})
		}
	}
}

// BenchmarkIdle measures what a RetryWatcher blocked on a quiet watch costs:
// heap and stack bytes, and goroutines, per watcher, over 10,000 watchers
// (the watches themselves, identical for both, included). One op is 10,000
// watchers made, measured and stopped.
func BenchmarkIdle(b *testing.B) {
	const n = 10000
	for _, impl := range impls {
		b.Run(impl.name, func(b *testing.B) {
			b.ReportAllocs()
			var heap, stack, goroutines float64
			for range b.N {
				var opened atomic.Int64
				lw := &cache.ListWatch{WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) {
					opened.Add(1)
					return watch.NewProxyWatcher(make(chan watch.Event)), nil
				}}
				var m0, m1 runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&m0)
				g0 := runtime.NumGoroutine()
				ws := make([]watcher, n)
				for i := range ws {
					rw, err := impl.new(context.Background(), "1", lw)
					if err != nil {
						b.Fatal(err)
					}
					ws[i] = rw
				}
				for opened.Load() < n {
					runtime.Gosched()
				}
				runtime.GC()
				runtime.ReadMemStats(&m1)
				goroutines += float64(runtime.NumGoroutine() - g0)
				heap += float64(int64(m1.HeapAlloc) - int64(m0.HeapAlloc))
				stack += float64(int64(m1.StackInuse) - int64(m0.StackInuse))
				for _, rw := range ws {
					rw.Stop()
				}
				for _, rw := range ws {
					<-rw.Done()
				}
			}
			b.ReportMetric((heap+stack)/float64(b.N)/n, "B/watcher")
			b.ReportMetric(heap/float64(b.N)/n, "heap-B/watcher")
			b.ReportMetric(stack/float64(b.N)/n, "stack-B/watcher")
			b.ReportMetric(goroutines/float64(b.N)/n, "goroutines/watcher")
		})
	}
}

// trackedObjects returns n ConfigMap events for distinct objects, each with
// strings of its own, as a decoder makes them: a namespace, a 16-byte name,
// a 36-byte UID and an 8-digit resource version.
func trackedObjects(n int) []watch.Event {
	evs := make([]watch.Event, n)
	for i := range evs {
		evs[i] = watch.Event{Type: watch.Added, Object: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Namespace:       strings.Clone("default"),
			Name:            fmt.Sprintf("configmap-%06d", i),
			UID:             types.UID(fmt.Sprintf("%08x-0000-4000-8000-%012x", i, i)),
			ResourceVersion: strconv.Itoa(10000000 + i),
		}}}
	}
	return evs
}

// BenchmarkResyncDiffMemory measures the memory WithResyncDiff keeps per
// object delivered: the live heap of a watcher with a resync and the
// option, after it delivered 100,000 distinct objects, less that of one
// without the option after the same. One op is both runs.
func BenchmarkResyncDiffMemory(b *testing.B) {
	const n = 100000
	resync := func(context.Context, string, func(watch.Event) error) (string, error) { return "1", nil }
	// live returns the live heap once a watcher made with opts delivered n
	// objects, while it still runs.
	live := func(opts ...k8s.Option) uint64 {
		ch := make(chan watch.Event, n)
		for _, ev := range trackedObjects(n) {
			ch <- ev
		}
		lw := &cache.ListWatch{WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) {
			return watch.NewProxyWatcher(ch), nil
		}}
		rw, err := k8s.NewRetryWatcherWithContext(context.Background(), "1", lw, append(opts, k8s.WithResync(resync))...)
		if err != nil {
			b.Fatal(err)
		}
		for range n {
			<-rw.ResultChan()
		}
		var m runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m)
		rw.Stop()
		<-rw.Done()
		return m.HeapAlloc
	}
	b.ReportAllocs()
	var perObject float64
	for range b.N {
		without := live()
		with := live(k8s.WithResyncDiff())
		perObject += (float64(with) - float64(without)) / n
	}
	b.ReportMetric(perObject/float64(b.N), "B/object")
}

// BenchmarkResyncDiffAdded measures the per-event cost of WithResyncDiff
// when every event is a new object (the tracker grows), against the same
// watcher without the option. One op is one event.
func BenchmarkResyncDiffAdded(b *testing.B) {
	resync := func(context.Context, string, func(watch.Event) error) (string, error) { return "1", nil }
	for _, mode := range []struct {
		name string
		opts []k8s.Option
	}{
		{name: "diff=off", opts: []k8s.Option{k8s.WithResync(resync)}},
		{name: "diff=on", opts: []k8s.Option{k8s.WithResync(resync), k8s.WithResyncDiff()}},
	} {
		b.Run(mode.name, func(b *testing.B) {
			evs := trackedObjects(b.N)
			ch := make(chan watch.Event, b.N)
			for _, ev := range evs {
				ch <- ev
			}
			evs = nil
			lw := &cache.ListWatch{WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) {
				return watch.NewProxyWatcher(ch), nil
			}}
			rw, err := k8s.NewRetryWatcherWithContext(context.Background(), "1", lw, mode.opts...)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				<-rw.ResultChan()
			}
			b.StopTimer()
			rw.Stop()
			<-rw.Done()
		})
	}
}
