package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/resumable-go/resumable/adapters/redis"
	"github.com/resumable-go/resumable/deadletter"
	"github.com/resumable-go/resumable/stream"
)

// installCommand installs redis-server (Debian's and Ubuntu's package).
const installCommand = "apt-get install redis-server"

// errNoServer is returned by the demo when no redis-server binary is found.
var errNoServer = errors.New("the demo needs redis-server, which was not found")

// The demo's names, entries and limits.
const (
	demoStream    = "orders"
	demoGroup     = "demo"
	claimIdle     = time.Second // how long a dead consumer's entries wait before they are claimed
	maxDeliveries = 3
	demoWait      = 30 * time.Second // bounds every wait: a guard against a hang, never a timing check
)

// demo starts a throw-away redis-server and shows the group consumer's
// point: consumer a is cut off while its handler holds three entries,
// consumer b claims and handles them; then an entry whose handler always
// fails is parked in a dead-letter file after maxDeliveries calls. It
// checks what happened and returns nil when everything did as promised.
func demo(ctx context.Context, w, ew io.Writer) error {
	// The consumers' goroutines print too, and go-redis's logger writes
	// to stderr.
	stdout, stderr := &lockedWriter{w: w}, &lockedWriter{w: ew}
	srv, err := startServer(ctx)
	if err != nil {
		return err
	}
	defer srv.close()
	fmt.Fprintf(stderr, "demo: redis-server on %s, in %s\n", srv.addr, srv.dir)
	rdb := goredis.NewClient(&goredis.Options{Addr: srv.addr})
	defer rdb.Close()
	first := []string{"1-1", "1-2", "1-3"}
	if err := addDemoEntries(ctx, rdb, first, ""); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "demo: stream %s, group %s: entries %s\n", demoStream, demoGroup, strings.Join(first, " "))

	// Consumer a: its handler takes the entries and never finishes.
	cut := &cutter{socks: make(map[net.Conn]bool)}
	goredis.SetLogger(quietLogger{stderr}) // go-redis logs each failed dial of the cut client
	ra := goredis.NewClient(&goredis.Options{Addr: srv.addr, Dialer: cut.dial})
	defer ra.Close()
	holding := make(chan string, len(first))
	a, err := startDemoConsumer(ctx, ra, "a", nil, func(ctx context.Context, e redis.Entry) error {
		holding <- e.ID
		<-ctx.Done()
		return ctx.Err()
	}, stream.WithConcurrency(len(first)))
	if err != nil {
		return err
	}
	defer a.stop()
	held, err := receive(ctx, holding, len(first), "consumer a to hold the entries")
	if err != nil {
		return err
	}
	slices.SortFunc(held, redis.Compare)
	fmt.Fprintf(stdout, "a: handling %s; its handler hangs\n", strings.Join(held, " "))
	cut.kill()
	pending, err := pendingOf(ctx, rdb, "a")
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "a: cut off from Redis, as if its process died, with %d entries pending: %s\n", len(pending), strings.Join(pending, " "))

	// Consumer b claims a's entries once they were idle for claimIdle,
	// and parks a poison entry.
	dlPath := filepath.Join(srv.dir, "dead-letter.jsonl")
	dl, err := deadletter.Open(dlPath, redis.Extract)
	if err != nil {
		return err
	}
	defer dl.Close()
	rb := goredis.NewClient(&goredis.Options{Addr: srv.addr})
	defer rb.Close()
	handled := make(chan string, 16)
	var mu sync.Mutex
	calls := map[string]int{}
	fromA := map[string]bool{}
	for _, id := range pending {
		fromA[id] = true
	}
	park := func(ctx context.Context, e redis.Entry, err error) error {
		if err := dl.Park(ctx, e, err); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "b: parked %s in the dead-letter file\n", e.ID)
		handled <- e.ID
		return nil
	}
	b, err := startDemoConsumer(ctx, rb, "b", park, func(_ context.Context, e redis.Entry) error {
		mu.Lock()
		calls[e.ID]++
		n := calls[e.ID]
		mu.Unlock()
		if e.Values["poison"] == "1" {
			fmt.Fprintf(stdout, "b: handler failed on %s (poison), call %d of at most %d\n", e.ID, n, maxDeliveries)
			return errPoison
		}
		if fromA[e.ID] {
			fmt.Fprintf(stdout, "b: handled %s, claimed from a\n", e.ID)
		} else {
			fmt.Fprintf(stdout, "b: handled %s\n", e.ID)
		}
		handled <- e.ID
		return nil
	})
	if err != nil {
		return err
	}
	defer b.stop()
	if _, err := receive(ctx, handled, len(pending), "consumer b to claim a's entries"); err != nil {
		return err
	}
	more := []string{"1-4", "1-5", "1-6"}
	fmt.Fprintf(stdout, "demo: adding %s; the handler fails on 1-5 every time\n", strings.Join(more, " "))
	if err := addDemoEntries(ctx, rdb, more, "1-5"); err != nil {
		return err
	}
	if _, err := receive(ctx, handled, len(more), "consumer b to handle the new entries"); err != nil {
		return err
	}
	if err := awaitAcknowledged(ctx, rdb); err != nil {
		return err
	}
	aErr, bErr := a.stop(), b.stop()
	mu.Lock()
	defer mu.Unlock()
	return check(stdout, dlPath, calls, aErr, bErr)
}

// check returns nil when every entry was handled once by b, 1-5 failed
// maxDeliveries times and was parked once, and both consumers ended only
// because they were stopped; it prints the verdict.
func check(stdout io.Writer, dlPath string, calls map[string]int, aErr, bErr error) error {
	var errs []error
	want := map[string]int{"1-1": 1, "1-2": 1, "1-3": 1, "1-4": 1, "1-5": maxDeliveries, "1-6": 1}
	for id, n := range want {
		if calls[id] != n {
			errs = append(errs, fmt.Errorf("b called its handler on %s %d times, want %d", id, calls[id], n))
		}
	}
	var parked []string
	for rec, err := range deadletter.Read[redis.Entry, string](dlPath) {
		if err != nil {
			errs = append(errs, err)
			break
		}
		parked = append(parked, rec.Cursor)
	}
	if !slices.Equal(parked, []string{"1-5"}) {
		errs = append(errs, fmt.Errorf("the dead-letter file holds %v, want [1-5]", parked))
	}
	for name, err := range map[string]error{"a": aErr, "b": bErr} {
		if !errors.Is(err, context.Canceled) {
			errs = append(errs, fmt.Errorf("consumer %s ended with %v, want only its stop", name, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("demo: check failed: %w", err)
	}
	fmt.Fprintf(stdout, "ok: a's entries claimed and handled once by b, 1-5 parked after %d calls, nothing left pending\n", maxDeliveries)
	return nil
}

// demoConsumer is one Group consumer running in a goroutine of the demo.
type demoConsumer struct {
	cancel context.CancelFunc
	done   chan struct{}
	err    error // Run's error, once done is closed
}

// startDemoConsumer runs the consumer name of the demo's group on rdb with
// handler h (wrapped by Group.Handler) until stop.
func startDemoConsumer(ctx context.Context, rdb *goredis.Client, name string, park func(context.Context, redis.Entry, error) error,
	h func(context.Context, redis.Entry) error, opts ...stream.Option) (*demoConsumer, error) {
	g, err := redis.NewGroup(rdb, demoStream, demoGroup, name, redis.WithClaimIdle(claimIdle), redis.WithMaxDeliveries(maxDeliveries))
	if err != nil {
		return nil, err
	}
	if park != nil {
		opts = append(opts, stream.WithDeadLetter(park))
	}
	r, err := redis.NewGroupResumer(g, opts...)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	c := &demoConsumer{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		c.err = r.Run(ctx, g.Handler(h))
	}()
	return c, nil
}

// stop ends the consumer and returns Run's error. It may be called more
// than once.
func (c *demoConsumer) stop() error {
	c.cancel()
	<-c.done
	return c.err
}

// lockedWriter serialises the writes of the demo's goroutines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// quietLogger is go-redis's logger for the demo: it drops the lines
// about the cut consumer's failed dials, and writes the others to w.
type quietLogger struct{ w io.Writer }

func (l quietLogger) Printf(_ context.Context, format string, v ...any) {
	line := fmt.Sprintf(format, v...)
	if !strings.Contains(line, errCut.Error()) {
		fmt.Fprintln(l.w, "redis: go-redis:", line)
	}
}

// errCut is the cut consumer's dial error.
var errCut = errors.New("demo: consumer a is cut off")

// cutter is a go-redis Dialer whose kill closes every connection it made
// and refuses new ones: a client cut off from the server, as when its
// process died or its network failed.
type cutter struct {
	mu     sync.Mutex
	socks  map[net.Conn]bool
	killed bool
}

func (c *cutter) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.killed {
		return nil, errCut
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	c.socks[conn] = true
	return conn, nil
}

func (c *cutter) kill() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.killed = true
	for conn := range c.socks {
		_ = conn.Close()
	}
}

// addDemoEntries adds the entries ids (explicit IDs, so that the demo's output
// is the same every run); the one with ID poison gets the field poison=1.
func addDemoEntries(ctx context.Context, rdb *goredis.Client, ids []string, poison string) error {
	for i, id := range ids {
		values := map[string]any{"n": strconv.Itoa(i)}
		if id == poison {
			values["poison"] = "1"
		}
		if err := rdb.XAdd(ctx, &goredis.XAddArgs{Stream: demoStream, ID: id, Values: values}).Err(); err != nil {
			return err
		}
	}
	return nil
}

// receive takes n values from ch, waiting at most demoWait for what.
func receive(ctx context.Context, ch <-chan string, n int, what string) ([]string, error) {
	timeout := time.NewTimer(demoWait)
	defer timeout.Stop()
	var got []string
	for len(got) < n {
		select {
		case v := <-ch:
			got = append(got, v)
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-timeout.C:
			return nil, fmt.Errorf("demo: waited %v for %s: %d of %d", demoWait, what, len(got), n)
		}
	}
	return got, nil
}

// pendingOf returns the IDs in consumer's pending list.
func pendingOf(ctx context.Context, rdb *goredis.Client, consumer string) ([]string, error) {
	list, err := rdb.XPendingExt(ctx, &goredis.XPendingExtArgs{Stream: demoStream, Group: demoGroup, Start: "-", End: "+", Count: 100, Consumer: consumer}).Result()
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(list))
	for i, p := range list {
		ids[i] = p.ID
	}
	return ids, nil
}

// awaitAcknowledged polls until the group has no pending entry (b
// acknowledges what it committed with its next read, or at once when it
// is waiting for entries).
func awaitAcknowledged(ctx context.Context, rdb *goredis.Client) error {
	end := time.Now().Add(demoWait)
	for {
		p, err := rdb.XPending(ctx, demoStream, demoGroup).Result()
		if err != nil {
			return err
		}
		if p.Count == 0 {
			return nil
		}
		if time.Now().After(end) {
			return fmt.Errorf("demo: %d entries still pending after %v", p.Count, demoWait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond): // polling, bounded by end
		}
	}
}

// server is the demo's redis-server, in a temporary directory.
type server struct {
	addr, dir string
	cmd       *exec.Cmd
	exited    chan struct{} // closed once cmd was reaped
}

// serverBin returns the redis-server binary: $RESUMABLE_REDIS_SERVER when
// set, else /usr/bin/redis-server, else redis-server on $PATH.
func serverBin() (string, error) {
	if bin := os.Getenv("RESUMABLE_REDIS_SERVER"); bin != "" {
		if _, err := os.Stat(bin); err != nil {
			return "", fmt.Errorf("%w: RESUMABLE_REDIS_SERVER=%s: %v", errNoServer, bin, err)
		}
		return bin, nil
	}
	if _, err := os.Stat("/usr/bin/redis-server"); err == nil {
		return "/usr/bin/redis-server", nil
	}
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return "", fmt.Errorf("%w (not at /usr/bin/redis-server nor on $PATH)", errNoServer)
	}
	return bin, nil
}

// startServer runs redis-server without persistence on a free port of
// 127.0.0.1, its working directory a temporary one. A port taken between
// the look for a free one and the server's start is tried again.
func startServer(ctx context.Context) (*server, error) {
	bin, err := serverBin()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "resumable-redis-demo-")
	if err != nil {
		return nil, err
	}
	for try := 1; ; try++ {
		s, err := launch(ctx, bin, dir)
		if err == nil {
			return s, nil
		}
		if try == 3 || ctx.Err() != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
}

// launch starts the server once and waits until it answers PING.
func launch(ctx context.Context, bin, dir string) (*server, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	s := &server{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), dir: dir, exited: make(chan struct{})}
	logPath := filepath.Join(dir, "redis.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	s.cmd = exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", dir, "--daemonize", "no", "--protected-mode", "yes")
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	s.cmd.SysProcAttr = sysProcAttr()
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		_ = s.cmd.Wait()
		close(s.exited)
	}()
	rdb := goredis.NewClient(&goredis.Options{Addr: s.addr, MaxRetries: -1})
	defer rdb.Close()
	end := time.Now().Add(demoWait)
	for {
		err := rdb.Ping(ctx).Err()
		if err == nil {
			return s, nil
		}
		select {
		case <-s.exited:
			log, _ := os.ReadFile(logPath)
			return nil, fmt.Errorf("redis-server on %s exited: %s", s.addr, log)
		case <-ctx.Done():
			s.kill()
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond): // polling a starting server, bounded by end
		}
		if time.Now().After(end) {
			s.kill()
			return nil, fmt.Errorf("redis-server on %s did not answer within %v: %v", s.addr, demoWait, err)
		}
	}
}

// kill kills the server and waits until it was reaped.
func (s *server) kill() {
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.exited
}

// close kills the server and removes its directory.
func (s *server) close() {
	s.kill()
	os.RemoveAll(s.dir)
}
