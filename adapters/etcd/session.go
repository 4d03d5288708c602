package etcd

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
)

// session is one member's lease: an etcd concurrency.Session, which the
// client keeps alive, and a conservative local deadline before which the
// lease cannot have expired in etcd.
//
// The deadline is the instant just before a TimeToLive request plus the TTL
// it reported: etcd measured that TTL after the request left, so its own
// expiry can only come later (given clocks that advance at the same rate,
// which they do on one machine and to a few parts per million between
// machines). A process that was paused past its deadline finds it passed
// when it resumes, before it does anything else.
type session struct {
	client *clientv3.Client
	cs     *concurrency.Session
	ttl    time.Duration
	log    *zap.Logger

	start    time.Time    // the monotonic origin of deadline
	deadline atomic.Int64 // nanoseconds after start

	lost     chan struct{} // closed once the lease is gone, or no longer kept alive
	lostOnce sync.Once
	cause    error // why the lease is lost; set before lost is closed

	kick chan struct{} // asks the tracker for a TimeToLive now

	mu        sync.Mutex
	refreshed chan struct{} // closed and replaced after each TimeToLive

	stop context.CancelFunc // ends the tracker
	done chan struct{}      // closed when the tracker has ended
}

// newSession grants a lease of ttl (etcd may raise it to its minimum),
// starts keeping it alive, and starts the tracker of its deadline.
func newSession(ctx context.Context, client *clientv3.Client, ttl time.Duration, log *zap.Logger) (*session, error) {
	start := time.Now()
	secs := int64((ttl + time.Second - 1) / time.Second)
	grant, err := client.Grant(ctx, secs)
	if err != nil {
		return nil, fmt.Errorf("etcd: granting a lease of %ds: %w", secs, err)
	}
	// The session outlives ctx: its Close must still revoke the lease after
	// ctx ended (a graceful stop), so that successors start at once.
	cs, err := concurrency.NewSession(client,
		concurrency.WithLease(grant.ID),
		concurrency.WithTTL(int(grant.TTL)),
		concurrency.WithContext(context.WithoutCancel(ctx)))
	if err != nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Duration(grant.TTL)*time.Second)
		_, _ = client.Revoke(rctx, grant.ID)
		cancel()
		return nil, fmt.Errorf("etcd: keeping lease %x alive: %w", grant.ID, err)
	}
	tctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	s := &session{
		client:    client,
		cs:        cs,
		ttl:       time.Duration(grant.TTL) * time.Second,
		log:       log,
		start:     start,
		lost:      make(chan struct{}),
		kick:      make(chan struct{}, 1),
		refreshed: make(chan struct{}),
		stop:      stop,
		done:      make(chan struct{}),
	}
	s.deadline.Store(int64(s.ttl))
	go s.track(tctx)
	return s, nil
}

// id returns the lease ID.
func (s *session) id() clientv3.LeaseID { return s.cs.Lease() }

// valid reports whether the lease is not known lost and cannot have
// expired yet. It allocates nothing.
func (s *session) valid() bool {
	select {
	case <-s.lost:
		return false
	default:
	}
	return int64(time.Since(s.start)) < s.deadline.Load()
}

// check returns nil once the lease is known valid (at once in the usual
// case), errLost once it is known gone, or ctx's error.
func (s *session) check(ctx context.Context) error {
	for !s.valid() {
		select {
		case <-s.lost:
			return errLost
		default:
		}
		s.mu.Lock()
		refreshed := s.refreshed
		s.mu.Unlock()
		select {
		case s.kick <- struct{}{}:
		default:
		}
		select {
		case <-s.lost:
			return errLost
		case <-refreshed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// track refreshes the deadline every quarter TTL, and at once when check
// asks, until the lease is lost or stop is called.
func (s *session) track(ctx context.Context) {
	defer close(s.done)
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.cs.Done():
			s.markLost(errors.New("the client stopped keeping the lease alive"))
			return
		case <-timer.C:
		case <-s.kick:
		}
		if s.refresh(ctx) {
			return
		}
		timer.Reset(s.ttl / 4)
	}
}

// refresh asks etcd for the lease's remaining TTL and moves the deadline.
// It reports true when the lease is gone.
func (s *session) refresh(ctx context.Context) (gone bool) {
	before := time.Since(s.start)
	rctx, cancel := context.WithTimeout(ctx, s.ttl/2)
	resp, err := s.client.TimeToLive(rctx, s.id())
	cancel()
	switch {
	case err == nil && resp.TTL > 0:
		if d := int64(before + time.Duration(resp.TTL)*time.Second); d > s.deadline.Load() {
			s.deadline.Store(d)
		}
	case err == nil, errors.Is(err, rpctypes.ErrLeaseNotFound):
		s.markLost(fmt.Errorf("lease %x expired", s.id()))
		return true
	default:
		if ctx.Err() == nil {
			s.log.Debug("lease check failed", zap.Error(err))
		}
		return false
	}
	s.mu.Lock()
	close(s.refreshed)
	s.refreshed = make(chan struct{})
	s.mu.Unlock()
	return false
}

func (s *session) markLost(why error) {
	s.lostOnce.Do(func() {
		s.cause = why
		close(s.lost)
		s.mu.Lock()
		close(s.refreshed) // wake checkers; they find lost closed
		s.refreshed = make(chan struct{})
		s.mu.Unlock()
	})
}

// errLost is what check returns once the lease is lost; the caller says
// which stream, with the session's cause.
var errLost = errors.New("lease lost")

// close stops the tracker and revokes the lease, which deletes every key
// attached to it (the member key, the election keys): successors start at
// once. A lease already gone is not an error.
func (s *session) close() error {
	s.stop()
	<-s.done
	err := s.cs.Close()
	s.markLost(errors.New("the member left the group"))
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		err = nil
	}
	if err != nil {
		return fmt.Errorf("etcd: revoking lease %x: %w", s.id(), err)
	}
	return nil
}
