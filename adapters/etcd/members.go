package etcd

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/resumable-go/resumable/adapters/etcd/internal/hrw"
	"github.com/resumable-go/resumable/backoff"
)

// member is one membership of a Group, under one lease: its view of the
// group (the member and owner keys, read once and then watched), the
// streams to reconsider, and the streams it runs. Only its own loop uses it.
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

// join runs the member's share of the streams under a new lease until ctx
// ends or the lease is lost (a lease that lived resets seq), then stops
// every run, waits for them, revokes the lease, and reports the ends of
// the ownerships (after the revocation: the successors may start). Once
// seq gives up on a failed etcd request, join returns the request's error.
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

// serve registers the member, reads and watches the member and owner keys,
// and reconciles, one at a time, the streams each change concerns, until
// ctx ends (join ends it when the lease is lost). Watch events and runs
// that returned are taken between two streams, so that a long pass (a
// member taking thousands of streams) acts on what it learns meanwhile.
// After a failed request (or watch) it waits a step of seq, then tries the
// same stream again (or reads everything again); once seq gives up, it
// returns the failure.
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

// ready is always ready to receive from.
var ready = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// load puts the member key, reads the member and owner keys (side by side:
// "members/" < "owners/"), queues every stream, and watches the keys from
// the next revision. The read follows the put by a round trip, so members
// started together see each other before they take streams.
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
// CreateRevision 0; an owner key's change older than the one recorded is
// ignored), and queues the streams it concerns.
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

// picked reports whether rendezvous hashing picks this member for stream
// among the members offering it.
func (m *member) picked(stream string) bool {
	offering := slices.DeleteFunc(slices.Collect(maps.Keys(m.members)), func(name string) bool { return !m.members[name][stream] })
	p, _ := hrw.Pick(stream, offering)
	return p == m.member
}

// reconcile compares who should own the stream at the head of the queue
// with who does, and acts: it stops a run whose owner key is gone or that
// another member is picked for; it runs the stream if its owner key has
// this member's lease and this member is picked, and deletes that key if
// not picked (after a handoff, or a Txn whose reply was lost); it takes the
// stream if it is free and this member is picked. A take or a deletion is
// one conditional Txn that also reads the key back, so the view learns the
// outcome at once, success or not; the stream then stays at the head, to
// be looked at again. Otherwise it leaves the queue. reconcile returns the
// failed etcd request's error.
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

// end takes note of a run that returned and returns its owner event: a
// handoff (Err nil) unless the run was stopped for a reason, returned an
// error matching ErrNotOwner, or the lease may have expired. A run that
// returned such an error lost its owner key: unless the view knows a later
// state, end marks the key deleted, so that the stream is not run again on
// the view's word.
func (m *member) end(o *Owner) OwnerEvent {
	delete(m.runs, o.stream)
	if o.err == nil && errors.Is(o.result, ErrNotOwner) {
		o.err = o.result
		m.apply(&mvccpb.KeyValue{Key: []byte(m.prefix + "owners/" + o.stream), ModRevision: o.rev})
	}
	return OwnerEvent{Stream: o.stream, Member: m.member, Err: cmp.Or(o.err, m.s.check(o.stream))}
}

// keepRunning runs o's stream, and again after a backoff step each time the
// run returns on its own, until ctx ends or the run returns an error
// matching ErrNotOwner. A guard made in a run fails once that run returned.
func (m *member) keepRunning(ctx context.Context, o *Owner) error {
	seq := m.policy.NewSequence()
	for {
		err := m.run(ctx, o)
		o.runs.Add(1)
		if ctx.Err() != nil || errors.Is(err, ErrNotOwner) {
			return err
		}
		m.log.Warn("stream run returned; starting it again", zap.String("stream", o.stream), zap.Error(err))
		if !backOff(ctx, seq) && !sleep(ctx, m.ttl) { // once seq gave up, every TTL
			return err
		}
	}
}
