package etcd

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/resumable-go/resumable/errclass"
)

// errLost is why an ownership ends when the member's lease is gone.
var errLost = errors.New("the member's lease expired, was revoked or is no longer kept alive")

// session is one member's lease, kept alive by the client, and a local
// deadline before which the lease cannot have expired in etcd.
//
// The deadline moves with the keep-alive replies: a reply moves it to the
// arrival of the reply before it plus the TTL, since the client sends a
// lease's next keep-alive a third of the TTL after a reply arrived. Once the
// deadline has passed (the process was paused, or etcd did not answer),
// replies no longer move it: only check does, with a TimeToLive sent after
// it passed, so a process resumed after a long pause never trusts a reply
// that was waiting for it.
type session struct {
	client   *clientv3.Client
	id       clientv3.LeaseID
	ttl      time.Duration
	start    time.Time          // the monotonic origin of deadline
	deadline atomic.Int64       // nanoseconds after start
	done     chan struct{}      // closed once the lease is no longer kept alive
	confirm  chan struct{}      // a token: one TimeToLive at a time
	stop     context.CancelFunc // ends the keep-alive
}

// newSession grants a lease of ttl (etcd may raise it to its minimum) and
// keeps it alive until close, or until check finds it gone.
func newSession(ctx context.Context, client *clientv3.Client, ttl time.Duration) (*session, error) {
	start := time.Now()
	grant, err := client.Grant(ctx, int64((ttl+time.Second-1)/time.Second))
	if err != nil {
		return nil, fmt.Errorf("etcd: granting a lease: %w", err)
	}
	kctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	replies, err := client.KeepAlive(kctx, grant.ID)
	if err != nil {
		stop()
		return nil, fmt.Errorf("etcd: keeping lease %x alive: %w", grant.ID, err)
	}
	s := &session{client: client, id: grant.ID, ttl: time.Duration(grant.TTL) * time.Second, start: start,
		done: make(chan struct{}), confirm: make(chan struct{}, 1), stop: stop}
	s.deadline.Store(int64(s.ttl))
	go s.follow(replies)
	return s, nil
}

// follow moves the deadline at each keep-alive reply while it has not
// passed, and closes done when the replies end.
func (s *session) follow(replies <-chan *clientv3.LeaseKeepAliveResponse) {
	defer close(s.done)
	prev := time.Duration(0) // the Grant was sent after start
	for resp := range replies {
		now := time.Since(s.start)
		if d := int64(prev) + resp.TTL*int64(time.Second); int64(now) < s.deadline.Load() && d > s.deadline.Load() {
			s.deadline.Store(d)
		}
		prev = now
	}
}

// check returns nil once the lease is known valid (at once in the usual
// case, without allocating), an error matching ErrNotOwner (marked
// Permanent) once it is known gone, or ctx's error.
func (s *session) check(ctx context.Context, stream string) error {
	for {
		select {
		case <-s.done:
			return errclass.Permanent(notOwner(stream, errLost))
		default:
		}
		if int64(time.Since(s.start)) < s.deadline.Load() {
			return nil
		}
		if err := s.ask(ctx); err != nil {
			return err
		}
	}
}

// ask sends a TimeToLive and moves the deadline by its answer, or stops the
// keep-alive if the lease is gone; after a failure it waits a little, so
// that check asks again. It returns only ctx's error.
func (s *session) ask(ctx context.Context) error {
	select {
	case s.confirm <- struct{}{}:
		defer func() { <-s.confirm }()
	case <-ctx.Done():
		return ctx.Err()
	}
	before := time.Since(s.start)
	if int64(before) < s.deadline.Load() {
		return nil // another check confirmed it meanwhile
	}
	actx, cancel := context.WithTimeout(ctx, s.ttl/2)
	defer cancel()
	resp, err := s.client.TimeToLive(actx, s.id)
	switch {
	case err == nil && resp.TTL > 0:
		s.deadline.Store(int64(before) + resp.TTL*int64(time.Second))
	case err == nil, errors.Is(err, rpctypes.ErrLeaseNotFound):
		s.stop()
		<-s.done
	case !sleep(ctx, s.ttl/8):
		return ctx.Err()
	}
	return nil
}

// close ends the keep-alive and revokes the lease, which deletes every key
// attached to it: successors start at once. A lease already gone is not an
// error.
func (s *session) close() error {
	s.stop()
	<-s.done
	ctx, cancel := context.WithTimeout(context.Background(), s.ttl)
	defer cancel()
	if _, err := s.client.Revoke(ctx, s.id); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return fmt.Errorf("etcd: revoking lease %x: %w", s.id, err)
	}
	return nil
}
