package etcd

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/resumable-go/resumable/errclass"
	"github.com/resumable-go/resumable/stream"
)

// Source is a [stream.Source] over an etcd watch of the keys under a
// prefix. Make one with [NewSource]; it is safe for concurrent use and
// starts no goroutine of its own (the client's watcher runs the watch).
type Source struct {
	w      clientv3.Watcher
	prefix string
}

var _ stream.Source[Event, Cursor] = (*Source)(nil)

// NewSource returns a Source that watches the keys under prefix through w
// (a *clientv3.Client, or its Watcher). An empty prefix watches every key.
//
// Each Open watches from the revision its cursor asks for, with
// clientv3.WithProgressNotify (the server's progress notifications become
// [Progress] events, which move the cursor of a quiet prefix forward) and
// clientv3.WithRequireLeader (a member that lost its leader cancels the
// watch, and the reopen lands on a member that has one). A revision whose
// events the cursor has partly handled is watched again from its start and
// the handled ones are skipped (see [Cursor]).
//
// The connection's Recv returns the events one by one. It fails with an
// error that matches rpctypes.ErrCompacted and is marked
// [errclass.CursorExpired] when the revision to resume from was compacted,
// with the watch's error (rpctypes.ErrNoLeader, say) when the server
// cancelled the watch, and with an error matching [ErrClientClosed],
// marked [errclass.Permanent], once the client is closed.
func NewSource(w clientv3.Watcher, prefix string) *Source {
	return &Source{w: w, prefix: prefix}
}

// Open starts a watch of the events strictly after cursor after. The watch
// lives until the connection is closed or ctx ends.
func (s *Source) Open(ctx context.Context, after Cursor) (stream.Conn[Event], error) {
	if err := after.validate(); err != nil {
		return nil, errclass.Permanent(err)
	}
	if err := s.clientErr(); err != nil {
		return nil, err
	}
	rev, skip := after.watchFrom()
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	ch := s.w.Watch(wctx, s.prefix, clientv3.WithPrefix(), clientv3.WithRev(rev), clientv3.WithProgressNotify())
	return &conn{
		src:     s,
		ch:      ch,
		cancel:  cancel,
		from:    rev,
		skipRev: rev,
		skip:    skip,
		last:    after,
	}, nil
}

// RecvRespectsContext implements [stream.ContextRespecter]: Recv returns as
// soon as its ctx ends.
func (s *Source) RecvRespectsContext() bool { return true }

// clientErr returns ErrClientClosed when the watcher is a client that was
// closed: its watches would all end at once, forever.
func (s *Source) clientErr() error {
	if c, ok := s.w.(interface{ Ctx() context.Context }); ok && c.Ctx().Err() != nil {
		return errclass.Permanent(ErrClientClosed)
	}
	return nil
}

// conn is one watch. Its state is touched by Recv only; Close only cancels
// the watch's context.
type conn struct {
	src    *Source
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
			c.last = Cursor{Revision: c.rev, Index: c.idx}
			out := Event{
				Type:           Put,
				Key:            ev.Kv.Key,
				Value:          ev.Kv.Value,
				ModRevision:    ev.Kv.ModRevision,
				CreateRevision: ev.Kv.CreateRevision,
				Version:        ev.Kv.Version,
				Lease:          ev.Kv.Lease,
				Cursor:         c.last,
			}
			if ev.Type == mvccpb.DELETE {
				out.Type = Delete
			}
			return out, nil
		}
		c.events, c.next = nil, 0

		var (
			resp clientv3.WatchResponse
			ok   bool
		)
		select {
		case resp, ok = <-c.ch:
		case <-ctx.Done():
			return Event{}, ctx.Err()
		}
		if !ok {
			if err := ctx.Err(); err != nil {
				return Event{}, err
			}
			if err := c.src.clientErr(); err != nil {
				return Event{}, err
			}
			return Event{}, fmt.Errorf("etcd: watch of %q: %w", c.src.prefix, errWatchClosed)
		}
		if err := resp.Err(); err != nil {
			return Event{}, c.fail(resp, err)
		}
		if resp.IsProgressNotify() {
			// Everything up to the header's revision was delivered. A member
			// behind the revision this watch started at could report less:
			// never move the cursor back.
			p := Cursor{Revision: resp.Header.GetRevision()}
			if Compare(p, c.last) <= 0 {
				continue
			}
			c.last = p
			return Event{Type: Progress, Cursor: p}, nil
		}
		c.events = resp.Events
	}
}

// fail describes the error that ended the watch.
func (c *conn) fail(resp clientv3.WatchResponse, err error) error {
	if errors.Is(err, rpctypes.ErrCompacted) {
		return errclass.CursorExpired(fmt.Errorf("etcd: watch of %q from revision %d: %w (history before revision %d is gone)",
			c.src.prefix, c.from, err, resp.CompactRevision))
	}
	return fmt.Errorf("etcd: watch of %q from revision %d: %w", c.src.prefix, c.from, err)
}

// Close ends the watch. It may be called more than once, and concurrently
// with Recv.
func (c *conn) Close() error {
	c.cancel()
	return nil
}

// errWatchClosed is the failure of a watch whose channel closed without an
// error: the client's watcher gave up on its stream. It is retried.
var errWatchClosed = errors.New("the watch channel closed without an error")
