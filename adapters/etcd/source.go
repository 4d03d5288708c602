package etcd

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/resumable-go/resumable/errclass"
	"github.com/resumable-go/resumable/internal/badarg"
	"github.com/resumable-go/resumable/stream"
)

type source struct {
	w      clientv3.Watcher
	kv     clientv3.KV // w when it is also a KV (a *clientv3.Client is); nil otherwise
	prefix string
}

// NewSource returns the [stream.Source] of a watch of the keys under prefix
// (every key when prefix is empty), whose extractor is [Extract] and order
// [Compare]; [NewResumer] wires it with a resync. w is usually a
// *clientv3.Client: when w is also a KV, Open checks the cluster with a
// linearizable read, and again after 10 s of silence (etcd's client
// silently reopens a broken watch on whatever answers, and a cluster
// behind the watch's revision sends it nothing); with a bare Watcher only
// the responses' cluster ID is checked.
//
// Its errors are marked where they arise: a compacted cursor is
// [errclass.CursorExpired], another history [stream.ErrSourceChanged],
// PermissionDenied, Unauthenticated and InvalidArgument
// [errclass.Permanent], a closed client permanent too; the rest is
// retried. It returns an error matching [stream.ErrInvalidOption] for a
// nil w.
func NewSource(w clientv3.Watcher, prefix string) (stream.Source[Event, Cursor], error) {
	if w == nil {
		return nil, badarg.New("etcd: NewSource", "w", nil, "must not be nil")
	}
	return newSource(w, prefix), nil
}

func newSource(w clientv3.Watcher, prefix string) *source {
	kv, _ := w.(clientv3.KV)
	return &source{w: w, kv: kv, prefix: prefix}
}

// Open watches the events after after, once the cluster shows its history.
func (s *source) Open(ctx context.Context, after Cursor) (stream.Conn[Event], error) {
	if err := after.validate(); err != nil {
		return nil, errclass.Permanent(err)
	}
	if err := s.clientErr(); err != nil {
		return nil, err
	}
	rev, skip := after.watchFrom()
	c := &conn{
		src:     s,
		from:    rev,
		skipRev: rev,
		skip:    skip,
		last:    after,
		cluster: after.Cluster,
		seen:    after.Revision,
	}
	if s.kv != nil {
		if err := c.verify(ctx); err != nil {
			return nil, err
		}
		c.probe = time.NewTimer(probeEvery)
	}
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	c.cancel = cancel
	c.ch = s.w.Watch(wctx, s.prefix, clientv3.WithPrefix(), clientv3.WithRev(rev), clientv3.WithProgressNotify(), clientv3.WithCreatedNotify())
	return c, nil
}

// RecvRespectsContext: Recv returns as soon as its ctx ends.
func (s *source) RecvRespectsContext() bool { return true }

// clientErr is permanent once the client was closed: every watch would end.
func (s *source) clientErr() error {
	if c, ok := s.w.(interface{ Ctx() context.Context }); ok && c.Ctx().Err() != nil {
		return errclass.Permanent(errClientClosed)
	}
	return nil
}

// probeEvery is how long a watch may stay silent before its cluster is
// checked again; probeTimeout bounds one check.
var probeEvery, probeTimeout = 10 * time.Second, 5 * time.Second

// conn is one watch. Only Recv touches its state; Close only cancels the
// watch and a check in flight, under mu.
type conn struct {
	src    *source
	ch     clientv3.WatchChan
	cancel context.CancelFunc
	from   int64 // the revision the watch started at

	events []*clientv3.Event // the current response's events
	next   int               // the next of them to deliver

	skipRev int64 // events of this revision ...
	skip    int   // ... up to this index were handled before the Open

	rev  int64 // the revision of the last event seen
	idx  int   // its index within rev
	last Cursor

	cluster uint64      // the cluster's ID; 0 until known
	seen    int64       // the highest revision the cursor or the cluster reported
	probe   *time.Timer // fires when the watch was silent for probeEvery; nil without a KV

	mu         sync.Mutex // guards what Close touches
	closed     bool
	stopVerify context.CancelFunc // ends the check in flight
}

func (c *conn) Recv(ctx context.Context) (Event, error) {
	for {
		for c.next < len(c.events) {
			ev := c.events[c.next]
			c.next++
			if ev.Kv == nil {
				return Event{}, fmt.Errorf("etcd: watch of %q: an event without a key", c.src.prefix)
			}
			if r := ev.Kv.ModRevision; r != c.rev {
				c.rev, c.idx = r, 0
			}
			c.idx++
			if c.rev == c.skipRev && c.idx <= c.skip {
				continue // handled before this watch was opened
			}
			c.last = Cursor{Revision: c.rev, Index: c.idx, Cluster: c.cluster}
			out := Event{
				Type:           ev.Type,
				Key:            ev.Kv.Key,
				Value:          ev.Kv.Value,
				ModRevision:    ev.Kv.ModRevision,
				CreateRevision: ev.Kv.CreateRevision,
				Version:        ev.Kv.Version,
				Lease:          ev.Kv.Lease,
				Cursor:         c.last,
			}
			return out, nil
		}
		c.events, c.next = nil, 0

		resp, err := c.receive(ctx)
		if err != nil {
			return Event{}, err
		}
		switch {
		case resp.Created:
			continue // its header was checked
		case resp.IsProgressNotify():
			// Everything up to the header's revision was delivered. A member
			// behind the revision this watch started at could report less:
			// never move the cursor back.
			p := Cursor{Revision: resp.Header.GetRevision(), Cluster: c.cluster}
			if Compare(p, c.last) <= 0 {
				continue
			}
			c.last = p
			return Event{Cursor: p, progress: true}, nil
		}
		c.events = resp.Events
	}
}

// receive returns the next response once its header was checked, probing
// the cluster every probeEvery of silence.
func (c *conn) receive(ctx context.Context) (clientv3.WatchResponse, error) {
	for {
		var probe <-chan time.Time
		if c.probe != nil {
			c.probe.Reset(probeEvery)
			probe = c.probe.C
		}
		select {
		case resp, ok := <-c.ch:
			if !ok {
				return resp, c.closedErr(ctx)
			}
			if err := resp.Err(); err != nil {
				return resp, c.fail(resp, err)
			}
			return resp, c.check(ctx, resp.Header)
		case <-probe:
			if err := c.verify(ctx); errors.Is(err, stream.ErrSourceChanged) {
				return clientv3.WatchResponse{}, err
			} // another failure is the watch's to show
		case <-ctx.Done():
			return clientv3.WatchResponse{}, ctx.Err()
		}
	}
}

func (c *conn) closedErr(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := c.src.clientErr(); err != nil {
		return err
	}
	return fmt.Errorf("etcd: watch of %q: %w", c.src.prefix, errWatchClosed)
}

// check fails when a response's header shows another cluster, or a
// revision below one already seen that a linearizable read confirms (a
// member that lags behind reports less, and is not an error).
func (c *conn) check(ctx context.Context, h *etcdserverpb.ResponseHeader) error {
	if h == nil {
		return nil
	}
	if err := c.sameCluster(h.ClusterId); err != nil {
		return err
	}
	if h.Revision < c.seen && c.src.kv != nil {
		if err := c.verify(ctx); errors.Is(err, stream.ErrSourceChanged) {
			return err
		}
		return nil
	}
	c.seen = max(c.seen, h.Revision)
	return nil
}

// sameCluster fails when id is not the cluster the watch belongs to, and
// learns it while unknown. An ID of 0 says nothing.
func (c *conn) sameCluster(id uint64) error {
	switch {
	case id == 0 || id == c.cluster:
		return nil
	case c.cluster == 0:
		c.cluster = id
		return nil
	}
	return fmt.Errorf("etcd: watch of %q after %v: the cluster ID was %x, now %x: %w",
		c.src.prefix, c.last, c.cluster, id, stream.ErrSourceChanged)
}

// verify fails when a linearizable read (which no member's lag can make
// report less) shows another history than the watch's.
func (c *conn) verify(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return fmt.Errorf("etcd: watch of %q: %w", c.src.prefix, errWatchClosed)
	}
	c.stopVerify = cancel
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.stopVerify = nil
		c.mu.Unlock()
	}()
	key := c.src.prefix
	if key == "" {
		key = "\x00"
	}
	resp, err := c.src.kv.Get(ctx, key, clientv3.WithCountOnly())
	if err != nil {
		return refused(fmt.Errorf("etcd: watch of %q: reading the cluster's revision: %w", c.src.prefix, err))
	}
	if err := c.sameCluster(resp.Header.GetClusterId()); err != nil {
		return err
	}
	if now := resp.Header.GetRevision(); now < c.seen {
		return fmt.Errorf("etcd: watch of %q after %v: the revision went back from %d to %d: %w",
			c.src.prefix, c.last, c.seen, now, stream.ErrSourceChanged)
	}
	c.seen = resp.Header.GetRevision()
	return nil
}

func (c *conn) fail(resp clientv3.WatchResponse, err error) error {
	if errors.Is(err, rpctypes.ErrCompacted) {
		return errclass.CursorExpired(fmt.Errorf("etcd: watch of %q from revision %d: %w (history before revision %d is gone)",
			c.src.prefix, c.from, err, resp.CompactRevision))
	}
	return refused(fmt.Errorf("etcd: watch of %q from revision %d: %w", c.src.prefix, c.from, err))
}

// Close ends the watch, and a check of the cluster in flight. It may be
// called more than once, and concurrently with Recv.
func (c *conn) Close() error {
	c.cancel()
	c.mu.Lock()
	c.closed = true
	if c.stopVerify != nil {
		c.stopVerify()
	}
	c.mu.Unlock()
	return nil
}

// errWatchClosed: the client's watcher gave up on its stream; retried.
var errWatchClosed = errors.New("the watch channel closed without an error")
