package etcd

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
	"unicode"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/resumable-go/resumable/backoff"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/errclass"
)

// The defaults of [WithTTL] and [WithKeyPrefix].
const (
	defaultTTL       = 10 * time.Second
	defaultKeyPrefix = "/resumable/"
)

// Group runs named streams across processes, each stream in at most one
// process at a time. Every process makes a Group with its own member name
// and calls [Group.Run] with the streams it offers to run; the members
// agree through etcd on who runs what, and each runs its share.
//
// Under its key prefix (default "/resumable/") a Group keeps:
//
//	members/MEMBER  the streams MEMBER offers; attached to its lease
//	owners/STREAM   STREAM's owner, attached to the owner's lease
//	cursors/STREAM  STREAM's cursor, for the stores of NewOwnerStore
//
// A member takes a free stream with a transaction that creates its owner
// key only if it does not exist; the key's create revision fences the
// owner's writes. Which member takes a free stream is decided by rendezvous
// hashing over the members that offer it, so streams spread evenly and a
// member joining or leaving moves only its share. See docs/etcd.md.
//
// A Group is safe for concurrent use, but runs one [Group.Run] at a time.
type Group struct {
	groupConfig
	client  *clientv3.Client
	member  string
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
	hooks  []func(OwnerEvent)
	errs   []error
}

type groupOptionFunc func(*groupConfig)

func (f groupOptionFunc) applyGroup(c *groupConfig) { f(c) }

// WithTTL sets the TTL of the member's lease, rounded up to whole seconds
// (etcd raises a TTL below its minimum, about 2 s with default election
// settings). It bounds how long a stream whose owner died waits for a
// successor, and how long a paused owner may still handle events before it
// must stop. Default 10 s. Below one second NewGroup fails.
func WithTTL(d time.Duration) GroupOption {
	return groupOptionFunc(func(c *groupConfig) {
		if d < time.Second {
			c.errs = append(c.errs, invalid("etcd: WithTTL(%v): the TTL must be at least 1s", d))
			return
		}
		c.ttl = d
	})
}

// WithKeyPrefix sets the prefix of the Group's keys (default
// "/resumable/"). Every member of a group must use the same one. An
// empty prefix makes NewGroup fail.
func WithKeyPrefix(p string) GroupOption {
	return groupOptionFunc(func(c *groupConfig) {
		if p == "" {
			c.errs = append(c.errs, invalid("etcd: WithKeyPrefix(\"\"): the prefix must not be empty"))
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
// lease that could not be granted or was lost, an etcd request that failed,
// a stream's run that returned. Nil means the default: exponential from
// 200 ms to 5 s, never giving up.
func WithGroupBackoff(p backoff.Policy) GroupOption {
	return groupOptionFunc(func(c *groupConfig) { c.policy = p })
}

// WithOwnerHook adds f to the functions called at each change of this
// member's ownership of a stream. They are called one at a time, from the
// Group's own goroutine and outside its locks, in the order of the changes:
// f must return quickly. Nil is ignored.
func WithOwnerHook(f func(OwnerEvent)) GroupOption {
	return groupOptionFunc(func(c *groupConfig) {
		if f != nil {
			c.hooks = append(c.hooks, f)
		}
	})
}

// OwnerEvent is a change of a member's ownership of a stream, given to the
// hooks of [WithOwnerHook]. An ownership starts (Owned) before its first
// run and ends after its last run returned; the runs started again after a
// failure belong to one ownership.
type OwnerEvent struct {
	Stream string // the stream's name
	Member string // the member's name
	Owned  bool   // true: the member owns the stream now; false: no longer
	// Err is nil for an ownership that starts, or that ends in a handoff
	// (the run returned after its final save and the member gave the stream
	// up). For an ownership lost (the lease expired or was revoked, the
	// owner key was deleted, a fenced Save was refused) it says why, and
	// matches [ErrNotOwner].
	Err error
}

// NewGroup returns a Group whose member is named member, coordinating
// through client. The name must be unique among the live members of the
// group; use a stable one (a pod name, a host name) for readable keys. It
// returns an error matching [stream.ErrInvalidOption] for a nil client, a
// bad name (see [Group.Run] for the rules) or a bad option.
func NewGroup(client *clientv3.Client, member string, opts ...GroupOption) (*Group, error) {
	cfg := groupConfig{ttl: defaultTTL, prefix: defaultKeyPrefix}
	for _, o := range opts {
		if o != nil {
			o.applyGroup(&cfg)
		}
	}
	if client == nil {
		cfg.errs = append(cfg.errs, invalid("etcd: NewGroup: the client is nil"))
	}
	if err := validName("member", member); err != nil {
		cfg.errs = append(cfg.errs, err)
	}
	if cfg.policy == nil {
		cfg.policy = backoff.Exponential(backoff.WithInitialInterval(200*time.Millisecond), backoff.WithMaxInterval(5*time.Second))
	}
	if v, ok := cfg.policy.(interface{ Validate() error }); ok {
		if err := v.Validate(); err != nil {
			cfg.errs = append(cfg.errs, invalid("etcd: WithGroupBackoff: %w", err))
		}
	}
	if len(cfg.errs) > 0 {
		return nil, errors.Join(cfg.errs...)
	}
	if cfg.log == nil {
		cfg.log = zap.NewNop()
	}
	cfg.log = cfg.log.With(zap.String("member", member))
	return &Group{groupConfig: cfg, client: client, member: member}, nil
}

// validName checks a member or stream name: it becomes part of a key and of
// a line in the member's key, so it must be non-empty, printable, without
// white space and without "/".
func validName(what, name string) error {
	if name == "" {
		return invalid("etcd: the %s name is empty", what)
	}
	for _, r := range name {
		if r == '/' || unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return invalid("etcd: %s name %q: %q is not allowed; use printable characters other than white space and '/'", what, name, r)
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
//     deletes its owner key and the other one starts at once.
//   - A run that returns on its own (an error, or nil) is logged and started
//     again after a backoff step, for as long as this member owns the
//     stream. An error matching [ErrNotOwner] means the stream was lost.
//   - When the lease is lost (the process was paused or cut off for longer
//     than the TTL), every run's context is cancelled and, once they all
//     returned, the member joins again with a new lease.
//
// Stream names are unique, non-empty, printable, without white space and
// without "/". Run returns an error matching [stream.ErrInvalidOption] for
// bad names or a nil run, and one matching [stream.ErrAlreadyRunning] if
// another Run of this Group is in progress. No goroutine it starts outlives
// it.
func (g *Group) Run(ctx context.Context, streams []string, run RunFunc) error {
	if run == nil {
		return invalid("etcd: Group.Run: run is nil")
	}
	offered := make(map[string]bool, len(streams))
	for _, s := range streams {
		if err := validName("stream", s); err != nil {
			return err
		}
		if offered[s] {
			return invalid("etcd: stream %q is named twice", s)
		}
		offered[s] = true
	}
	if !g.running.CompareAndSwap(false, true) {
		return errAlreadyRunning
	}
	defer g.running.Store(false)
	streams = append([]string(nil), streams...)
	seq := g.policy.NewSequence()
	for {
		lost, err := g.join(ctx, streams, offered, run)
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

// join is one membership: a lease, the member key, the view of the group,
// and a run for each stream owned. It returns when ctx ends or the lease is
// lost (lost true), after every run returned and the lease was revoked.
func (g *Group) join(ctx context.Context, streams []string, offered map[string]bool, run RunFunc) (lost bool, err error) {
	s, err := newSession(ctx, g.client, g.ttl)
	if err != nil {
		return false, err
	}
	m := &member{g: g, s: s, run: run, streams: streams, offered: offered, v: view{prefix: g.prefix},
		runs: map[string]*ownership{}, ended: make(chan ended, len(streams))}
	err = m.serve(ctx)
	var why error
	if s.lost() {
		why = errLost
		err = fmt.Errorf("etcd: member %q: %w", g.member, errLost)
		g.log.Warn("lease lost; stopping every stream")
	}
	for _, o := range m.runs {
		if !o.stopping || why != nil {
			m.stop(o, why)
		}
	}
	var events []OwnerEvent
	for len(m.runs) > 0 {
		e := <-m.ended
		cause := m.runs[e.stream].err
		if cause == nil && errors.Is(e.err, ErrNotOwner) {
			cause = e.err // it had ended on its own
		}
		events = append(events, OwnerEvent{Stream: e.stream, Member: g.member, Err: cause})
		delete(m.runs, e.stream)
	}
	if cerr := s.close(); cerr != nil {
		err = errors.Join(err, cerr)
	}
	for _, e := range events {
		g.emit(e)
	}
	return why != nil, err
}

// member is the state of one membership, kept by its loop (serve).
type member struct {
	g       *Group
	s       *session
	run     RunFunc
	streams []string
	offered map[string]bool
	v       view
	runs    map[string]*ownership // the streams this member runs
	ended   chan ended            // the runs that returned
}

// ownership is a stream this member owns, run in a goroutine of its own.
type ownership struct {
	rev      int64 // its owner key's create revision
	cancel   context.CancelFunc
	stopping bool  // cancel was called
	err      error // why it was stopped: nil for a handoff
}

type ended struct {
	stream string
	err    error
}

// serve keeps the member's share of the streams running until ctx ends or
// the lease is lost: it reads and watches the member and owner keys, takes
// the free streams it is picked for, and gives up those it is not.
func (m *member) serve(ctx context.Context) error {
	g := m.g
	if _, err := g.client.Put(ctx, g.prefix+"members/"+g.member, memberValue(m.streams), clientv3.WithLease(m.s.id())); err != nil {
		return fmt.Errorf("etcd: registering member %q: %w", g.member, err)
	}
	g.log.Info("joined", zap.String("lease", fmt.Sprintf("%x", m.s.id())), zap.Duration("ttl", m.s.ttl))
	var watch clientv3.WatchChan
	unwatch := func() {}
	defer func() { unwatch() }()
	retry, armed, stale := time.NewTimer(0), true, true // the first pass reads the view
	defer retry.Stop()
	seq := g.policy.NewSequence()
	for {
		var err error
		select {
		case <-ctx.Done():
			return nil
		case <-m.s.cs.Done():
			return nil
		case <-m.s.gone:
			return nil
		case e := <-m.ended:
			err = m.end(ctx, e)
		case wr, ok := <-watch:
			if !ok || wr.Err() != nil {
				stale, watch = true, nil
			}
			all := false
			for _, ev := range wr.Events {
				stream, member := m.v.apply(ev.Kv, ev.Type)
				all = all || member
				if m.offered[stream] && err == nil {
					err = m.reconcile(ctx, stream)
				}
			}
			if all && err == nil {
				err = m.pass(ctx)
			}
		case <-retry.C:
			armed = false
			if stale {
				unwatch()
				var rev int64
				if rev, err = m.v.load(ctx, g.client); err == nil {
					stale = false
					watch, unwatch = m.watch(ctx, rev+1)
				}
			}
			if err == nil && !stale {
				err = m.pass(ctx)
			}
			if err == nil {
				seq.Reset()
			}
		}
		if (err != nil || stale) && !armed {
			delay, _ := seq.Next()
			g.log.Debug("trying again", zap.Duration("delay", delay), zap.Bool("stale", stale), zap.Error(err))
			retry.Reset(delay)
			armed = true
		}
	}
}

// watch watches the member and owner keys from revision rev until the
// returned function is called.
func (m *member) watch(ctx context.Context, rev int64) (clientv3.WatchChan, func()) {
	ctx, cancel := context.WithCancel(ctx)
	from, to := m.v.keys()
	return m.g.client.Watch(ctx, from, clientv3.WithRange(to), clientv3.WithRev(rev)), cancel
}

// pass reconciles every stream offered, until an etcd request fails.
func (m *member) pass(ctx context.Context) error {
	for _, s := range m.streams {
		if err := m.reconcile(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

// reconcile does what the view says of stream: take it, start or stop its
// run, or delete an owner key of this member's lease that nothing runs (a
// Txn whose reply was lost, a handoff whose delete failed).
func (m *member) reconcile(ctx context.Context, stream string) error {
	k, o := m.v.owners[stream], m.runs[stream]
	picked := m.v.picked(stream) == m.g.member
	switch {
	case o != nil && o.stopping:
	case o != nil && k.create != o.rev:
		m.stop(o, fmt.Errorf("%w: stream %q: its owner key was deleted or replaced at revision %d", ErrNotOwner, stream, k.mod))
	case o != nil && !picked:
		m.g.log.Info("stream moves to another member", zap.String("stream", stream))
		m.stop(o, nil)
	case o != nil:
	case k.create == 0 && picked:
		return m.take(ctx, stream)
	case k.create != 0 && k.lease == m.s.id() && picked:
		m.start(ctx, stream, k.create)
	case k.create != 0 && k.lease == m.s.id():
		return m.release(ctx, stream, k.create)
	}
	return nil
}

// take creates stream's owner key under this member's lease if it does not
// exist, and runs the stream if it did not. If it did, the watch brings it.
func (m *member) take(ctx context.Context, stream string) error {
	key := m.g.prefix + "owners/" + stream
	tctx, cancel := context.WithTimeout(ctx, m.s.ttl)
	defer cancel()
	resp, err := m.g.client.Txn(tctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, m.g.member, clientv3.WithLease(m.s.id()))).Commit()
	if err != nil {
		return fmt.Errorf("etcd: taking stream %q: %w", stream, err)
	}
	if resp.Succeeded {
		m.v.own(stream, ownerKey{m.s.id(), resp.Header.Revision, resp.Header.Revision})
		m.start(ctx, stream, resp.Header.Revision)
	}
	return nil
}

// release deletes stream's owner key if it is still the one created at rev.
func (m *member) release(ctx context.Context, stream string, rev int64) error {
	key := m.g.prefix + "owners/" + stream
	tctx, cancel := context.WithTimeout(ctx, m.s.ttl)
	defer cancel()
	resp, err := m.g.client.Txn(tctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", rev)).
		Then(clientv3.OpDelete(key)).Commit()
	if err != nil {
		return fmt.Errorf("etcd: handing stream %q off: %w", stream, err)
	}
	if resp.Succeeded {
		m.v.own(stream, ownerKey{mod: resp.Header.Revision})
	}
	return nil
}

// start runs stream, owned under the owner key created at rev.
func (m *member) start(ctx context.Context, stream string, rev int64) {
	// The run ends when the member stops it, never by ctx alone: every end
	// has a reason.
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	m.runs[stream] = &ownership{rev: rev, cancel: cancel}
	m.g.log.Info("owner", zap.String("stream", stream), zap.Int64("revision", rev))
	m.g.emit(OwnerEvent{Stream: stream, Member: m.g.member, Owned: true})
	go func() { m.ended <- ended{stream, m.own(rctx, stream, rev)} }()
}

// stop cancels the run of o; why is nil for a handoff.
func (m *member) stop(o *ownership, why error) {
	o.stopping, o.err = true, why
	o.cancel()
}

// end takes note of a run that returned: it hands the stream off, or
// reports it lost.
func (m *member) end(ctx context.Context, e ended) error {
	o := m.runs[e.stream]
	delete(m.runs, e.stream)
	if !o.stopping { // the run returned ErrNotOwner: the owner key is gone
		o.err = e.err
		m.v.own(e.stream, ownerKey{mod: o.rev})
	}
	m.g.emit(OwnerEvent{Stream: e.stream, Member: m.g.member, Err: o.err})
	if o.err != nil {
		m.g.log.Warn("stream lost", zap.String("stream", e.stream), zap.Error(o.err))
		return m.reconcile(ctx, e.stream)
	}
	return m.release(ctx, e.stream, o.rev)
}

// own runs stream, and again after a backoff step each time the run
// returns on its own, until ctx ends or the run returns an error matching
// ErrNotOwner. Each run gets an Owner of its own, whose guard fails once the
// run returned.
func (m *member) own(ctx context.Context, stream string, rev int64) error {
	seq := m.g.policy.NewSequence()
	for {
		o := &Owner{stream: stream, key: m.g.prefix + "owners/" + stream, rev: rev, s: m.s, g: m.g}
		err := m.run(ctx, o)
		o.ended.Store(true)
		if ctx.Err() != nil || errors.Is(err, ErrNotOwner) {
			return err
		}
		m.g.log.Warn("stream run returned; starting it again", zap.String("stream", stream), zap.Error(err))
		delay, ok := seq.Next()
		if !ok {
			delay = m.g.ttl
		}
		if !sleep(ctx, delay) {
			return err
		}
	}
}

func (g *Group) emit(e OwnerEvent) {
	for _, f := range g.hooks {
		f(e)
	}
}

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
	key    string // the owner key
	rev    int64  // its create revision
	s      *session
	g      *Group
	ended  atomic.Bool // the run returned: this ownership is over
}

// Stream returns the stream's name.
func (o *Owner) Stream() string { return o.stream }

// Fence returns the condition that this ownership still holds: the owner
// key still exists, with the create revision it was taken at. The key is
// attached to the member's lease, so the condition fails as soon as the
// lease expired or the member handed the stream off. [NewOwnerStore] puts it
// in every Save; put it in every other transaction written on the stream's
// behalf, so that those writes are fenced too.
func (o *Owner) Fence() clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(o.key), "=", o.rev)
}

// check returns nil while the member's lease cannot have expired yet,
// an error matching ErrNotOwner (marked Permanent) once it is known gone
// or once the run this Owner was given has returned, or ctx's error.
func (o *Owner) check(ctx context.Context) error {
	if o.ended.Load() {
		return errclass.Permanent(fmt.Errorf("%w: stream %q: its run returned", ErrNotOwner, o.stream))
	}
	if err := o.s.check(ctx); err != errLost {
		return err
	}
	return errclass.Permanent(fmt.Errorf("%w: stream %q: %w", ErrNotOwner, o.stream, errLost))
}

// Guard returns handle preceded by a check of the member's lease: an event
// is handed to handle only while the lease cannot have expired by the
// process's own clock (asking etcd when that clock says it may have), so a
// member paused past its lease handles nothing more once it resumes
// (except the one event per stream whose check had passed before the
// pause). Once the lease is known lost, or the run given o returned, the
// returned function fails with an error matching [ErrNotOwner], marked
// [errclass.Permanent]. The check allocates nothing.
func Guard[T any](o *Owner, handle func(ctx context.Context, event T) error) func(ctx context.Context, event T) error {
	return func(ctx context.Context, event T) error {
		if err := o.check(ctx); err != nil {
			return err
		}
		return handle(ctx, event)
	}
}

// NewOwnerStore returns the [Store] of the stream o owns: its cursor at the
// group's prefix + "cursors/" + the stream's name, every Save fenced by
// [Owner.Fence], so that once the stream has a new owner no Save of this
// one lands.
func NewOwnerStore[C any](o *Owner, codec cursor.Codec[C], initial C) (*Store[C], error) {
	return NewStore(o.g.client, o.g.prefix+"cursors/"+o.stream, codec, initial, WithFence(o.Fence()))
}
