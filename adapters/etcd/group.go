package etcd

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unicode"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"

	"github.com/resumable-go/resumable/backoff"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/errclass"
)

// Defaults of a [Group].
const (
	// DefaultTTL is the lease TTL of a Group member: how long its streams
	// wait for a successor after it died without handing them off.
	DefaultTTL = 10 * time.Second
	// DefaultKeyPrefix is where a Group keeps its keys in etcd.
	DefaultKeyPrefix = "/resumable/"
)

// Group runs named streams across processes, each stream in at most one
// process at a time. Every process makes a Group with its own member name
// and calls [Group.Run] with the streams it offers to run; the members
// agree through etcd on who runs what, and each runs its share.
//
// Under its key prefix (default "/resumable/") a Group keeps:
//
//	members/MEMBER      the streams MEMBER offers; attached to its lease
//	owners/STREAM/LEASE STREAM's election (concurrency.Election): the oldest key owns
//	cursors/STREAM      STREAM's cursor, for the stores of NewOwnerStore
//
// Which member runs a stream is decided by rendezvous hashing over the
// members that offer it, so streams spread evenly and a member joining or
// leaving moves only its share. Ownership itself is an etcd election held
// under the member's lease: the picked member campaigns, and owns the
// stream once elected.
//
// A Group is safe for concurrent use, but runs one [Group.Run] at a time.
type Group struct {
	client  *clientv3.Client
	member  string
	ttl     time.Duration
	prefix  string
	log     *zap.Logger
	policy  backoff.Policy
	running atomic.Bool
}

// GroupOption configures [NewGroup].
type GroupOption interface {
	applyGroup(*groupConfig)
}

type groupConfig struct {
	ttl    time.Duration
	prefix string
	log    *zap.Logger
	policy backoff.Policy
	errs   []error
}

type groupOptionFunc func(*groupConfig)

func (f groupOptionFunc) applyGroup(c *groupConfig) { f(c) }

// WithTTL sets the TTL of the member's lease, rounded up to whole seconds
// (etcd raises a TTL below its minimum, about 2 s with default election
// settings). It bounds how long a stream whose owner died waits for a
// successor, and how long a paused owner may still handle events before it
// must stop. Default [DefaultTTL]. Below one second NewGroup fails.
func WithTTL(d time.Duration) GroupOption {
	return groupOptionFunc(func(c *groupConfig) {
		if d < time.Second {
			c.errs = append(c.errs, fmt.Errorf("%w: WithTTL(%v): the TTL must be at least 1s", ErrInvalid, d))
			return
		}
		c.ttl = d
	})
}

// WithKeyPrefix sets the prefix of the Group's keys (default
// [DefaultKeyPrefix]). Every member of a group must use the same one. An
// empty prefix makes NewGroup fail.
func WithKeyPrefix(p string) GroupOption {
	return groupOptionFunc(func(c *groupConfig) {
		if p == "" {
			c.errs = append(c.errs, fmt.Errorf("%w: WithKeyPrefix(\"\"): the prefix must not be empty", ErrInvalid))
			return
		}
		c.prefix = p
	})
}

// WithLogger sets the logger: ownership changes at Info, failures at Warn.
// Nil means zap.NewNop(), which is also the default.
func WithLogger(l *zap.Logger) GroupOption {
	return groupOptionFunc(func(c *groupConfig) { c.log = l })
}

// WithGroupBackoff sets the delays between attempts after a failure: a
// lease that could not be granted or was lost, a campaign that failed, a
// stream's run that returned. Nil means the default: exponential from
// 200 ms to 5 s, never giving up.
func WithGroupBackoff(p backoff.Policy) GroupOption {
	return groupOptionFunc(func(c *groupConfig) { c.policy = p })
}

// NewGroup returns a Group whose member is named member, coordinating
// through client. The name must be unique among the live members of the
// group; use a stable one (a pod name, a host name) for readable keys. It
// returns an error matching [ErrInvalid] for a nil client, a bad name (see
// [Group.Run] for the rules) or a bad option.
func NewGroup(client *clientv3.Client, member string, opts ...GroupOption) (*Group, error) {
	cfg := groupConfig{ttl: DefaultTTL, prefix: DefaultKeyPrefix}
	for _, o := range opts {
		if o != nil {
			o.applyGroup(&cfg)
		}
	}
	if client == nil {
		cfg.errs = append(cfg.errs, fmt.Errorf("%w: NewGroup: the client is nil", ErrInvalid))
	}
	if err := validName("member", member); err != nil {
		cfg.errs = append(cfg.errs, err)
	}
	if cfg.policy == nil {
		cfg.policy = backoff.Exponential(backoff.WithInitialInterval(200*time.Millisecond), backoff.WithMaxInterval(5*time.Second))
	}
	if v, ok := cfg.policy.(interface{ Validate() error }); ok {
		if err := v.Validate(); err != nil {
			cfg.errs = append(cfg.errs, fmt.Errorf("%w: WithGroupBackoff: %w", ErrInvalid, err))
		}
	}
	if len(cfg.errs) > 0 {
		return nil, errors.Join(cfg.errs...)
	}
	if cfg.log == nil {
		cfg.log = zap.NewNop()
	}
	return &Group{client: client, member: member, ttl: cfg.ttl, prefix: cfg.prefix, log: cfg.log.With(zap.String("member", member)), policy: cfg.policy}, nil
}

// validName checks a member or stream name: it becomes part of a key and of
// a line in the member's key, so it must be non-empty, printable, without
// white space and without "/".
func validName(what, name string) error {
	if name == "" {
		return fmt.Errorf("%w: the %s name is empty", ErrInvalid, what)
	}
	for _, r := range name {
		if r == '/' || unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return fmt.Errorf("%w: %s name %q: %q is not allowed; use printable characters other than white space and '/'", ErrInvalid, what, name, r)
		}
	}
	return nil
}

// RunFunc runs one stream while its [Owner] owns it. It must return once
// ctx ends — when the stream moves to another member, when the member's
// lease is lost, when [Group.Run]'s context ends — after saving its cursor:
// a [stream.Resumer] does both when its Run is given ctx. Its Store should
// be fenced by the owner ([NewOwnerStore]) and its handler guarded
// ([Guard]).
type RunFunc func(ctx context.Context, o *Owner) error

// Run joins the group, offers the streams named, and runs each stream the
// group gives this member by calling run in a goroutine of its own, until
// ctx ends. Then it stops every run, waits for them to return (their final
// saves), and revokes the member's lease, which hands every stream to its
// successor at once; it returns an error matching ctx's.
//
// While it runs:
//   - A stream that must move (another member joined and is picked for it)
//     has its run's context cancelled; once run returned, this member
//     resigns and the other one starts at once.
//   - A run that returns on its own (an error, or nil) is logged and started
//     again after a backoff step, for as long as this member owns the
//     stream. An error matching [ErrNotOwner] means the stream was lost.
//   - When the lease is lost (the process was paused or cut off for longer
//     than the TTL), every run's context is cancelled and, once they all
//     returned, the member joins again with a new lease.
//
// Stream names are unique, non-empty, printable, without white space and
// without "/". Run returns an error matching [ErrInvalid] for bad names or
// a nil run, and one matching [ErrAlreadyRunning] if another Run of this
// Group is in progress. No goroutine it starts outlives it.
func (g *Group) Run(ctx context.Context, streams []string, run RunFunc) error {
	if run == nil {
		return fmt.Errorf("%w: Group.Run: run is nil", ErrInvalid)
	}
	seen := make(map[string]bool, len(streams))
	for _, s := range streams {
		if err := validName("stream", s); err != nil {
			return err
		}
		if seen[s] {
			return fmt.Errorf("%w: stream %q is named twice", ErrInvalid, s)
		}
		seen[s] = true
	}
	if !g.running.CompareAndSwap(false, true) {
		return ErrAlreadyRunning
	}
	defer g.running.Store(false)
	streams = append([]string(nil), streams...)

	seq := g.policy.NewSequence()
	for {
		lost, err := g.session(ctx, streams, run)
		if ctx.Err() != nil {
			return errors.Join(ctx.Err(), err)
		}
		if lost {
			seq.Reset() // a lease that lived is progress
		}
		delay, ok := seq.Next()
		if !ok {
			return fmt.Errorf("etcd: member %q: the backoff policy gave up: %w", g.member, err)
		}
		g.log.Warn("membership ended; joining again", zap.Duration("delay", delay), zap.Error(err))
		if !sleep(ctx, delay) {
			return ctx.Err()
		}
	}
}

// ErrAlreadyRunning is returned by [Group.Run] when another Run of the same
// Group is in progress.
var ErrAlreadyRunning = errors.New("etcd: Group.Run is already in progress")

// session is one membership: a lease, the member key, the view of the
// others, and one goroutine per stream. It returns when ctx ends or the
// lease is lost (lost true), after every run returned and the lease was
// revoked.
func (g *Group) session(ctx context.Context, streams []string, run RunFunc) (lost bool, err error) {
	s, err := newSession(ctx, g.client, g.ttl, g.log)
	if err != nil {
		return false, err
	}
	defer func() {
		if cerr := s.close(); cerr != nil {
			err = errors.Join(err, cerr)
		}
	}()
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()

	if _, err := g.client.Put(sctx, g.prefix+"members/"+g.member, encodeOffer(streams), clientv3.WithLease(s.id())); err != nil {
		return false, fmt.Errorf("etcd: registering member %q: %w", g.member, err)
	}
	view := newMembers(g.client, g.prefix+"members/", g.member, streams)
	rev, err := view.load(sctx)
	if err != nil {
		return false, err
	}
	g.log.Info("joined", zap.String("lease", fmt.Sprintf("%x", s.id())), zap.Duration("ttl", s.ttl))

	var wg sync.WaitGroup
	wg.Go(func() {
		select {
		case <-s.lost:
			g.log.Warn("lease lost; stopping every stream", zap.Error(s.cause))
			cancel()
		case <-sctx.Done():
		}
	})
	wg.Go(func() { g.followMembers(sctx, view, rev) })
	for _, name := range streams {
		wg.Go(func() { g.stream(sctx, s, view, name, run) })
	}
	wg.Wait()
	select {
	case <-s.lost:
		return true, fmt.Errorf("etcd: member %q: %w", g.member, s.cause)
	default:
		return false, nil
	}
}

// followMembers keeps view up to date until ctx ends.
func (g *Group) followMembers(ctx context.Context, view *members, rev int64) {
	seq := g.policy.NewSequence()
	for {
		err := view.follow(ctx, rev)
		if ctx.Err() != nil {
			return
		}
		g.log.Debug("members watch ended", zap.Error(err))
		delay, _ := seq.Next()
		if !sleep(ctx, delay) {
			return
		}
		if rev, err = view.load(ctx); err == nil {
			seq.Reset()
		}
	}
}

// stream runs one stream while this member is picked for it and owns it,
// until ctx ends.
//
// The campaign is not cancelled when the stream moves to another member:
// etcd's Campaign, cancelled at the wrong moment, can leave the candidate
// key behind, which on a live lease would stand before every other
// candidate for good. A member that wins a stream it is no longer picked
// for hands it on at once.
func (g *Group) stream(ctx context.Context, s *session, view *members, name string, run RunFunc) {
	log := g.log.With(zap.String("stream", name))
	election := concurrency.NewElection(s.cs, g.prefix+"owners/"+name)
	seq := g.policy.NewSequence()
	for view.await(ctx, name, true) {
		failed := election.Campaign(ctx, g.member)
		switch {
		case failed == nil:
			if picked, _ := view.picked(name); picked {
				o := &Owner{stream: name, key: election.Key(), rev: election.Rev(), s: s, g: g}
				log.Info("owner", zap.Int64("election_revision", o.rev))
				failed = g.own(ctx, o, view, run)
			}
			g.resign(ctx, s, election, name)
		case ctx.Err() == nil:
			log.Warn("campaign failed", zap.Error(failed))
			g.withdraw(ctx, s, name) // its Txn may have been applied
		}
		if ctx.Err() != nil {
			return
		}
		if failed == nil {
			seq.Reset()
			continue
		}
		delay, ok := seq.Next()
		if !ok {
			delay = g.ttl
		}
		if !sleep(ctx, delay) {
			return
		}
	}
}

// own runs the stream of o until it moves to another member or ctx ends
// (nil), or until run returns on its own (its error, or errRunReturned).
func (g *Group) own(ctx context.Context, o *Owner, view *members, run RunFunc) error {
	tctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() {
		if view.await(tctx, o.stream, false) {
			g.log.Info("stream moves to another member", zap.String("stream", o.stream))
		}
		cancel()
	})
	err := run(tctx, o)
	o.ended.Store(true)
	if tctx.Err() != nil {
		return nil
	}
	g.log.Warn("stream run returned; starting it again", zap.String("stream", o.stream), zap.Error(err))
	if err == nil {
		err = errRunReturned
	}
	return err
}

// resign hands the stream of election on: at once, rather than when the
// lease ends (the final save happened inside run). When the session is
// ending its lease is revoked, and the key goes with it.
func (g *Group) resign(ctx context.Context, s *session, election *concurrency.Election, name string) {
	if ctx.Err() != nil {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.ttl)
	defer cancel()
	if err := election.Resign(rctx); err != nil {
		g.log.Warn("resign failed", zap.String("stream", name), zap.Error(err))
		g.withdraw(ctx, s, name) // the key must go, or it blocks the successor
	}
}

// withdraw deletes this member's candidate key for stream name, retrying
// until it is gone or ctx ends (then the session's end revokes the lease,
// and the key with it).
func (g *Group) withdraw(ctx context.Context, s *session, name string) {
	key := fmt.Sprintf("%sowners/%s/%x", g.prefix, name, s.id())
	seq := g.policy.NewSequence()
	for ctx.Err() == nil {
		dctx, cancel := context.WithTimeout(ctx, s.ttl)
		_, err := g.client.Delete(dctx, key)
		cancel()
		if err == nil {
			return
		}
		g.log.Warn("withdrawing the candidate key failed", zap.String("stream", name), zap.Error(err))
		delay, ok := seq.Next()
		if !ok {
			delay = s.ttl
		}
		if !sleep(ctx, delay) {
			return
		}
	}
}

// errRunReturned stands for a run that returned nil while it still owned
// its stream: started again like a failed one.
var errRunReturned = errors.New("etcd: the stream's run returned while it owned the stream")

// sleep waits d or until ctx ends; it reports false when ctx ended.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// Owner is a member's ownership of one stream, handed to a [RunFunc]. Its
// methods are safe for concurrent use.
type Owner struct {
	stream string
	key    string // the election key
	rev    int64  // its create revision
	s      *session
	g      *Group
	ended  atomic.Bool // the run returned: this ownership is over
}

// Stream returns the stream's name.
func (o *Owner) Stream() string { return o.stream }

// CursorKey returns the key that [NewOwnerStore] keeps the stream's cursor
// at: the group's prefix, "cursors/", and the stream's name.
func (o *Owner) CursorKey() string { return o.g.prefix + "cursors/" + o.stream }

// Fence returns the condition that this ownership still holds: the election
// key this member won still exists, with the create revision it won at.
// The key is attached to the member's lease, so the condition fails as soon
// as the lease expired or the member resigned. Put it in every transaction
// that writes on the stream's behalf ([WithFence]).
func (o *Owner) Fence() clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(o.key), "=", o.rev)
}

// Check returns nil when the member's lease cannot have expired yet by the
// process's own clock, which is at once in the usual case. Otherwise (the
// process was paused, or etcd did not answer for a while) it asks etcd and
// waits: nil once the lease is confirmed, an error matching [ErrNotOwner]
// (marked [errclass.Permanent]) once it is known to be gone or once the
// run this Owner was given has returned, or ctx's error. It allocates
// nothing when it returns nil at once.
func (o *Owner) Check(ctx context.Context) error {
	if o.ended.Load() {
		return errclass.Permanent(fmt.Errorf("%w: stream %q: its run returned", ErrNotOwner, o.stream))
	}
	if o.s.valid() {
		return nil
	}
	if err := o.s.check(ctx); err != nil {
		if errors.Is(err, errLost) {
			return errclass.Permanent(fmt.Errorf("%w: stream %q: %w", ErrNotOwner, o.stream, o.s.cause))
		}
		return err
	}
	return nil
}

// Guard returns handle preceded by [Owner.Check]: an event is handed to
// handle only while the member's lease cannot have expired, so a member
// that was paused past its lease handles nothing more once it resumes
// (except the one event per stream whose check had passed before the
// pause). Use it as the handler of the stream's Resumer. The check
// allocates nothing.
func Guard[T any](o *Owner, handle func(ctx context.Context, event T) error) func(ctx context.Context, event T) error {
	return func(ctx context.Context, event T) error {
		if err := o.Check(ctx); err != nil {
			return err
		}
		return handle(ctx, event)
	}
}

// NewOwnerStore returns the [Store] of the stream o owns: its cursor at
// [Owner.CursorKey], every Save fenced by [Owner.Fence], so that once the
// stream has a new owner no Save of this one lands.
func NewOwnerStore[C any](o *Owner, codec cursor.Codec[C], initial C) (*Store[C], error) {
	return NewStore(o.g.client, o.CursorKey(), codec, initial, WithFence(o.Fence()))
}
