package integration_test

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/resumable-go/resumable/adapters/etcd"
	"github.com/resumable-go/resumable/adapters/etcd/internal/cluster"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/internal/testkit/childproc"
)

// deadline bounds every wait; it guards against a hang and is generous for
// two busy cores. It is never a timing assertion.
const deadline = 2 * time.Minute

// ttl is the workers' lease TTL.
const ttl = 3 * time.Second

// pollInterval is how often the workers' output files are read.
const pollInterval = 10 * time.Millisecond

// ctxFor returns a context bounded by deadline and ended with t.
func ctxFor(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), deadline)
	t.Cleanup(cancel)
	return ctx
}

// event identifies one change: a key and the revision that wrote it.
type event struct {
	Key string
	Rev int64
}

func (e event) String() string { return e.Key + "@" + strconv.FormatInt(e.Rev, 10) }

// streamOf returns the stream of a key under /streams/.
func streamOf(key string) string {
	parts := strings.SplitN(strings.TrimPrefix(key, "/streams/"), "/", 2)
	return parts[0]
}

// line is one "handled" line of a worker, with when the test saw it.
type line struct {
	Worker string
	Stream string
	Event  event
	Seen   time.Time
	Offset int64 // where the line starts in the worker's stdout
}

// worker is one process of the example program.
type worker struct {
	id   string
	proc *childproc.Proc
}

// fleet is the workers of a test and everything they printed.
type fleet struct {
	t    *testing.T
	bin  string
	c    *cluster.Cluster
	dir  string
	args []string // extra flags for every worker

	mu      sync.Mutex
	workers map[string]*worker
	offsets map[string]int64
	lines   []line
	changed chan struct{}

	stop context.CancelFunc
	done chan struct{}
}

func newFleet(t *testing.T, c *cluster.Cluster, args ...string) *fleet {
	f := &fleet{
		t:       t,
		bin:     exampleBinary(t),
		c:       c,
		dir:     t.TempDir(),
		args:    args,
		workers: map[string]*worker{},
		offsets: map[string]int64{},
		changed: make(chan struct{}),
		done:    make(chan struct{}),
	}
	ctx, stop := context.WithCancel(context.Background())
	f.stop = stop
	go f.poll(ctx)
	t.Cleanup(f.cleanup)
	return f
}

// start starts worker id offering streams, with extra flags.
func (f *fleet) start(id string, streams []string, extra ...string) *worker {
	f.t.Helper()
	args := []string{"-v", "-endpoints", strings.Join(f.c.Endpoints(), ","), "-streams", strings.Join(streams, ","), "-id", id, "-ttl", ttl.String()}
	args = append(append(args, f.args...), extra...)
	p, err := childproc.Start(id, f.bin, args, filepath.Join(f.dir, id+".out"), filepath.Join(f.dir, id+".err"))
	if err != nil {
		f.t.Fatal(err)
	}
	w := &worker{id: id, proc: p}
	f.mu.Lock()
	f.workers[id] = w
	f.mu.Unlock()
	return w
}

// poll reads the workers' new output every pollInterval until ctx ends.
func (f *fleet) poll(ctx context.Context) {
	defer close(f.done)
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for {
		f.read()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// read appends the complete lines the workers wrote since the last read.
func (f *fleet) read() {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now()
	grew := false
	for id, w := range f.workers {
		b, err := os.ReadFile(w.proc.Stdout)
		if err != nil {
			continue
		}
		off := f.offsets[id]
		for {
			i := bytes.IndexByte(b[off:], '\n')
			if i < 0 {
				break
			}
			text := string(b[off : off+int64(i)])
			fields := strings.Fields(text)
			if len(fields) != 4 || fields[0] != "handled" {
				f.t.Errorf("%s printed %q, want \"handled NAME KEY MOD_REVISION\"", id, text)
			} else if rev, err := strconv.ParseInt(fields[3], 10, 64); err != nil {
				f.t.Errorf("%s printed %q: bad revision", id, text)
			} else {
				f.lines = append(f.lines, line{Worker: id, Stream: fields[1], Event: event{Key: fields[2], Rev: rev}, Seen: now, Offset: off})
			}
			off += int64(i) + 1
			grew = true
		}
		f.offsets[id] = off
	}
	if grew {
		close(f.changed)
		f.changed = make(chan struct{})
	}
}

// await waits until cond holds over the lines seen so far.
func (f *fleet) await(what string, cond func(lines []line) bool) {
	f.t.Helper()
	timeout := time.After(deadline)
	for {
		f.mu.Lock()
		ok, changed, n := cond(f.lines), f.changed, len(f.lines)
		f.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-changed:
		case <-timeout:
			f.t.Fatalf("timed out waiting for %s (%d lines seen)\n%s", what, n, f.tails())
		}
	}
}

// snapshot returns the lines seen so far.
func (f *fleet) snapshot() []line {
	f.read()
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]line(nil), f.lines...)
}

// awaitHandled waits until every event was handled by some worker.
func (f *fleet) awaitHandled(events []event) {
	f.t.Helper()
	f.await(fmt.Sprintf("all %d events handled", len(events)), func(lines []line) bool {
		seen := make(map[event]bool, len(lines))
		for _, l := range lines {
			seen[l.Event] = true
		}
		for _, e := range events {
			if !seen[e] {
				return false
			}
		}
		return true
	})
}

// stderr returns what worker id wrote to stderr.
func (f *fleet) stderr(id string) string {
	f.mu.Lock()
	w := f.workers[id]
	f.mu.Unlock()
	b, _ := os.ReadFile(w.proc.Stderr)
	return string(b)
}

// awaitStderr waits until worker id's stderr holds a line with every one
// of words, and returns it.
func (f *fleet) awaitStderr(id string, words ...string) string {
	f.t.Helper()
	end := time.Now().Add(deadline)
	for {
		for _, l := range strings.Split(f.stderr(id), "\n") {
			all := true
			for _, w := range words {
				all = all && strings.Contains(l, w)
			}
			if all {
				return l
			}
		}
		if time.Now().After(end) {
			f.t.Fatalf("%s printed no line with %q on stderr:\n%s", id, words, childproc.Tail(f.workers[id].proc.Stderr, 40))
		}
		time.Sleep(pollInterval)
	}
}

// terminate sends SIGTERM to worker id and waits for it to exit 0.
func (f *fleet) terminate(id string) {
	f.t.Helper()
	w := f.workers[id]
	if err := w.proc.Signal(syscall.SIGTERM); err != nil {
		f.t.Fatal(err)
	}
	if err := w.proc.Wait(deadline); err != nil {
		f.t.Errorf("%s after SIGTERM: %v, want exit status 0\n%s", id, err, childproc.Tail(w.proc.Stderr, 40))
	}
}

func (f *fleet) cleanup() {
	f.mu.Lock()
	ws := make([]*worker, 0, len(f.workers))
	for _, w := range f.workers {
		ws = append(ws, w)
	}
	f.mu.Unlock()
	for _, w := range ws {
		w.proc.Kill()
	}
	f.stop()
	<-f.done
	if f.t.Failed() {
		f.t.Logf("workers' output in %s\n%s", f.dir, f.tails())
	}
}

func (f *fleet) tails() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var b strings.Builder
	ids := make([]string, 0, len(f.workers))
	for id := range f.workers {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		w := f.workers[id]
		fmt.Fprintf(&b, "---- %s stderr\n%s\n---- %s stdout (tail)\n%s\n", id, childproc.Tail(w.proc.Stderr, 30), id, childproc.Tail(w.proc.Stdout, 5))
	}
	return b.String()
}

// writer writes one event after another, round-robin over streams, to
// PREFIX/NAME/NNNNNN, every interval, until stopped. A failed write is
// retried under a new key (a write whose outcome was unknown may have
// happened: the history says).
type writer struct {
	stop context.CancelFunc
	done chan struct{}
}

func startWriter(t *testing.T, c *clientv3.Client, prefix string, streams []string, interval time.Duration) *writer {
	ctx, stop := context.WithCancel(context.Background())
	w := &writer{stop: stop, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for n := 0; ; n++ {
			key := fmt.Sprintf("%s%s/%06d", prefix, streams[n%len(streams)], n)
			pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			_, _ = c.Put(pctx, key, "v")
			cancel()
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(w.halt)
	return w
}

// halt stops the writer and waits for its last write.
func (w *writer) halt() {
	w.stop()
	<-w.done
}

// history returns every put under prefix from revision from on, in
// revision order, as etcd recorded it.
func history(t *testing.T, c *clientv3.Client, prefix string, from int64) []event {
	t.Helper()
	ctx := ctxFor(t)
	resp, err := c.Get(ctx, "/", clientv3.WithCountOnly())
	if err != nil {
		t.Fatalf("Get() = %v", err)
	}
	last := resp.Header.Revision
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var out []event
	for wr := range c.Watch(wctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(from), clientv3.WithProgressNotify()) {
		if err := wr.Err(); err != nil {
			t.Fatalf("watching the history of %s: %v", prefix, err)
		}
		for _, ev := range wr.Events {
			if ev.Type == mvccpb.PUT {
				out = append(out, event{Key: string(ev.Kv.Key), Rev: ev.Kv.ModRevision})
			}
		}
		if wr.Header.GetRevision() >= last {
			return out
		}
	}
	t.Fatalf("the history watch of %s ended", prefix)
	return nil
}

// cursorHistory returns every value the cursor of stream had, in order.
func cursorHistory(t *testing.T, c *clientv3.Client, stream string) []etcd.Cursor {
	t.Helper()
	ctx := ctxFor(t)
	key := "/resumable/cursors/" + stream
	resp, err := c.Get(ctx, key)
	if err != nil {
		t.Fatalf("Get() = %v", err)
	}
	last := resp.Header.Revision
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var out []etcd.Cursor
	codec := cursor.JSON[etcd.Cursor]()
	for wr := range c.Watch(wctx, key, clientv3.WithRev(1), clientv3.WithProgressNotify()) {
		if err := wr.Err(); err != nil {
			t.Fatalf("watching the history of %s: %v", key, err)
		}
		for _, ev := range wr.Events {
			cur, err := codec.Decode(ev.Kv.Value)
			if err != nil {
				t.Fatalf("cursor at revision %d: %v", ev.Kv.ModRevision, err)
			}
			out = append(out, cur)
		}
		if wr.Header.GetRevision() >= last {
			return out
		}
	}
	t.Fatalf("the history watch of %s ended", key)
	return nil
}

// checkMonotonic fails t if a stream's stored cursor ever went back.
func checkMonotonic(t *testing.T, c *clientv3.Client, streams []string) {
	t.Helper()
	for _, s := range streams {
		hist := cursorHistory(t, c, s)
		for i := 1; i < len(hist); i++ {
			if compareCursors(hist[i], hist[i-1]) < 0 {
				t.Errorf("stream %s: the stored cursor went back from %v to %v", s, hist[i-1], hist[i])
			}
		}
	}
}

// mostStreams returns the member owning the most streams, and those.
func mostStreams(owners map[string]string) (string, []string) {
	by := map[string][]string{}
	for s, m := range owners {
		by[m] = append(by[m], s)
	}
	best := ""
	for m, ss := range by {
		if best == "" || len(ss) > len(by[best]) || (len(ss) == len(by[best]) && m < best) {
			best = m
		}
	}
	sort.Strings(by[best])
	return best, by[best]
}

// firstAfter returns, for each stream, the first line of a worker other
// than not, seen after t0.
func firstAfter(lines []line, streams []string, not string, t0 time.Time) map[string]line {
	want := map[string]bool{}
	for _, s := range streams {
		want[s] = true
	}
	out := map[string]line{}
	for _, l := range lines {
		if want[l.Stream] && l.Worker != not && l.Seen.After(t0) {
			if _, ok := out[l.Stream]; !ok {
				out[l.Stream] = l
			}
		}
	}
	return out
}

// compareCursors orders cursors as the stream does: by revision, and within
// a revision by index, where index 0 (the whole revision) comes last.
func compareCursors(a, b etcd.Cursor) int {
	if c := cmp.Compare(a.Revision, b.Revision); c != 0 || a.Index == b.Index {
		return c
	}
	switch {
	case a.Index == 0:
		return 1
	case b.Index == 0:
		return -1
	}
	return cmp.Compare(a.Index, b.Index)
}
