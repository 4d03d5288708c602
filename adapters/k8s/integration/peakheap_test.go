package integration_test

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/resumable-go/resumable/adapters/k8s"
	"github.com/resumable-go/resumable/adapters/k8s/internal/testenv"
)

// unpaginatedResync is the ListResync of the previous release, for
// comparison: one consistent list of the whole collection, held in memory
// while its items are delivered.
func unpaginatedResync(lw cache.ListerWatcher) k8s.ResyncFunc {
	l := cache.ToListerWithContext(lw)
	return func(ctx context.Context, _ string, emit func(watch.Event) error) (string, error) {
		list, err := l.ListWithContext(ctx, metav1.ListOptions{ResourceVersion: ""})
		if err != nil {
			return "", err
		}
		lm, err := meta.ListAccessor(list)
		if err != nil {
			return "", err
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			return "", err
		}
		for _, item := range items {
			if err := emit(watch.Event{Type: watch.Added, Object: item}); err != nil {
				return "", err
			}
		}
		return lm.GetResourceVersion(), nil
	}
}

// heapSampler records the highest heap in use (bytes of live and not yet
// collected objects) it sees, sampling every 100µs and whenever Sample is
// called.
type heapSampler struct {
	mu     sync.Mutex
	sample []metrics.Sample
	peak   uint64
	stop   chan struct{}
	done   chan struct{}
}

func startHeapSampler() *heapSampler {
	s := &heapSampler{
		sample: []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}},
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
	}
	go func() {
		defer close(s.done)
		tick := time.NewTicker(100 * time.Microsecond)
		defer tick.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-tick.C:
				s.Sample()
			}
		}
	}()
	return s
}

// Sample reads the heap now.
func (s *heapSampler) Sample() {
	s.mu.Lock()
	defer s.mu.Unlock()
	metrics.Read(s.sample)
	if v := s.sample[0].Value.Uint64(); v > s.peak {
		s.peak = v
	}
}

// Stop stops sampling and returns the peak.
func (s *heapSampler) Stop() uint64 {
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peak
}

// liveHeap collects garbage and returns the heap in use.
func liveHeap() uint64 {
	runtime.GC()
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// heapModes are the resyncs whose peak heap TestResyncPeakHeap compares.
var heapModes = []struct {
	name   string
	resync func(cache.ListerWatcher) k8s.ResyncFunc
}{
	{name: "unpaginated list (previous ListResync)", resync: unpaginatedResync},
	{name: "ListResync, pages of 500", resync: func(lw cache.ListerWatcher) k8s.ResyncFunc { return k8s.ListResync(lw) }},
	{name: "WatchListResync", resync: func(lw cache.ListerWatcher) k8s.ResyncFunc { return k8s.WatchListResync(lw) }},
}

// TestResyncPeakHeap measures the peak heap of the client during a resync
// of 2,000, then 4,000, ConfigMaps of 4 KiB each: the unpaginated list of
// the previous release, ListResync's pages of 500, and WatchListResync.
// Each resync runs in a RetryWatcher whose first watch answers 410 (the
// server's own 410 needs a restart, and a restart's noise is not what is
// measured), against the real server, with a consumer that drops what it
// receives; the garbage collector runs at GOGC=10 during the measurement,
// so that the heap in use follows the live heap closely.
//
// A paginated resync holds one page (its response body and its objects);
// the unpaginated one holds them all. At 2,000 objects, four pages of 500,
// the ratio is about a quarter by construction, close to the 0.3 target;
// at 4,000 the paginated and streamed resyncs must peak at no more than
// 0.3 times the unpaginated one.
func TestResyncPeakHeap(t *testing.T) {
	env := testenv.Start(t)
	cfg := env.Config()
	cfg.QPS, cfg.Burst = 1000, 1000
	cs := newClient(t, cfg)
	cms := createNamespace(t, cs, "heap")
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	created := 0
	for _, objects := range []int{2000, 4000} {
		createPayloads(t, cms, created, objects)
		created = objects
		peaks := make([]uint64, len(heapModes))
		for i, mode := range heapModes {
			peaks[i] = resyncPeak(t, cms, mode.name, mode.resync, objects)
		}
		t.Logf("| resync of %d ConfigMaps of 4 KiB | peak heap | vs unpaginated |", objects)
		t.Logf("|---|---|---|")
		for i, mode := range heapModes {
			t.Logf("| %s | %.1f MiB | %.2f× |", mode.name, float64(peaks[i])/(1<<20), float64(peaks[i])/float64(peaks[0]))
		}
		if objects < 4000 {
			continue
		}
		for i := 1; i < len(heapModes); i++ {
			if ratio := float64(peaks[i]) / float64(peaks[0]); ratio > 0.3 {
				t.Errorf("%d objects, %s: peak heap %.2f× the unpaginated list's, want at most 0.3×", objects, heapModes[i].name, ratio)
			}
		}
	}
}

// createPayloads creates the ConfigMaps cm-from … cm-(to-1) of 4 KiB each,
// eight at a time.
func createPayloads(t *testing.T, cms typedcorev1.ConfigMapInterface, from, to int) {
	t.Helper()
	payload := strings.Repeat("x", 4<<10)
	var (
		wg     sync.WaitGroup
		next   atomic.Int64
		failed atomic.Value
	)
	next.Store(int64(from))
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1) - 1; i < int64(to); i = next.Add(1) - 1 {
				_, err := cms.Create(context.Background(), &corev1.ConfigMap{
					ObjectMeta: metav1.ObjectMeta{Name: "cm-" + strconv.Itoa(int(i))},
					Data:       map[string]string{"payload": payload},
				}, metav1.CreateOptions{})
				if err != nil {
					failed.Store(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err, ok := failed.Load().(error); ok {
		t.Fatalf("create ConfigMaps: %v", err)
	}
}

// resyncPeak runs one resync of cms, which holds objects ConfigMaps, with
// the ResyncFunc resync makes, and returns the peak heap above the live
// heap before it.
func resyncPeak(t *testing.T, cms typedcorev1.ConfigMapInterface, name string, resync func(cache.ListerWatcher) k8s.ResyncFunc, objects int) uint64 {
	t.Helper()
	var rec recorder
	lw := rec.listWatch(cms)
	rv := listRV(t, cms)
	// The first watch answers 410, as a restarted server would: the
	// watcher resyncs from rv against the real server.
	watchFunc, expired := lw.WatchFuncWithContext, false
	lw.WatchFuncWithContext = func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		if !expired && o.SendInitialEvents == nil {
			expired = true
			return nil, apierrors.NewResourceExpired("too old resource version: " + o.ResourceVersion)
		}
		return watchFunc(ctx, o)
	}
	base := liveHeap()
	sampler := startHeapSampler()
	rw, err := k8s.NewRetryWatcherWithContext(t.Context(), rv, lw, k8s.WithResync(resync(lw)))
	if err != nil {
		t.Fatal(err)
	}
	replayed := 0
	timeout := time.NewTimer(deadline)
	defer timeout.Stop()
read:
	for {
		select {
		case ev, ok := <-rw.ResultChan():
			if !ok {
				t.Fatalf("%s: the watcher stopped", name)
			}
			sampler.Sample()
			switch {
			case k8s.IsResyncEnd(ev):
				break read
			case ev.Type == watch.Added:
				replayed++
			}
		case <-timeout.C:
			t.Fatalf("%s: no end of resync after %v; %d replayed; watch calls: %s; lists: %d", name, deadline, replayed, describeCalls(rec.Calls()), len(rec.Lists()))
		}
	}
	peak := sampler.Stop()
	rw.Stop()
	for range rw.ResultChan() {
	}
	<-rw.Done()
	if replayed != objects {
		t.Errorf("%s: replayed %d objects, want %d", name, replayed, objects)
	}
	var pages []string
	for _, o := range rec.Lists() {
		pages = append(pages, fmt.Sprintf("{rv=%q match=%q limit=%d continue=%t}", o.ResourceVersion, o.ResourceVersionMatch, o.Limit, o.Continue != ""))
	}
	peak -= min(peak, base)
	t.Logf("%d objects, %s: peak heap %.1f MiB above %.1f MiB; lists: %v", objects, name, float64(peak)/(1<<20), float64(base)/(1<<20), pages)
	return peak
}
