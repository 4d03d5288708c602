package etcd

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"time"
	"unicode"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/resumable-go/resumable/adapters/etcd/internal/hrw"
	"github.com/resumable-go/resumable/backoff"
	"github.com/resumable-go/resumable/errclass"
	"github.com/resumable-go/resumable/internal/badarg"
	"github.com/resumable-go/resumable/internal/wait"
)

// Group runs named streams across processes, each stream in at most one
// process at a time. Every process makes a Group with its own member name
// and calls [Group.Run] with the streams it offers; rendezvous hashing over
// the members offering a stream picks its owner, so a member joining or
// leaving moves only its share. Under its key prefix a Group keeps:
//
//	members/MEMBER  the streams MEMBER offers; attached to its lease
//	owners/STREAM   STREAM's owner, attached to the owner's lease
//	cursors/STREAM  STREAM's cursor, for the stores of NewOwnerStore
//
// A Group is safe for concurrent use, but runs one [Group.Run] at a time.
// See docs/etcd.md in the repository.
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
// (etcd raises it to its minimum, about 2 s). It bounds how long a dead
// owner's streams wait for a successor, and how long a paused owner may
// still handle events. Default 10 s. Below one second NewGroup fails.
func WithTTL(d time.Duration) GroupOption { return groupOption(func(g *Group) { g.ttl = d }) }

// WithKeyPrefix sets the prefix of the Group's keys (default
// "/resumable/"), the same for every member. Empty makes NewGroup fail.
func WithKeyPrefix(p string) GroupOption { return groupOption(func(g *Group) { g.prefix = p }) }

// WithLogger sets the logger: ownership changes at Info, failures at Warn.
// Nil means zap.NewNop(), the default.
func WithLogger(l *zap.Logger) GroupOption {
	return groupOption(func(g *Group) { g.log = cmp.Or(l, g.log) })
}

// WithGroupBackoff sets the delays after a failed lease or etcd request,
// or a stream's run that returned. Nil means the default: exponential from
// 200 ms to 5 s, never giving up. It is the Group's own policy, named
// apart from [stream.WithBackoff], which sets a Resumer's delays between
// reopens inside a run; a policy that gives up ends [Group.Run].
func WithGroupBackoff(p backoff.Policy) GroupOption {
	return groupOption(func(g *Group) { g.policy = cmp.Or(p, g.policy) })
}

// WithOwnerHook adds f to the functions called at each change of this
// member's ownership of a stream, one at a time, in order, outside the
// Group's locks: f must return quickly. Nil is ignored.
func WithOwnerHook(f func(OwnerEvent)) GroupOption {
	return groupOption(func(g *Group) { g.hooks = append(g.hooks, f) })
}

// OwnerEvent is a change of a member's ownership of a stream, given to
// [WithOwnerHook]'s hooks: it starts (Owned) before the first run and ends
// after the last run returned, restarts included.
type OwnerEvent struct {
	Stream string // the stream's name
	Member string // the member's name
	Owned  bool   // true: the member owns the stream now; false: no longer
	// Err is nil for a start or a handoff. For an ownership lost (lease
	// expired or revoked, owner key deleted, fenced Save refused) it says
	// why, and matches [ErrNotOwner].
	Err error
}

// NewGroup returns a Group whose member is named member, unique among the
// group's live members (a pod name, say), coordinating through client. It
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
	if err := errors.Join(
		invalidIf(client == nil, "NewGroup", "client", nil, "must not be nil"),
		validName("NewGroup", "member", member),
		invalidIf(g.ttl < time.Second, "WithTTL", "d", g.ttl, "must be at least 1s"),
		invalidIf(g.prefix == "", "WithKeyPrefix", "p", g.prefix, "must not be empty"),
		invalidIf(bad != nil, "WithGroupBackoff", "p", bad, "is not a valid policy")); err != nil {
		return nil, err
	}
	g.hooks = slices.DeleteFunc(g.hooks, func(f func(OwnerEvent)) bool { return f == nil })
	g.log = g.log.With(zap.String("member", member))
	return g, nil
}

// validName: a name becomes part of a key and a line of the member key.
func validName(where, arg, name string) error {
	bad := name == "" || strings.ContainsFunc(name, func(r rune) bool { return r == '/' || unicode.IsSpace(r) || !unicode.IsPrint(r) })
	return invalidIf(bad, where, arg, name, "must be printable characters other than white space and '/'")
}

// invalidIf returns, when bad, the [badarg] error of the argument arg of
// where ("NewGroup", "WithTTL").
func invalidIf(bad bool, where, arg string, value any, why string) error {
	if !bad {
		return nil
	}
	return badarg.New("etcd: "+where, arg, value, why)
}

// RunFunc runs one stream while o owns it. Once ctx ends (the stream
// moves, the lease is lost, [Group.Run] ends) it must save its cursor and
// return, as a [stream.Resumer]'s Run does. Fence its Store
// ([NewOwnerStore]) and guard its handler ([Guard]).
type RunFunc func(ctx context.Context, o *Owner) error

// Run joins the group, offers the streams named, and calls run in a
// goroutine of its own for each stream this member gets, until ctx ends.
// Then it stops every run, waits for their final saves, and revokes the
// lease, which hands every stream to its successor at once; it returns an
// error matching ctx's. No goroutine it starts outlives it.
//
// While it runs:
//   - A stream that must move to a member that joined has its run's
//     context cancelled; once run returned, the owner key is deleted and
//     the successor starts at once.
//   - A run that returns on its own is started again after a backoff step,
//     while this member owns the stream (not after [ErrNotOwner]).
//   - When the lease is or may be lost (no renewal answered within the TTL
//     counted from when it was sent), every run is stopped and the member
//     joins again with a new lease.
//   - A failed etcd request is retried; Run returns it once the backoff
//     policy gives up.
//
// Stream names are unique, non-empty, printable, without white space and
// without "/": else Run returns an error matching [stream.ErrInvalidOption],
// as for a nil run. It fails at once while another Run of this Group runs.
func (g *Group) Run(ctx context.Context, streams []string, run RunFunc) error {
	errs, offered := []error{invalidIf(run == nil, "Group.Run", "run", nil, "must not be nil")}, make(map[string]bool, len(streams))
	for _, s := range streams {
		errs = append(errs, validName("Group.Run", "streams", s), invalidIf(offered[s], "Group.Run", "streams", s, "named twice"))
		offered[s] = true
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if !g.running.CompareAndSwap(false, true) {
		return errAlreadyRunning
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

func (g *Group) emit(e OwnerEvent) {
	g.log.Info("ownership", zap.String("stream", e.Stream), zap.Bool("owned", e.Owned), zap.Error(e.Err))
	for _, f := range g.hooks {
		f(e)
	}
}

func notOwner(stream string, why error) error {
	return fmt.Errorf("%w: stream %q: %w", ErrNotOwner, stream, why)
}

// backOff waits the next delay of seq, or until ctx ends; it reports false
// when ctx ended or seq gave up.
func backOff(ctx context.Context, seq backoff.Sequence) bool {
	d, ok := seq.Next()
	return ok && wait.Sleep(ctx, d) == nil
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
// key exists with the create revision it was taken at. It fails as soon as
// the lease expired or the stream was handed off. [NewOwnerStore] puts it
// in every Save; put it in every other transaction written for the stream.
func (o *Owner) Fence() clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(o.m.prefix+"owners/"+o.stream), "=", o.rev)
}

// Guard returns handle preceded by a check of the member's lease: an event
// is handed to handle only while the lease cannot have expired by the
// process's own clock (the last renewal's send time plus the TTL). A
// member paused past its lease handles nothing more once it resumes,
// except events whose check had passed before the pause (one per stream,
// up to n under stream.WithConcurrency(n)). Once the lease may have
// expired, or the run Guard was called in returned, it fails with a
// permanent error matching [ErrNotOwner]. It is safe for concurrent use and
// allocates nothing.
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

// member is one membership of a Group, under one lease: its view of the
// member and owner keys, and its runs. Only its own loop uses it.
type member struct {
	*Group
	s       *session
	run     RunFunc
	streams []string
	members map[string]map[string]bool  // member → the streams it offers
	owners  map[string]*mvccpb.KeyValue // stream → its owner key; CreateRevision 0 once deleted
	todo    []string                    // the streams to reconcile, in order; one may come twice
	runs    map[string]*Owner           // the streams this member runs, each in a goroutine of its own
	ended   chan *Owner                 // the ownerships whose runs returned
}

// join runs the member's share under a new lease until ctx ends or the
// lease is lost, then stops every run, waits for them, revokes the lease,
// and only then reports the ownerships' ends (successors may start).
func (m *member) join(ctx context.Context, seq backoff.Sequence) (err error) {
	sctx, cancel := context.WithCancel(ctx) // ends with ctx or with the lease
	defer cancel()
	if m.s, err = newSession(ctx, m.client, m.ttl, cancel); err != nil {
		return err
	}
	m.log.Info("joined", zap.String("lease", fmt.Sprintf("%x", m.s.id)), zap.Duration("ttl", m.s.ttl))
	if err = m.serve(sctx, seq); ctx.Err() == nil && sctx.Err() != nil {
		seq.Reset()
		err = fmt.Errorf("etcd: member %q: %w", m.member, errLost)
	}
	for _, o := range m.runs {
		o.cancel()
	}
	var events []OwnerEvent
	for len(m.runs) > 0 {
		events = append(events, m.end(<-m.ended))
	}
	err = errors.Join(err, m.s.close())
	for _, e := range events {
		m.emit(e)
	}
	return err
}

// serve reads and watches the member and owner keys and reconciles the
// streams concerned one at a time, until ctx ends. Watch events and ended
// runs are taken between two streams, so a long pass acts on what it learns
// meanwhile. A failed request is retried after a step of seq.
func (m *member) serve(ctx context.Context, seq backoff.Sequence) (err error) {
	var watch clientv3.WatchChan // nil until the keys are read, and once it failed
	for {
		var work <-chan struct{} // ready while there is a read to make or a stream to reconcile
		if watch == nil || len(m.todo) > 0 {
			work = ready
		}
		select {
		case <-ctx.Done():
			return nil
		case o := <-m.ended:
			m.emit(m.end(o))
			m.todo = append(m.todo, o.stream)
		case wr, ok := <-watch:
			for _, ev := range wr.Events {
				m.apply(ev.Kv)
			}
			if !ok || wr.Err() != nil {
				watch, err = nil, fmt.Errorf("etcd: watching the group under %q: %w", m.prefix, cmp.Or(wr.Err(), errors.New("the watch closed")))
			}
		case <-work:
			if watch == nil {
				watch, err = m.load(ctx)
			} else if err = m.reconcile(ctx); err == nil {
				seq.Reset()
			}
		}
		if err != nil && ctx.Err() == nil {
			m.log.Warn("etcd request failed", zap.Error(err))
			if !backOff(ctx, seq) {
				return err
			}
			err = nil
		}
	}
}

var ready = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// load registers the member, then reads the member and owner keys (side
// by side: "members/" < "owners/") and watches them from the next revision.
// Reading after the put lets members started together see each other
// before they take streams.
func (m *member) load(ctx context.Context) (clientv3.WatchChan, error) {
	from, to := m.prefix+"members/", clientv3.GetPrefixRangeEnd(m.prefix+"owners/")
	if _, err := m.client.Put(ctx, from+m.member, strings.Join(m.streams, "\n"), clientv3.WithLease(m.s.id)); err != nil {
		return nil, fmt.Errorf("etcd: registering member %q: %w", m.member, err)
	}
	resp, err := m.client.Get(ctx, from, clientv3.WithRange(to))
	if err != nil {
		return nil, fmt.Errorf("etcd: reading the members and owners under %q: %w", m.prefix, err)
	}
	m.members, m.owners = map[string]map[string]bool{}, map[string]*mvccpb.KeyValue{}
	for _, kv := range resp.Kvs {
		m.apply(kv)
	}
	m.todo = slices.Clone(m.streams)
	return m.client.Watch(ctx, from, clientv3.WithRange(to), clientv3.WithRev(resp.Header.Revision+1)), nil
}

// apply records a change of a member or owner key (a deletion has
// CreateRevision 0) and queues the streams it concerns.
func (m *member) apply(kv *mvccpb.KeyValue) {
	key := strings.TrimPrefix(string(kv.Key), m.prefix)
	if name, ok := strings.CutPrefix(key, "members/"); ok {
		m.members[name] = map[string]bool{}
		for _, s := range strings.Split(string(kv.Value), "\n") {
			m.members[name][s] = kv.CreateRevision != 0
		}
		m.todo = append(m.todo, m.streams...)
		return
	}
	stream := strings.TrimPrefix(key, "owners/")
	if kv.ModRevision >= m.owners[stream].GetModRevision() { // unless the view knows a later state
		m.owners[stream] = kv
	}
	m.todo = append(m.todo, stream)
}

// picked reports whether rendezvous hashing picks this member for stream.
func (m *member) picked(stream string) bool {
	offering := slices.DeleteFunc(slices.Collect(maps.Keys(m.members)), func(name string) bool { return !m.members[name][stream] })
	p, _ := hrw.Pick(stream, offering)
	return p == m.member
}

// reconcile compares who should own the stream at the head of the queue
// with who does, and acts: stop a run whose key is gone or that another
// member is picked for; run a stream whose key has this lease if picked,
// delete that key if not (keys are recognised by lease, so a lost reply
// leaves no orphan); take a free stream if picked. A take or a delete is a
// conditional Txn that reads the key back, and the stream stays at the
// head to be looked at again.
func (m *member) reconcile(ctx context.Context) error {
	s := m.todo[0]
	k, o, picked := m.owners[s], m.runs[s], m.picked(s)
	rev := k.GetCreateRevision()
	mine := rev != 0 && k.GetLease() == int64(m.s.id)
	switch {
	case o != nil && rev != o.rev:
		o.err = notOwner(s, fmt.Errorf("its owner key was deleted or replaced at revision %d", k.GetModRevision()))
		o.cancel()
	case o != nil && !picked:
		o.cancel() // a handoff, unless it was stopped for another reason
	case o != nil: // running, or stopped and ending
	case mine && picked:
		// The run ends when the member stops it, never by ctx alone:
		// every end has a reason.
		rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		o = &Owner{stream: s, rev: rev, m: m, cancel: cancel}
		m.runs[s] = o
		m.emit(OwnerEvent{Stream: s, Member: m.member, Owned: true})
		go func() { o.result = m.keepRunning(rctx, o); m.ended <- o }()
	case mine || rev == 0 && picked:
		key := m.prefix + "owners/" + s
		op := clientv3.OpDelete(key)
		if rev == 0 {
			op = clientv3.OpPut(key, m.member, clientv3.WithLease(m.s.id))
		}
		resp, err := m.client.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", rev)).
			Then(op, clientv3.OpGet(key)).Else(clientv3.OpGet(key)).Commit()
		if err != nil {
			return fmt.Errorf("etcd: owner key of stream %q: %w", s, err)
		}
		k = &mvccpb.KeyValue{Key: []byte(key), ModRevision: resp.Header.Revision} // none
		if kvs := resp.Responses[len(resp.Responses)-1].GetResponseRange().GetKvs(); len(kvs) > 0 {
			k = kvs[0]
		}
		m.apply(k)
		return nil
	}
	m.todo = m.todo[1:]
	return nil
}

// end returns the owner event of a run that returned: a handoff unless it
// was stopped for a reason, returned ErrNotOwner, or the lease may have
// expired. After ErrNotOwner it marks the key deleted (unless the view
// knows later), so the stream is not run again on the view's word.
func (m *member) end(o *Owner) OwnerEvent {
	delete(m.runs, o.stream)
	if o.err == nil && errors.Is(o.result, ErrNotOwner) {
		o.err = o.result
		m.apply(&mvccpb.KeyValue{Key: []byte(m.prefix + "owners/" + o.stream), ModRevision: o.rev})
	}
	return OwnerEvent{Stream: o.stream, Member: m.member, Err: cmp.Or(o.err, m.s.check(o.stream))}
}

// keepRunning runs o's stream, again after a backoff step each time it
// returns, until ctx ends or ErrNotOwner. o.runs counts the returns: a
// guard made in a run fails after it.
func (m *member) keepRunning(ctx context.Context, o *Owner) error {
	seq := m.policy.NewSequence()
	for {
		err := m.run(ctx, o)
		o.runs.Add(1)
		if ctx.Err() != nil || errors.Is(err, ErrNotOwner) {
			return err
		}
		m.log.Warn("stream run returned; starting it again", zap.String("stream", o.stream), zap.Error(err))
		if !backOff(ctx, seq) && wait.Sleep(ctx, m.ttl) != nil { // once seq gave up, every TTL
			return err
		}
	}
}

// errLost is why an ownership ends when the member's lease is gone.
var errLost = errors.New("the member's lease expired, was revoked or is no longer kept alive")

// session is one member's lease, renewed every third of its TTL, and a
// local deadline before which it cannot have expired in etcd: a renewal's
// send time plus the TTL granted (etcd counts from its receipt, later).
// Once the deadline passed the lease is lost for good: the deadline never
// moves again, so a process resumed after a pause never trusts a reply
// that waited for it.
type session struct {
	client   *clientv3.Client
	id       clientv3.LeaseID
	ttl      time.Duration
	start    time.Time          // the monotonic origin of deadline
	deadline atomic.Int64       // nanoseconds after start; 0 once the session ended
	done     chan struct{}      // closed once the lease is no longer renewed
	stop     context.CancelFunc // ends the renewals
}

// newSession grants a lease of ttl and renews it until close or a failed
// renewal; then it calls ended.
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

// renew moves the deadline at each answered renewal, and ends the session
// once one failed or came after the deadline.
func (s *session) renew(ctx context.Context) {
	defer close(s.done)
	defer s.deadline.Store(0)
	for wait.Sleep(ctx, s.ttl/3) == nil {
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

// check returns nil while the lease cannot have expired, else a permanent
// ErrNotOwner. It must not allocate while the lease is valid.
func (s *session) check(stream string) error {
	if int64(time.Since(s.start)) < s.deadline.Load() {
		return nil
	}
	return errclass.Permanent(notOwner(stream, errLost))
}

// close ends the renewals and revokes the lease, deleting its keys so
// successors start at once. A lease already gone is not an error.
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
