package etcd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/resumable-go/resumable/adapters/etcd/internal/hrw"
	"github.com/resumable-go/resumable/backoff"
)

// member is one membership of a Group, under one lease: its view of the
// group (the member and owner keys, read once and then watched) and the
// streams it runs. Only its own loop uses it.
type member struct {
	*Group
	s       *session
	run     RunFunc
	streams []string
	offered map[string]bool
	members map[string]map[string]bool  // member → the streams it offers
	owners  map[string]*mvccpb.KeyValue // stream → its owner key; CreateRevision 0 once deleted
	runs    map[string]*ownership       // the streams this member runs
	ended   chan ended                  // the runs that returned
}

// ownership is a stream this member runs, in a goroutine of its own.
type ownership struct {
	rev      int64 // its owner key's create revision
	cancel   context.CancelFunc
	stopping bool  // cancel was called
	err      error // why it ends: nil for a handoff
}

type ended struct {
	stream string
	err    error
}

// join runs the member's share of the streams under a new lease until ctx
// ends or the lease is lost (lost true), then stops every run, waits for
// them, and revokes the lease. A failed etcd request is retried after a
// step of seq; once seq gives up, join returns the request's error.
func (m *member) join(ctx context.Context, seq backoff.Sequence) (lost bool, err error) {
	if m.s, err = newSession(ctx, m.client, m.ttl); err != nil {
		return false, err
	}
	m.log.Info("joined", zap.String("lease", fmt.Sprintf("%x", m.s.id)), zap.Duration("ttl", m.s.ttl))
	err = m.serve(ctx, seq)
	if lost = m.s.lost(); lost {
		err = fmt.Errorf("etcd: member %q: %w", m.member, errLost)
	}
	for s, o := range m.runs {
		if lost && o.err == nil {
			o.err = notOwner(s, errLost)
		}
		o.stopping = true
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
	return lost, err
}

// serve registers the member, reads and watches the member and owner keys,
// and reconciles the streams each change concerns, until ctx ends or the
// lease is lost. After a failure it reads again (if the watch failed) and
// reconciles every stream.
func (m *member) serve(ctx context.Context, seq backoff.Sequence) error {
	ctx, cancel := context.WithCancel(ctx) // the watch ends with serve
	defer cancel()
	var watch clientv3.WatchChan // nil until the keys are read, and once it failed
	retry := time.After(0)
	for {
		var err error
		select {
		case <-ctx.Done():
			return nil
		case <-m.s.done:
			return nil
		case e := <-m.ended:
			m.emit(m.end(e))
			err = m.reconcile(ctx, e.stream)
		case wr, ok := <-watch:
			var changed []string
			for _, ev := range wr.Events {
				changed = append(changed, m.apply(ev.Kv)...)
			}
			err = m.reconcile(ctx, changed...)
			if !ok || wr.Err() != nil {
				watch = nil
			}
		case <-retry:
			retry = nil
			if watch == nil {
				watch, err = m.load(ctx)
			}
			if err == nil {
				err = m.reconcile(ctx, m.streams...)
			}
			if err == nil {
				seq.Reset()
			}
		}
		if (err != nil || watch == nil) && retry == nil {
			delay, ok := seq.Next()
			if !ok {
				return err
			}
			retry = time.After(delay)
		}
	}
}

// load puts the member key, reads the member and owner keys (side by side:
// "members/" < "owners/"), and watches them from the next revision.
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
	return m.client.Watch(ctx, from, clientv3.WithRange(to), clientv3.WithRev(resp.Header.Revision+1)), nil
}

// apply records a change of a member or owner key (a deletion has
// CreateRevision 0), and returns the offered streams it concerns.
func (m *member) apply(kv *mvccpb.KeyValue) []string {
	key := strings.TrimPrefix(string(kv.Key), m.prefix)
	if name, ok := strings.CutPrefix(key, "members/"); ok {
		m.members[name] = map[string]bool{}
		for _, s := range strings.Split(string(kv.Value), "\n") {
			m.members[name][s] = kv.CreateRevision != 0
		}
		return m.streams
	}
	stream := strings.TrimPrefix(key, "owners/")
	m.note(stream, kv)
	if !m.offered[stream] {
		return nil
	}
	return []string{stream}
}

// note records kv as stream's owner key unless the view knows a later state.
func (m *member) note(stream string, kv *mvccpb.KeyValue) {
	if kv.ModRevision >= m.owners[stream].GetModRevision() {
		m.owners[stream] = kv
	}
}

// picked reports whether rendezvous hashing picks this member for stream
// among the members offering it.
func (m *member) picked(stream string) bool {
	var candidates []string
	for name, offers := range m.members {
		if offers[stream] {
			candidates = append(candidates, name)
		}
	}
	p, _ := hrw.Pick(stream, candidates)
	return p == m.member
}

// reconcile compares, for each stream, who should own it with who does, and
// acts: it stops a run whose owner key is gone or that another member is
// picked for; it runs a stream whose owner key has this member's lease, if
// picked, and deletes that key if not (after a handoff, or a Txn whose reply
// was lost); it takes a free stream it is picked for. It returns the first
// failed etcd request's error.
func (m *member) reconcile(ctx context.Context, streams ...string) error {
	for _, s := range streams {
		k, o, picked := m.owners[s], m.runs[s], m.picked(s)
		mine := k.GetCreateRevision() != 0 && k.GetLease() == int64(m.s.id)
		switch {
		case o != nil && o.stopping:
		case o != nil && k.GetCreateRevision() != o.rev:
			o.stopping, o.err = true, notOwner(s, fmt.Errorf("its owner key was deleted or replaced at revision %d", k.GetModRevision()))
			o.cancel()
		case o != nil && !picked:
			o.stopping = true // a handoff
			o.cancel()
		case o != nil:
		case mine && picked:
			// The run ends when the member stops it, never by ctx alone:
			// every end has a reason.
			rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
			m.runs[s] = &ownership{rev: k.CreateRevision, cancel: cancel}
			m.emit(OwnerEvent{Stream: s, Member: m.member, Owned: true})
			go func() { m.ended <- ended{s, m.keepRunning(rctx, s, k.CreateRevision)} }()
		case mine || k.GetCreateRevision() == 0 && picked:
			if err := m.txn(ctx, s, k.GetCreateRevision()); err != nil {
				return err
			}
		}
	}
	return nil
}

// txn takes stream (rev 0: creates its owner key under the lease, if there
// is none) or hands it off (deletes its owner key, if it is the one created
// at rev), and on success reconciles the stream again. After a failed
// comparison the watch brings the key.
func (m *member) txn(ctx context.Context, stream string, rev int64) error {
	key := m.prefix + "owners/" + stream
	op := clientv3.OpDelete(key)
	if rev == 0 {
		op = clientv3.OpPut(key, m.member, clientv3.WithLease(m.s.id))
	}
	tctx, cancel := context.WithTimeout(ctx, m.s.ttl)
	defer cancel()
	resp, err := m.client.Txn(tctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", rev)).Then(op).Commit()
	if err != nil {
		return fmt.Errorf("etcd: owner key of stream %q: %w", stream, err)
	}
	if !resp.Succeeded {
		return nil
	}
	kv := &mvccpb.KeyValue{ModRevision: resp.Header.Revision}
	if rev == 0 {
		kv.CreateRevision, kv.Lease = kv.ModRevision, int64(m.s.id)
	}
	m.note(stream, kv)
	return m.reconcile(ctx, stream)
}

// end takes note of a run that returned and returns its owner event. A run
// that returned an error matching ErrNotOwner lost its owner key: the view
// marks the key gone, so that the stream is not run again on its word.
func (m *member) end(e ended) OwnerEvent {
	o := m.runs[e.stream]
	delete(m.runs, e.stream)
	if o.err == nil && errors.Is(e.err, ErrNotOwner) {
		o.err = e.err
		m.note(e.stream, &mvccpb.KeyValue{ModRevision: o.rev})
	}
	return OwnerEvent{Stream: e.stream, Member: m.member, Err: o.err}
}

// keepRunning runs stream, and again after a backoff step each time the run
// returns on its own, until ctx ends or the run returns an error matching
// ErrNotOwner. Each run gets an Owner of its own, whose guard fails once the
// run returned.
func (m *member) keepRunning(ctx context.Context, stream string, rev int64) error {
	seq := m.policy.NewSequence()
	for {
		o := &Owner{stream: stream, rev: rev, s: m.s, g: m.Group}
		err := m.run(ctx, o)
		o.ended.Store(true)
		if ctx.Err() != nil || errors.Is(err, ErrNotOwner) {
			return err
		}
		m.log.Warn("stream run returned; starting it again", zap.String("stream", stream), zap.Error(err))
		delay, ok := seq.Next()
		if !ok {
			delay = m.ttl
		}
		if !sleep(ctx, delay) {
			return err
		}
	}
}
