// Command k8s watches ConfigMaps with resumable's RetryWatcher, a drop-in
// replacement for client-go's watchtools.RetryWatcher. The swap is one
// import; the code that uses the watcher does not change:
//
//	import watchtools "k8s.io/client-go/tools/watch"               // before
//	import watchtools "github.com/resumable-go/resumable/adapters/k8s" // after
//
//	rw, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, lw)
//
// With no flags it runs in-process against client-go's fake clientset: a
// writer goroutine creates and updates ConfigMaps and, every round, ends the
// watch under the watcher's feet as an API server does on its watch
// timeout; between the end and the reopen it creates more. The watcher
// reopens from the resource version of the last event it delivered. At the
// end the command checks that it saw every write exactly once and in order,
// and exits with status 1 if not.
//
// With -kubeconfig (or KUBECONFIG set) it watches the ConfigMaps of
// -namespace on a real cluster and prints each event until interrupted or
// -duration has passed. Add -resync to survive "resource version too old"
// (a restarted API server), which client-go's RetryWatcher cannot: the
// watcher then streams the current state (a WatchList request, or a list
// page by page where the server serves none) and prints what changed while
// the watch was expired — deletions included — between two resync markers.
//
// Usage:
//
//	go run ./examples/k8s [-rounds 3]
//	go run ./examples/k8s -kubeconfig ~/.kube/config [-namespace default] [-duration 1m] [-resync] [-v]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	// The one line that changes when swapping from client-go's
	// k8s.io/client-go/tools/watch.
	watchtools "github.com/resumable-go/resumable/adapters/k8s"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Stdout, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "k8s:", err)
		stop()
		os.Exit(1)
	}
}

// run is the whole program.
func run(ctx context.Context, stdout io.Writer, args []string) error {
	fs := flag.NewFlagSet("k8s", flag.ContinueOnError)
	fs.SetOutput(stdout)
	kubeconfig := fs.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of a real cluster to watch (default $KUBECONFIG; empty: the in-process fake)")
	namespace := fs.String("namespace", "default", "namespace whose ConfigMaps to watch")
	rounds := fs.Int("rounds", 3, "fake: rounds of writes, each ended by a forced end of the watch")
	duration := fs.Duration("duration", 0, "real cluster: stop after this long (0: until interrupted)")
	resync := fs.Bool("resync", false, "real cluster: relist when the resource version has expired")
	verbose := fs.Bool("v", false, "log the watcher's reconnects to stderr")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *rounds < 1 {
		return fmt.Errorf("-rounds %d: want at least 1", *rounds)
	}
	log := zap.NewNop()
	if *verbose {
		// Readable lines without stack traces: a retried failure is news,
		// not a bug.
		cfg := zap.NewDevelopmentConfig()
		cfg.DisableStacktrace = true
		l, err := cfg.Build()
		if err != nil {
			return err
		}
		log = l
		defer func() { _ = log.Sync() }()
	}
	out := &syncWriter{w: stdout}
	if *kubeconfig != "" {
		return watchCluster(ctx, out, log, *kubeconfig, *namespace, *duration, *resync)
	}
	return watchFake(ctx, out, log, *namespace, *rounds)
}

// listWatch lists and watches the ConfigMaps of namespace through cs.
func listWatch(cs kubernetes.Interface, namespace string) *cache.ListWatch {
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return cs.CoreV1().ConfigMaps(namespace).List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return cs.CoreV1().ConfigMaps(namespace).Watch(ctx, o)
		},
	}
}

// watchCluster prints the ConfigMap events of a real cluster.
func watchCluster(ctx context.Context, out io.Writer, log *zap.Logger, kubeconfig, namespace string, duration time.Duration, resync bool) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	if duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, duration)
		defer cancel()
	}
	return printEvents(ctx, out, log, cs, namespace, resync)
}

// printEvents lists the ConfigMaps of namespace through cs, then watches
// them and prints each event until ctx ends.
func printEvents(ctx context.Context, out io.Writer, log *zap.Logger, cs kubernetes.Interface, namespace string, resync bool) error {
	lw := listWatch(cs, namespace)
	list, err := cs.CoreV1().ConfigMaps(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, cm := range list.Items {
		fmt.Fprintf(out, "EXISTING %s/%s rv=%s\n", cm.Namespace, cm.Name, cm.ResourceVersion)
	}
	opts := []watchtools.Option{watchtools.WithLogger(log)}
	if resync {
		// Stream the state with a WatchList request where the server
		// serves it (client-go's fake clients say they do not: the resync
		// then lists, page by page), and deliver only what changed since
		// the list above and the events printed.
		stateLW := cache.ToListWatcherWithWatchListSemantics(lw, cs)
		opts = append(opts,
			watchtools.WithResync(watchtools.WatchListResync(stateLW)),
			watchtools.WithResyncDiff(list))
	}
	rw, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, lw, opts...)
	if err != nil {
		return err
	}
	defer func() {
		rw.Stop()
		<-rw.Done()
	}()
	fmt.Fprintf(out, "watching configmaps in %q from resource version %s\n", namespace, list.ResourceVersion)
	last := list.ResourceVersion // of the last event printed
	for ev := range rw.ResultChan() {
		switch {
		case ev.Type == watch.Error:
			// The last event: the watcher stops.
			err := apierrors.FromObject(ev.Object)
			if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
				return fmt.Errorf("the watcher stopped: %w: the API server no longer has the changes after resource version %s (it restarted, say); run with -resync to relist and keep watching", err, last)
			}
			return fmt.Errorf("the watcher stopped: %w", err)
		case watchtools.IsResyncMarker(ev):
			// Rather than an OnResync hook (WithHooks), which runs on the
			// watcher's goroutine: the markers come in order with the
			// events. The start marker carries the expired resource
			// version, the end marker the one the watch goes on from.
			fmt.Fprintf(out, "-- resync: the API server no longer has resource version %s; what changed since follows --\n", resourceVersion(ev))
		case watchtools.IsResyncEnd(ev):
			last = resourceVersion(ev)
			fmt.Fprintf(out, "-- resync done: watching from resource version %s --\n", last)
		default:
			if cm, ok := ev.Object.(*corev1.ConfigMap); ok {
				fmt.Fprintf(out, "%-8s %s/%s rv=%s\n", ev.Type, cm.Namespace, cm.Name, cm.ResourceVersion)
				last = cm.ResourceVersion
			}
		}
	}
	return nil // interrupted, or -duration passed
}

// resourceVersion returns the resource version of ev's object.
func resourceVersion(ev watch.Event) string {
	if m, err := meta.Accessor(ev.Object); err == nil {
		return m.GetResourceVersion()
	}
	return ""
}

// write is one change the fake's writer made, and what the watcher must
// deliver for it.
type write struct {
	typ  watch.EventType
	name string
	rv   string
}

func (w write) String() string { return fmt.Sprintf("%s %s@%s", w.typ, w.name, w.rv) }

// watchFake runs the in-process demo against the fake clientset.
func watchFake(ctx context.Context, out io.Writer, log *zap.Logger, namespace string, rounds int) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cs := fake.NewClientset()
	lw := listWatch(cs, namespace)

	// Record each watch the RetryWatcher opens, so that the writer can end
	// it. (The fake's watch does not end on its own as a real one does.)
	var (
		mu      sync.Mutex
		current watch.Interface
		opens   = make(chan string, 64)
	)
	openWatch := lw.WatchFuncWithContext
	lw.WatchFuncWithContext = func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		w, err := openWatch(ctx, o)
		if err == nil {
			mu.Lock()
			current = w
			mu.Unlock()
			fmt.Fprintf(out, "watch opened from resource version %s\n", o.ResourceVersion)
			opens <- o.ResourceVersion
		}
		return w, err
	}

	list, err := cs.CoreV1().ConfigMaps(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	rw, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, lw, watchtools.WithLogger(log))
	if err != nil {
		return err
	}
	defer func() {
		rw.Stop()
		<-rw.Done()
	}()
	select {
	case <-opens:
	case <-ctx.Done():
		return ctx.Err()
	}

	// The writer.
	var seenRV atomic.Int64 // the resource version of the last event received
	w := &writer{cs: cs, namespace: namespace, rv: 1}
	if v, err := strconv.ParseInt(list.ResourceVersion, 10, 64); err == nil {
		w.rv = v
	}
	writerErr := make(chan error, 1)
	var wg sync.WaitGroup
	defer wg.Wait() // after the deferred cancel above has ended the writer
	defer cancel()
	wg.Add(1)
	go func() {
		defer wg.Done()
		writerErr <- w.run(ctx, rounds, &seenRV, opens, func() {
			mu.Lock()
			c := current
			mu.Unlock()
			fmt.Fprintln(out, "-- the server ends the watch --")
			c.Stop()
		})
	}()

	// The consumer.
	var seen []write
	total := rounds * writesPerRound
	for len(seen) < total {
		select {
		case ev, ok := <-rw.ResultChan():
			if !ok {
				return errors.New("the watcher stopped early")
			}
			if ev.Type == watch.Error {
				return fmt.Errorf("the watcher stopped: %v", ev.Object)
			}
			cm := ev.Object.(*corev1.ConfigMap)
			seen = append(seen, write{typ: ev.Type, name: cm.Name, rv: cm.ResourceVersion})
			fmt.Fprintf(out, "%-8s %s rv=%s\n", ev.Type, cm.Name, cm.ResourceVersion)
			if v, err := strconv.ParseInt(cm.ResourceVersion, 10, 64); err == nil {
				seenRV.Store(v)
			}
		case err := <-writerErr:
			if err != nil {
				return fmt.Errorf("writer: %w", err)
			}
			writerErr = nil // done; the last events are on their way
		case <-ctx.Done():
			return fmt.Errorf("after %d of %d events: %w", len(seen), total, ctx.Err())
		}
	}
	if writerErr != nil {
		if err := <-writerErr; err != nil {
			return fmt.Errorf("writer: %w", err)
		}
	}

	// The end check: every write seen exactly once, in order.
	if err := check(seen, w.log()); err != nil {
		return err
	}
	fmt.Fprintf(out, "ok: all %d writes seen exactly once and in order, across %d forced ends of the watch\n", len(seen), rounds)
	return nil
}

// check reports whether seen is exactly written.
func check(seen, written []write) error {
	for i := 0; i < len(seen) || i < len(written); i++ {
		switch {
		case i >= len(written):
			return fmt.Errorf("check failed: event %d (%v) matches no write", i, seen[i])
		case i >= len(seen):
			return fmt.Errorf("check failed: write %d (%v) was never seen", i, written[i])
		case seen[i] != written[i]:
			return fmt.Errorf("check failed: event %d is %v, want %v", i, seen[i], written[i])
		}
	}
	return nil
}

// writesPerRound is how many writes the writer makes per round: 2 creates
// and 2 updates while the watch is open, and 2 creates while it is not.
const writesPerRound = 6

// writer makes the changes of the fake demo. client-go's fake tracker
// numbers versions per resource (one more per create or update) but does not
// write them into the objects; the writer writes the number the tracker
// will give, so that the events carry it as a real API server's do.
type writer struct {
	cs        *fake.Clientset
	namespace string
	rv        int64 // the tracker's last resource version
	n         int   // ConfigMaps created
	mu        sync.Mutex
	written   []write
}

func (w *writer) run(ctx context.Context, rounds int, seen *atomic.Int64, opens <-chan string, endWatch func()) error {
	for range rounds {
		// While the watch is open: creates and updates.
		for range 2 {
			if err := w.create(ctx); err != nil {
				return err
			}
		}
		for _, i := range []int{w.n - 1, w.n - 2} {
			if err := w.update(ctx, i); err != nil {
				return err
			}
		}
		// Let the watcher catch up (the fake's watch buffers 100 events),
		// then end its watch, as an API server does after its timeout.
		if err := waitFor(ctx, func() bool { return seen.Load() >= w.rv }); err != nil {
			return err
		}
		endWatch()
		// While it is closed: more creates, which the reopened watch
		// replays (the fake replays only objects, so no updates here).
		for range 2 {
			if err := w.create(ctx); err != nil {
				return err
			}
		}
		select {
		case <-opens:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func (w *writer) create(ctx context.Context) error {
	w.rv++
	name := fmt.Sprintf("demo-%03d", w.n)
	w.n++
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.namespace, ResourceVersion: strconv.FormatInt(w.rv, 10)},
		Data:       map[string]string{"version": "1"},
	}
	if _, err := w.cs.CoreV1().ConfigMaps(w.namespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		return err
	}
	w.record(write{typ: watch.Added, name: name, rv: cm.ResourceVersion})
	return nil
}

func (w *writer) update(ctx context.Context, i int) error {
	name := fmt.Sprintf("demo-%03d", i)
	cm, err := w.cs.CoreV1().ConfigMaps(w.namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	w.rv++
	cm.ResourceVersion = strconv.FormatInt(w.rv, 10)
	cm.Data["version"] = cm.ResourceVersion
	if _, err := w.cs.CoreV1().ConfigMaps(w.namespace).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		return err
	}
	w.record(write{typ: watch.Modified, name: name, rv: cm.ResourceVersion})
	return nil
}

func (w *writer) record(wr write) {
	w.mu.Lock()
	w.written = append(w.written, wr)
	w.mu.Unlock()
}

func (w *writer) log() []write {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]write(nil), w.written...)
}

// waitFor polls cond until it holds or ctx ends.
func waitFor(ctx context.Context, cond func() bool) error {
	t := time.NewTicker(2 * time.Millisecond)
	defer t.Stop()
	for !cond() {
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// syncWriter serialises writes from the consumer, the writer and the
// watcher's goroutine.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
