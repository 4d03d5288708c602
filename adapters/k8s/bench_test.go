package k8s_test

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	for _, source := range []string{"buffered", "producer"} {
		for _, impl := range impls {
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
