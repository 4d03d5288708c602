package etcd

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// session is one member's lease, a concurrency.Session that the client keeps
// alive, and a local deadline before which the lease cannot have expired in
// etcd.
//
// The deadline moves with the keep-alive replies (read from a second
// channel of the client's keep-alive of the lease, which sends nothing
// more): a reply moves it to the arrival of the reply before it plus the TTL,
// since the client sends a lease's next keep-alive a third of the TTL after
// a reply arrived. Once the deadline has passed (the process was paused, or
// etcd did not answer), replies no longer move it: only check does, with a
// TimeToLive sent after it passed, so a process resumed after a long pause
// never trusts a reply that was waiting for it.
type session struct {
	client *clientv3.Client
	cs     *concurrency.Session
	ttl    time.Duration

	start    time.Time     // the monotonic origin of deadline
	deadline atomic.Int64  // nanoseconds after start
	gone     chan struct{} // closed when check found the lease gone
	goneOnce atomic.Bool   // set before gone is closed
	confirm  chan struct{} // a token: one TimeToLive at a time

	stop    context.CancelFunc // ends the reading of the replies
	stopped chan struct{}
}

// newSession grants a lease of ttl (etcd may raise it to its minimum) and
// keeps it alive.
func newSession(ctx context.Context, client *clientv3.Client, ttl time.Duration) (*session, error) {
	start := time.Now()
	grant, err := client.Grant(ctx, int64((ttl+time.Second-1)/time.Second))
	if err != nil {
		return nil, fmt.Errorf("etcd: granting a lease: %w", err)
	}
	// The session outlives ctx: its Close revokes the lease after a
	// graceful stop, so that successors start at once.
	cs, err := concurrency.NewSession(client, concurrency.WithLease(grant.ID),
		concurrency.WithTTL(int(grant.TTL)), concurrency.WithContext(context.WithoutCancel(ctx)))
	var replies <-chan *clientv3.LeaseKeepAliveResponse
	rctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	if err == nil {
		replies, err = client.KeepAlive(rctx, grant.ID)
	}
	if err != nil {
		stop()
		if cs != nil {
			cs.Close()
		}
		return nil, fmt.Errorf("etcd: keeping lease %x alive: %w", grant.ID, err)
	}
	s := &session{client: client, cs: cs, ttl: time.Duration(grant.TTL) * time.Second, start: start,
		gone: make(chan struct{}), confirm: make(chan struct{}, 1), stop: stop, stopped: make(chan struct{})}
	s.deadline.Store(int64(s.ttl))
	go s.follow(replies)
	return s, nil
}

// follow moves the deadline at each keep-alive reply while it has not passed.
func (s *session) follow(replies <-chan *clientv3.LeaseKeepAliveResponse) {
	defer close(s.stopped)
	prev := time.Duration(0) // the Grant was sent after start
	for resp := range replies {
		now := time.Since(s.start)
		if d := int64(prev) + resp.TTL*int64(time.Second); int64(now) < s.deadline.Load() && d > s.deadline.Load() {
			s.deadline.Store(d)
		}
		prev = now
	}
}

func (s *session) id() clientv3.LeaseID { return s.cs.Lease() }

// lost reports whether the lease is known gone or no longer kept alive.
func (s *session) lost() bool {
	if s.goneOnce.Load() {
		return true
	}
	select {
	case <-s.cs.Done():
		return true
	default:
		return false
	}
}

// check returns nil once the lease is known valid (at once in the usual
// case, without allocating), errLost once it is known gone, or ctx's error.
func (s *session) check(ctx context.Context) error {
	for !s.lost() {
		if int64(time.Since(s.start)) < s.deadline.Load() {
			return nil
		}
		select {
		case s.confirm <- struct{}{}:
		case <-s.cs.Done():
			return errLost
		case <-ctx.Done():
			return ctx.Err()
		}
		err := s.ask(ctx)
		<-s.confirm
		if err != nil {
			return err
		}
	}
	return errLost
}

// ask sends a TimeToLive and moves the deadline by its answer; on a failure
// it waits a little, so that check asks again. It returns only ctx's error.
func (s *session) ask(ctx context.Context) error {
	if int64(time.Since(s.start)) < s.deadline.Load() {
		return nil // another check confirmed it meanwhile
	}
	before := time.Since(s.start)
	actx, cancel := context.WithTimeout(ctx, s.ttl/2)
	resp, err := s.client.TimeToLive(actx, s.id())
	cancel()
	switch {
	case err == nil && resp.TTL > 0:
		s.deadline.Store(int64(before) + resp.TTL*int64(time.Second))
	case err == nil, errors.Is(err, rpctypes.ErrLeaseNotFound):
		if s.goneOnce.CompareAndSwap(false, true) {
			close(s.gone)
		}
	case !sleep(ctx, s.ttl/8):
		return ctx.Err()
	}
	return nil
}

// errLost is what check returns once the lease is gone.
var errLost = errors.New("the member's lease expired, was revoked or is no longer kept alive")

// close stops following the replies and revokes the lease, which deletes
// every key attached to it: successors start at once. A lease already gone
// is not an error.
func (s *session) close() error {
	s.stop()
	<-s.stopped
	if err := s.cs.Close(); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return fmt.Errorf("etcd: revoking lease %x: %w", s.id(), err)
	}
	return nil
}
