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

// session is one member's lease, renewed every third of its TTL, and a
// local deadline before which the lease cannot have expired in etcd: the
// time a renewal was sent plus the TTL granted (etcd counts the TTL from
// when it received the request, later). Once the deadline has passed (the
// process was paused, or etcd did not answer for two thirds of the TTL)
// the lease counts as lost: the deadline never moves again, so a process
// resumed after a long pause never trusts a reply that was waiting for it.
type session struct {
	client   *clientv3.Client
	id       clientv3.LeaseID
	ttl      time.Duration
	start    time.Time          // the monotonic origin of deadline
	deadline atomic.Int64       // nanoseconds after start; 0 once the session ended
	done     chan struct{}      // closed once the lease is no longer renewed
	stop     context.CancelFunc // ends the renewals
}

// newSession grants a lease of ttl (etcd may raise it to its minimum) and
// renews it until close, or until a renewal fails; then it calls ended.
func newSession(ctx context.Context, client *clientv3.Client, ttl time.Duration, ended func()) (*session, error) {
	start := time.Now()
	grant, err := client.Grant(ctx, int64((ttl+time.Second-1)/time.Second))
	if err != nil {
		return nil, fmt.Errorf("etcd: granting a lease: %w", err)
	}
	kctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	s := &session{client: client, id: grant.ID, ttl: time.Duration(grant.TTL) * time.Second, start: start, done: make(chan struct{}), stop: stop}
	s.deadline.Store(int64(s.ttl))
	go func() { defer ended(); s.renew(kctx) }()
	return s, nil
}

// renew renews the lease every third of its TTL and moves the deadline,
// until ctx ends, the lease is gone, or the deadline passed before a
// renewal was answered; then it ends the session.
func (s *session) renew(ctx context.Context) {
	defer close(s.done)
	defer s.deadline.Store(0)
	for sleep(ctx, s.ttl/3) {
		sent, deadline := time.Since(s.start), time.Duration(s.deadline.Load())
		rctx, cancel := context.WithDeadline(ctx, s.start.Add(deadline))
		resp, err := s.client.KeepAliveOnce(rctx, s.id)
		cancel()
		if err != nil || time.Since(s.start) >= deadline {
			return
		}
		s.deadline.Store(int64(sent) + resp.TTL*int64(time.Second))
	}
}

// check returns nil while the lease cannot have expired, and an error
// matching ErrNotOwner (marked Permanent) once it may have. It allocates
// nothing while the lease is valid.
func (s *session) check(stream string) error {
	if int64(time.Since(s.start)) < s.deadline.Load() {
		return nil
	}
	return errclass.Permanent(notOwner(stream, errLost))
}

// close ends the renewals and revokes the lease, which deletes every key
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
