package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// demoStreams are the demo's streams; demoBatch is how many events it
// writes to each per round.
var demoStreams = []string{"orders", "payments", "audit"}

const demoBatch = 5

// demo runs two workers against an embedded etcd through three rounds of
// writes: w1 alone, w1 and w2 (some streams move to w2), w2 alone (w1 was
// stopped and handed off). It checks that every event was handled exactly
// once.
func demo(ctx context.Context, stdout, stderr io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	srv, endpoint, err := startEmbedded()
	if err != nil {
		return err
	}
	defer srv.close()
	fmt.Fprintf(stderr, "demo: embedded etcd at %s\n", endpoint)

	tally := newTally()
	writer, err := newClient(endpoint)
	if err != nil {
		return err
	}
	defer writer.Close()
	w1, err := startWorker(ctx, endpoint, "w1", stdout, stderr, tally)
	if err != nil {
		return err
	}
	if err := tally.writeRound(ctx, writer, 1); err != nil {
		return errors.Join(err, w1.stop())
	}
	w2, err := startWorker(ctx, endpoint, "w2", stdout, stderr, tally)
	if err != nil {
		return errors.Join(err, w1.stop())
	}
	if err := tally.writeRound(ctx, writer, 2); err != nil {
		return errors.Join(err, w1.stop(), w2.stop())
	}
	fmt.Fprintln(stderr, "demo: stopping w1 (as SIGTERM would): it saves its cursors and gives its streams to w2 at once")
	if err := w1.stop(); err != nil {
		return errors.Join(err, w2.stop())
	}
	if err := tally.writeRound(ctx, writer, 3); err != nil {
		return errors.Join(err, w2.stop())
	}
	if err := w2.stop(); err != nil {
		return err
	}
	return tally.verdict(stdout)
}

// worker is one Group member of the demo, in a goroutine.
type worker struct {
	client *clientv3.Client
	cancel context.CancelFunc
	done   chan error
}

func startWorker(ctx context.Context, endpoint, id string, stdout, stderr io.Writer, t *tally) (*worker, error) {
	client, err := newClient(endpoint)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	w := &worker{client: client, cancel: cancel, done: make(chan error, 1)}
	cfg := config{id: id, streams: demoStreams, ttl: 2 * time.Second, every: 10, interval: time.Second}
	out := newLines(stdout, t.handled)
	out.prefix = id + " "
	go func() { w.done <- work(ctx, client, cfg, out, newStatus(stderr, id+" "), zap.NewNop()) }()
	return w, nil
}

// stop ends the worker as SIGTERM would and waits for its handoff.
func (w *worker) stop() error {
	w.cancel()
	err := <-w.done
	w.client.Close()
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// tally counts how often each key written was handled.
type tally struct {
	mu      sync.Mutex
	written []string
	counts  map[string]int
	changed chan struct{}
}

func newTally() *tally { return &tally{counts: map[string]int{}, changed: make(chan struct{})} }

func (t *tally) handled(_ string, key []byte) {
	t.mu.Lock()
	t.counts[string(key)]++
	close(t.changed)
	t.changed = make(chan struct{})
	t.mu.Unlock()
}

// writeRound writes demoBatch events to each stream, then waits until all
// were handled.
func (t *tally) writeRound(ctx context.Context, c *clientv3.Client, round int) error {
	for i := range demoBatch {
		for _, s := range demoStreams {
			key := fmt.Sprintf("/streams/%s/%d-%02d", s, round, i)
			if _, err := c.Put(ctx, key, "event"); err != nil {
				return fmt.Errorf("writing %s: %w", key, err)
			}
			t.mu.Lock()
			t.written = append(t.written, key)
			t.mu.Unlock()
		}
	}
	for {
		t.mu.Lock()
		missing := 0
		for _, k := range t.written {
			if t.counts[k] == 0 {
				missing++
			}
		}
		changed := t.changed
		t.mu.Unlock()
		if missing == 0 {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("round %d: %d events not handled: %w", round, missing, ctx.Err())
		}
	}
}

// verdict prints the summary, and fails if an event was handled twice.
func (t *tally) verdict(stdout io.Writer) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	var twice []string
	for k, n := range t.counts {
		if n > 1 {
			twice = append(twice, k)
		}
	}
	sort.Strings(twice)
	if len(twice) > 0 {
		return fmt.Errorf("handled more than once across graceful handoffs: %s", strings.Join(twice, ", "))
	}
	fmt.Fprintf(stdout, "demo: %d events written to %d streams, each handled exactly once across the handoffs\n", len(t.written), len(demoStreams))
	return nil
}

func newClient(endpoint string) (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
}

// embedded is the demo's single-member etcd.
type embedded struct {
	etcd *embed.Etcd
	dir  string
}

func (e *embedded) close() {
	e.etcd.Close()
	os.RemoveAll(e.dir)
}

// startEmbedded starts etcd on two free loopback ports in a temporary
// directory.
func startEmbedded() (*embedded, string, error) {
	dir, err := os.MkdirTemp("", "resumable-etcd-demo-")
	if err != nil {
		return nil, "", err
	}
	var urls [2]url.URL
	for i := range urls {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			os.RemoveAll(dir)
			return nil, "", err
		}
		urls[i] = url.URL{Scheme: "http", Host: l.Addr().String()}
		l.Close()
	}
	cfg := embed.NewConfig()
	cfg.Name = "demo"
	cfg.Dir = dir
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = urls[:1], urls[:1]
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = urls[1:], urls[1:]
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		os.RemoveAll(dir)
		return nil, "", fmt.Errorf("starting the embedded etcd: %w", err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(time.Minute):
		e.Close()
		os.RemoveAll(dir)
		return nil, "", errors.New("the embedded etcd was not ready within a minute")
	}
	return &embedded{etcd: e, dir: dir}, urls[0].String(), nil
}
