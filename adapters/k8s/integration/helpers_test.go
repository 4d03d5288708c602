package integration_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/resumable-go/resumable/adapters/k8s"
)

// deadline bounds every wait on the server or on a watcher. It guards
// against a hang and is never a timing assertion: it is generous for two
// busy cores.
const deadline = 2 * time.Minute

// pollInterval is how often waitFor checks its condition.
const pollInterval = 50 * time.Millisecond

// newClient returns a clientset for cfg, failing t if it cannot.
func newClient(t *testing.T, cfg *rest.Config) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("kubernetes.NewForConfig() = %v", err)
	}
	return cs
}

// createNamespace creates the namespace name and returns its ConfigMaps.
func createNamespace(t *testing.T, cs kubernetes.Interface, name string) typedcorev1.ConfigMapInterface {
	t.Helper()
	if _, err := cs.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: name},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	return cs.CoreV1().ConfigMaps(name)
}

// createConfigMap creates the ConfigMap name through cms and returns it as
// the server stored it.
func createConfigMap(t *testing.T, cms typedcorev1.ConfigMapInterface, name string) *corev1.ConfigMap {
	t.Helper()
	cm, err := cms.Create(t.Context(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Data:       map[string]string{"name": name},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create ConfigMap %s: %v", name, err)
	}
	return cm
}

// createConfigMaps creates n ConfigMaps named prefix-0 … prefix-(n-1), one
// after the other, and returns what the server stored, in creation order.
func createConfigMaps(t *testing.T, cms typedcorev1.ConfigMapInterface, prefix string, n int) []*corev1.ConfigMap {
	t.Helper()
	out := make([]*corev1.ConfigMap, n)
	for i := range out {
		out[i] = createConfigMap(t, cms, prefix+"-"+strconv.Itoa(i))
	}
	return out
}

// listRV lists cms and returns the list's resource version: a watch from it
// sees every later change.
func listRV(t *testing.T, cms typedcorev1.ConfigMapInterface) string {
	t.Helper()
	list, err := cms.List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list ConfigMaps: %v", err)
	}
	return list.ResourceVersion
}

// rvNumber parses a resource version. Resource versions are opaque to
// clients, but those of this etcd-backed server are increasing integers,
// which lets the tests check order.
func rvNumber(t *testing.T, rv string) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(rv, 10, 64)
	if err != nil {
		t.Fatalf("resource version %q is not an integer: %v", rv, err)
	}
	return n
}

// event is what the tests compare of a watch.Event: its type, the object's
// name and resource version, and for an Error event the Status's code and
// reason.
type event struct {
	Type   watch.EventType
	Name   string
	RV     string
	Code   int32
	Reason metav1.StatusReason
	Marker bool // k8s.IsResyncMarker
	End    bool // k8s.IsResyncEnd
}

func (e event) String() string {
	if e.Type == watch.Error {
		return fmt.Sprintf("%s %d %s", e.Type, e.Code, e.Reason)
	}
	return fmt.Sprintf("%s %s@%s", e.Type, e.Name, e.RV)
}

func summarize(ev watch.Event) event {
	e := event{Type: ev.Type, Marker: k8s.IsResyncMarker(ev), End: k8s.IsResyncEnd(ev)}
	if st, ok := ev.Object.(*metav1.Status); ok {
		e.Code, e.Reason = st.Code, st.Reason
		return e
	}
	if m, err := meta.Accessor(ev.Object); err == nil {
		e.Name, e.RV = m.GetName(), m.GetResourceVersion()
	}
	return e
}

func summarizeAll(evs []watch.Event) []event {
	out := make([]event, len(evs))
	for i, ev := range evs {
		out[i] = summarize(ev)
	}
	return out
}

// addedEvents is the ADDED events of cms, in order.
func addedEvents(cms []*corev1.ConfigMap) []event {
	out := make([]event, len(cms))
	for i, cm := range cms {
		out[i] = event{Type: watch.Added, Name: cm.Name, RV: cm.ResourceVersion}
	}
	return out
}

// consumer reads a watcher's ResultChan until it is closed, keeping every
// event.
type consumer struct {
	mu     sync.Mutex
	events []watch.Event
	closed chan struct{} // closed once ResultChan is
}

func consume(ch <-chan watch.Event) *consumer {
	c := &consumer{closed: make(chan struct{})}
	go func() {
		defer close(c.closed)
		for ev := range ch {
			c.mu.Lock()
			c.events = append(c.events, ev)
			c.mu.Unlock()
		}
	}()
	return c
}

// Events returns a copy of the events received so far.
func (c *consumer) Events() []watch.Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]watch.Event(nil), c.events...)
}

// Len returns how many events were received so far.
func (c *consumer) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.events)
}

// Closed reports whether ResultChan was closed.
func (c *consumer) Closed() bool {
	select {
	case <-c.closed:
		return true
	default:
		return false
	}
}

// startOurs starts the adapter's RetryWatcher and a consumer of it. A
// cleanup stops it and checks that ResultChan and Done are closed.
func startOurs(t *testing.T, rv string, w cache.WatcherWithContext, opts ...k8s.Option) (*k8s.RetryWatcher, *consumer) {
	t.Helper()
	rw, err := k8s.NewRetryWatcherWithContext(t.Context(), rv, w, opts...)
	if err != nil {
		t.Fatalf("k8s.NewRetryWatcherWithContext() = %v", err)
	}
	c := consume(rw.ResultChan())
	t.Cleanup(func() { stopOurs(t, rw, c) })
	return rw, c
}

// stopOurs stops rw and waits until its ResultChan and Done are closed.
func stopOurs(t *testing.T, rw *k8s.RetryWatcher, c *consumer) {
	t.Helper()
	rw.Stop()
	timeout := time.NewTimer(deadline)
	defer timeout.Stop()
	select {
	case <-c.closed:
	case <-timeout.C:
		t.Errorf("ours: ResultChan still open %v after Stop", deadline)
		return
	}
	select {
	case <-rw.Done():
	case <-timeout.C:
		t.Errorf("ours: Done still open %v after Stop", deadline)
	}
}

// startUpstream starts client-go's RetryWatcher and a consumer of it. A
// cleanup stops it and checks that ResultChan and Done are closed.
func startUpstream(t *testing.T, rv string, w cache.WatcherWithContext) (*watchtools.RetryWatcher, *consumer) {
	t.Helper()
	rw, err := watchtools.NewRetryWatcherWithContext(t.Context(), rv, w)
	if err != nil {
		t.Fatalf("watchtools.NewRetryWatcherWithContext() = %v", err)
	}
	c := consume(rw.ResultChan())
	t.Cleanup(func() {
		rw.Stop()
		timeout := time.NewTimer(deadline)
		defer timeout.Stop()
		select {
		case <-c.closed:
		case <-timeout.C:
			t.Errorf("client-go: ResultChan still open %v after Stop", deadline)
			return
		}
		select {
		case <-rw.Done():
		case <-timeout.C:
			t.Errorf("client-go: Done still open %v after Stop", deadline)
		}
	})
	return rw, c
}

// waitFor polls cond until it reports true, and fails t if that takes more
// than deadline. cond also returns a description of the state, for the
// failure message.
func waitFor(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	timeout := time.NewTimer(deadline)
	defer timeout.Stop()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		ok, state := cond()
		if ok {
			return
		}
		select {
		case <-timeout.C:
			t.Fatalf("still waiting after %v for %s; %s", deadline, what, state)
		case <-tick.C:
		}
	}
}

// watchCall records one call of a recorder's WatchFuncWithContext and what
// the server sent on the watch it opened.
type watchCall struct {
	Epoch     int // the recorder's epoch when the call was made
	Opts      metav1.ListOptions
	Err       error    // the error of the call, if any
	Bookmarks []string // resource versions of the bookmarks received
	Events    int      // ADDED, MODIFIED and DELETED events received
	ErrorEv   *metav1.Status
	Closed    bool // the server ended the watch (the result channel closed)
}

// recorder wraps a ConfigMapInterface in a cache.ListWatch that records
// every list and watch call, and every event received on the wire, before
// the RetryWatcher sees them.
type recorder struct {
	mu    sync.Mutex
	epoch int
	lists []metav1.ListOptions
	calls []watchCall
}

// SetEpoch sets the epoch of the calls made from now on: a test marks its
// phases with it (after a restart, say).
func (r *recorder) SetEpoch(n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.epoch = n
}

// listWatch returns a ListWatch over cms that records into r.
func (r *recorder) listWatch(cms typedcorev1.ConfigMapInterface) *cache.ListWatch {
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			r.mu.Lock()
			r.lists = append(r.lists, opts)
			r.mu.Unlock()
			list, err := cms.List(ctx, opts)
			if err != nil {
				return nil, err
			}
			return list, nil
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			w, err := cms.Watch(ctx, opts)
			r.mu.Lock()
			i := len(r.calls)
			r.calls = append(r.calls, watchCall{Epoch: r.epoch, Opts: opts, Err: err})
			r.mu.Unlock()
			if err != nil {
				return w, err
			}
			return r.proxy(i, w), nil
		},
	}
}

// Calls returns a copy of the watch calls so far.
func (r *recorder) Calls() []watchCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]watchCall, len(r.calls))
	for i, c := range r.calls {
		c.Bookmarks = append([]string(nil), c.Bookmarks...)
		out[i] = c
	}
	return out
}

// Lists returns a copy of the options of the list calls so far.
func (r *recorder) Lists() []metav1.ListOptions {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]metav1.ListOptions(nil), r.lists...)
}

// Opened returns how many watch calls succeeded.
func (r *recorder) Opened() int {
	n := 0
	for _, c := range r.Calls() {
		if c.Err == nil {
			n++
		}
	}
	return n
}

func (r *recorder) received(i int, ev watch.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := &r.calls[i]
	switch ev.Type {
	case watch.Bookmark:
		if m, err := meta.Accessor(ev.Object); err == nil {
			c.Bookmarks = append(c.Bookmarks, m.GetResourceVersion())
		}
	case watch.Error:
		if st, ok := ev.Object.(*metav1.Status); ok {
			c.ErrorEv = st
		} else {
			c.ErrorEv = &apierrors.NewInternalError(fmt.Errorf("error event of %T", ev.Object)).ErrStatus
		}
	default:
		c.Events++
	}
}

func (r *recorder) ended(i int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls[i].Closed = true
}

// proxy returns a watch that forwards w's events, recording them as call i.
// Unlike watch.Filter, its goroutine ends on Stop even when nobody reads.
func (r *recorder) proxy(i int, w watch.Interface) watch.Interface {
	p := &proxyWatch{in: w, out: make(chan watch.Event), stop: make(chan struct{})}
	go func() {
		defer close(p.out)
		in := w.ResultChan()
		for {
			var (
				ev watch.Event
				ok bool
			)
			select {
			case ev, ok = <-in:
			case <-p.stop:
				return
			}
			if !ok {
				r.ended(i)
				return
			}
			r.received(i, ev)
			select {
			case p.out <- ev:
			case <-p.stop:
				return
			}
		}
	}()
	return p
}

type proxyWatch struct {
	in   watch.Interface
	out  chan watch.Event
	stop chan struct{}
	once sync.Once
}

func (p *proxyWatch) ResultChan() <-chan watch.Event { return p.out }

func (p *proxyWatch) Stop() {
	p.once.Do(func() { close(p.stop) })
	p.in.Stop()
}

// describeCalls is a one-line summary of watch calls, for logs.
func describeCalls(calls []watchCall) string {
	s := ""
	for i, c := range calls {
		if i > 0 {
			s += "; "
		}
		s += fmt.Sprintf("#%d rv=%s", i, c.Opts.ResourceVersion)
		switch {
		case c.Err != nil:
			s += fmt.Sprintf(" err=%v", c.Err)
		default:
			s += fmt.Sprintf(" events=%d bookmarks=%v", c.Events, c.Bookmarks)
			if c.ErrorEv != nil {
				s += fmt.Sprintf(" errorEvent=%d %s", c.ErrorEv.Code, c.ErrorEv.Reason)
			}
			if c.Closed {
				s += " closed"
			}
		}
	}
	return s
}
