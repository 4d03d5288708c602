package etcd

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"
	"unicode"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/resumable-go/resumable/backoff"
	"github.com/resumable-go/resumable/errclass"
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
	client  *clientv3.Client
	member  string
	ttl     time.Duration // the options', from here on
	prefix  string
	log     *zap.Logger
	policy  backoff.Policy
	hooks   []func(OwnerEvent)
	running atomic.Bool // a Run is in progress
}

// GroupOption configures [NewGroup].
type GroupOption interface{ applyGroup(*Group) }

type groupOption func(*Group)

func (f groupOption) applyGroup(g *Group) { f(g) }

// WithTTL sets the TTL of the member's lease, rounded up to whole seconds
// (etcd raises a TTL below its minimum, about 2 s with default election
// settings). It bounds how long a stream whose owner died waits for a
// successor, and how long a paused owner may still handle events before it
// must stop. Default 10 s. Below one second NewGroup fails.
func WithTTL(d time.Duration) GroupOption { return groupOption(func(g *Group) { g.ttl = d }) }

// WithKeyPrefix sets the prefix of the Group's keys (default
// "/resumable/"). Every member of a group must use the same one. An
// empty prefix makes NewGroup fail.
func WithKeyPrefix(p string) GroupOption { return groupOption(func(g *Group) { g.prefix = p }) }

// WithLogger sets the logger: ownership changes at Info (a loss with its
// reason), failures at Warn. Nil means zap.NewNop(), which is also the
// default.
func WithLogger(l *zap.Logger) GroupOption {
	return groupOption(func(g *Group) { g.log = cmp.Or(l, g.log) })
}

// WithGroupBackoff sets the delays between attempts after a failure: a
// lease that could not be granted or was lost, an etcd request that failed,
// a stream's run that returned. Nil means the default: exponential from
// 200 ms to 5 s, never giving up.
func WithGroupBackoff(p backoff.Policy) GroupOption {
	return groupOption(func(g *Group) { g.policy = cmp.Or(p, g.policy) })
}

// WithOwnerHook adds f to the functions called at each change of this
// member's ownership of a stream. They are called one at a time, from the
// Group's own goroutine and outside its locks, in the order of the changes:
// f must return quickly. Nil is ignored.
func WithOwnerHook(f func(OwnerEvent)) GroupOption {
	return groupOption(func(g *Group) { g.hooks = append(g.hooks, f) })
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
	g := &Group{client: client, member: member, ttl: 10 * time.Second, prefix: "/resumable/", log: zap.NewNop(),
		policy: backoff.Exponential(backoff.WithInitialInterval(200*time.Millisecond), backoff.WithMaxInterval(5*time.Second))}
	for _, o := range opts {
		if o != nil {
			o.applyGroup(g)
		}
	}
	var bad error // the backoff policy's option error
	if v, ok := g.policy.(interface{ Validate() error }); ok {
		bad = v.Validate()
	}
	if err := errors.Join(validName("member", member),
		invalidIf(client == nil, "etcd: NewGroup: the client is nil"),
		invalidIf(g.ttl < time.Second, "etcd: WithTTL(%v): the TTL must be at least 1s", g.ttl),
		invalidIf(g.prefix == "", "etcd: WithKeyPrefix(\"\"): the prefix must not be empty"),
		invalidIf(bad != nil, "etcd: WithGroupBackoff: %w", bad)); err != nil {
		return nil, err
	}
	g.hooks = slices.DeleteFunc(g.hooks, func(f func(OwnerEvent)) bool { return f == nil })
	g.log = g.log.With(zap.String("member", member))
	return g, nil
}

// validName checks a member or stream name: it becomes part of a key and of
// a line in the member's key, so it must be non-empty, printable, without
// white space and without "/".
func validName(what, name string) error {
	bad := name == "" || strings.ContainsFunc(name, func(r rune) bool { return r == '/' || unicode.IsSpace(r) || !unicode.IsPrint(r) })
	return invalidIf(bad, "etcd: %s name %q: use printable characters other than white space and '/'", what, name)
}

// invalidIf returns invalid(format, a...) if bad, and nil if not.
func invalidIf(bad bool, format string, a ...any) error {
	if !bad {
		return nil
	}
	return invalid(format, a...)
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
//   - A failed etcd request is tried again after a backoff step; Run
//     returns the failure once the backoff policy gives up.
//
// Stream names are unique, non-empty, printable, without white space and
// without "/". Run returns an error matching [stream.ErrInvalidOption] for
// bad names or a nil run, and one matching [stream.ErrAlreadyRunning] if
// another Run of this Group is in progress. No goroutine it starts outlives
// it.
func (g *Group) Run(ctx context.Context, streams []string, run RunFunc) error {
	err, offered := invalidIf(run == nil, "etcd: Group.Run: run is nil"), make(map[string]bool, len(streams))
	for _, s := range streams {
		err = cmp.Or(err, validName("stream", s), invalidIf(offered[s], "etcd: stream %q is named twice", s))
		offered[s] = true
	}
	if err != nil || !g.running.CompareAndSwap(false, true) {
		return cmp.Or[error](err, errAlreadyRunning)
	}
	defer g.running.Store(false)
	seq := g.policy.NewSequence()
	for {
		m := &member{Group: g, run: run, streams: slices.Clone(streams), runs: map[string]*Owner{}, ended: make(chan *Owner, len(streams))}
		err := m.join(ctx, seq)
		if ctx.Err() != nil {
			return errors.Join(ctx.Err(), err)
		}
		g.log.Warn("membership ended; joining again", zap.Error(err))
		if !backOff(ctx, seq) {
			return cmp.Or(ctx.Err(), fmt.Errorf("etcd: member %q: the backoff policy gave up: %w", g.member, err))
		}
	}
}

// emit logs an ownership change and calls the owner hooks.
func (g *Group) emit(e OwnerEvent) {
	g.log.Info("ownership", zap.String("stream", e.Stream), zap.Bool("owned", e.Owned), zap.Error(e.Err))
	for _, f := range g.hooks {
		f(e)
	}
}

// notOwner returns the error of an ownership of stream that ended for why.
func notOwner(stream string, why error) error {
	return fmt.Errorf("%w: stream %q: %w", ErrNotOwner, stream, why)
}

// backOff waits the next delay of seq, or until ctx ends; it reports false
// when ctx ended or seq gave up.
func backOff(ctx context.Context, seq backoff.Sequence) bool {
	d, ok := seq.Next()
	return ok && sleep(ctx, d)
}

// sleep waits d, or until ctx ends; it reports false when ctx ended.
func sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-time.After(d):
		return true
	case <-ctx.Done():
		return false
	}
}

// Owner is a member's ownership of one stream, handed to a [RunFunc]. Its
// methods are safe for concurrent use.
type Owner struct {
	stream string
	rev    int64 // its owner key's create revision
	m      *member
	runs   atomic.Int64 // how many runs given it returned
	// Of the member's loop only:
	cancel context.CancelFunc // stops the runs; called again, it does nothing
	err    error              // why they were stopped: nil for a handoff
	result error              // what the last run returned, set before o is sent on ended
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
	return clientv3.Compare(clientv3.CreateRevision(o.m.prefix+"owners/"+o.stream), "=", o.rev)
}

// Guard returns handle preceded by a check of the member's lease: an event
// is handed to handle only while the lease cannot have expired by the
// process's own clock (the member renews it every third of its TTL and
// counts it lost once a renewal went unanswered until the TTL, counted
// from the last renewal sent, ran out), so a member paused past its lease
// handles nothing more once it resumes (except the events whose check had
// passed before the pause: one per stream, or up to n under
// stream.WithConcurrency(n)). Once the lease may have expired, or the run
// given o returned, the returned function fails with an error matching
// [ErrNotOwner], marked [errclass.Permanent]. It is safe for concurrent
// use, and the check allocates nothing.
func Guard[T any](o *Owner, handle func(ctx context.Context, event T) error) func(ctx context.Context, event T) error {
	run := o.runs.Load() // the run this guard is made in
	return func(ctx context.Context, event T) error {
		if o.runs.Load() != run {
			return errclass.Permanent(notOwner(o.stream, errors.New("its run returned")))
		}
		if err := o.m.s.check(o.stream); err != nil {
			return err
		}
		return handle(ctx, event)
	}
}
