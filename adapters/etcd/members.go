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
	members map[string]map[string]bool  // member → the streams it offers
	owners  map[string]*mvccpb.KeyValue // stream → its owner key; CreateRevision 0 once deleted
	runs    map[string]*ownership       // the streams this member runs
	ended   chan *ownership             // the runs that returned
}

// ownership is a stream this member runs, in a goroutine of its own.
type ownership struct {
	stream string
	rev    int64              // its owner key's create revision
	cancel context.CancelFunc // stops the run; called again, it does nothing
	err    error              // why it was stopped: nil for a handoff
	result error              // what the run returned, set before it is sent on ended
}

// join runs the member's share of the streams under a new lease until ctx
// ends or the lease is lost (a lease that lived resets seq), then stops
// every run, waits for them, and revokes the lease. A failed etcd request
// is retried after a step of seq; once seq gives up, join returns the
// request's error.
func (m *member) join(ctx context.Context, seq backoff.Sequence) (err error) {
	if m.s, err = newSession(ctx, m.client, m.ttl); err != nil {
		return err
	}
	m.log.Info("joined", zap.String("lease", fmt.Sprintf("%x", m.s.id)), zap.Duration("ttl", m.s.ttl))
	lost, err := m.serve(ctx, seq)
	if lost {
		seq.Reset()
		err = fmt.Errorf("etcd: member %q: %w", m.member, errLost)
	}
	for s, o := range m.runs {
		if lost && o.err == nil {
			o.err = notOwner(s, errLost)
		}
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
// and reconciles the streams each change concerns, until ctx ends or the
// lease is lost (lost true). After a failure it reads again (if the watch
// failed) and reconciles every stream; once seq gives up, it returns the
// failure.
func (m *member) serve(ctx context.Context, seq backoff.Sequence) (lost bool, err error) {
	ctx, cancel := context.WithCancel(ctx) // the watch ends with serve
	defer cancel()
	var watch clientv3.WatchChan // nil until the keys are read, and once it failed
	retry := time.After(0)
	for {
		err = nil
		select {
		case <-ctx.Done():
			return false, nil
		case <-m.s.done:
			return true, nil
		case o := <-m.ended:
			m.emit(m.end(o))
			err = m.reconcile(ctx, o.stream)
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
				return false, err
			}
			retry = time.After(delay)
		}
	}
}

// load puts the member key, reads the member and owner keys (side by side:
// "members/" < "owners/"), and watches them from the next revision. The
// read follows the put by a round trip, so members started together see
// each other before they take streams.
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
// CreateRevision 0), and returns the streams it concerns.
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
		case o != nil && k.GetCreateRevision() != o.rev:
			o.err = notOwner(s, fmt.Errorf("its owner key was deleted or replaced at revision %d", k.GetModRevision()))
			o.cancel()
		case o != nil && !picked:
			o.cancel() // a handoff, unless it was stopped for another reason
		case o != nil: // running, or stopped and ending
		case mine && picked:
			m.start(ctx, s, k.CreateRevision)
		case mine || k.GetCreateRevision() == 0 && picked:
			// Hand the stream off (delete its owner key if it is still the
			// one created at rev) or take it (create the key if there is
			// none). The view records a success at once (the watch brings
			// it later); after a failed comparison, the watch brings the key.
			key, rev := m.prefix+"owners/"+s, k.GetCreateRevision()
			op := clientv3.OpDelete(key)
			if rev == 0 {
				op = clientv3.OpPut(key, m.member, clientv3.WithLease(m.s.id))
			}
			tctx, cancel := context.WithTimeout(ctx, m.s.ttl)
			resp, err := m.client.Txn(tctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", rev)).Then(op).Commit()
			cancel()
			if err != nil {
				return fmt.Errorf("etcd: owner key of stream %q: %w", s, err)
			}
			if r := resp.Header.Revision; resp.Succeeded && rev == 0 {
				m.note(s, &mvccpb.KeyValue{Lease: int64(m.s.id), CreateRevision: r, ModRevision: r})
				m.start(ctx, s, r)
			} else if resp.Succeeded {
				m.note(s, &mvccpb.KeyValue{ModRevision: r})
			}
		}
	}
	return nil
}

// start runs stream, owned under the owner key created at rev. The run ends
// when the member stops it, never by ctx alone: every end has a reason.
func (m *member) start(ctx context.Context, stream string, rev int64) {
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	o := &ownership{stream: stream, rev: rev, cancel: cancel}
	m.runs[stream] = o
	m.emit(OwnerEvent{Stream: stream, Member: m.member, Owned: true})
	go func() { o.result = m.keepRunning(rctx, stream, rev); m.ended <- o }()
}

// end takes note of a run that returned and returns its owner event. A run
// that returned an error matching ErrNotOwner lost its owner key: unless
// the view knows a later state, it marks the key deleted, so that the
// stream is not run again on the view's word.
func (m *member) end(o *ownership) OwnerEvent {
	delete(m.runs, o.stream)
	if o.err == nil && errors.Is(o.result, ErrNotOwner) {
		o.err = o.result
		m.note(o.stream, &mvccpb.KeyValue{ModRevision: o.rev})
	}
	return OwnerEvent{Stream: o.stream, Member: m.member, Err: o.err}
}

// keepRunning runs stream, and again after a backoff step each time the run
// returns on its own, until ctx ends or the run returns an error matching
// ErrNotOwner. Each run gets an Owner of its own, whose guard fails once the
// run returned.
func (m *member) keepRunning(ctx context.Context, stream string, rev int64) error {
	seq := m.policy.NewSequence()
	for {
		o := &Owner{stream: stream, rev: rev, m: m}
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
