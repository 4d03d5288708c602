package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/resumable-go/resumable/adapters/etcd"
	"github.com/resumable-go/resumable/adapters/etcd/internal/hrw"
	"github.com/resumable-go/resumable/errclass"
)

// ttl is the members' lease TTL in these tests: the smallest etcd grants.
const ttl = 2 * time.Second

// recorder records the runs of a group's members and fails the test if two
// members ever run one stream at once.
type recorder struct {
	t       *testing.T
	mu      sync.Mutex
	log     []string          // "start MEMBER STREAM", "stop MEMBER STREAM"
	running map[string]string // stream → member
	owners  map[string]*etcd.Owner
	events  []string // "MEMBER owned|released|lost STREAM", from the owner hooks
	changed chan struct{}
}

// hook records an owner event.
func (r *recorder) hook(e etcd.OwnerEvent) {
	verb := "owned"
	switch {
	case e.Err != nil && errors.Is(e.Err, etcd.ErrNotOwner) && !e.Owned:
		verb = "lost"
	case e.Err != nil:
		r.t.Errorf("owner event %+v: an error that does not match %v", e, etcd.ErrNotOwner)
	case !e.Owned:
		verb = "released"
	}
	r.note(func() { r.events = append(r.events, e.Member+" "+verb+" "+e.Stream) })
}

// awaitEvents waits until the owner hooks reported want, in this order.
func (r *recorder) awaitEvents(want ...string) {
	r.t.Helper()
	timeout := time.After(deadline)
	for {
		r.mu.Lock()
		got, changed := append([]string(nil), r.events...), r.changed
		r.mu.Unlock()
		if len(got) >= len(want) {
			if diff := cmp.Diff(want, got); diff != "" {
				r.t.Errorf("owner events (-want +got):\n%s", diff)
			}
			return
		}
		select {
		case <-changed:
		case <-timeout:
			r.t.Fatalf("timed out waiting for owner events %q; got %q", want, got)
		}
	}
}

func newRecorder(t *testing.T) *recorder {
	return &recorder{t: t, running: map[string]string{}, owners: map[string]*etcd.Owner{}, changed: make(chan struct{})}
}

func (r *recorder) note(f func()) {
	r.mu.Lock()
	f()
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
}

// run returns a RunFunc for member that runs until its context ends.
func (r *recorder) run(member string) etcd.RunFunc {
	return func(ctx context.Context, o *etcd.Owner) error {
		r.note(func() {
			if other, ok := r.running[o.Stream()]; ok {
				r.t.Errorf("%s started %s while %s runs it", member, o.Stream(), other)
			}
			r.running[o.Stream()] = member
			r.owners[o.Stream()] = o
			r.log = append(r.log, "start "+member+" "+o.Stream())
		})
		<-ctx.Done()
		r.note(func() {
			delete(r.running, o.Stream())
			r.log = append(r.log, "stop "+member+" "+o.Stream())
		})
		return ctx.Err()
	}
}

// await waits until cond holds over the running map.
func (r *recorder) await(what string, cond func(running map[string]string) bool) {
	r.t.Helper()
	timeout := time.After(deadline)
	for {
		r.mu.Lock()
		ok, changed := cond(r.running), r.changed
		snapshot := fmt.Sprint(r.running)
		r.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-changed:
		case <-timeout:
			r.t.Fatalf("timed out waiting for %s; running: %s", what, snapshot)
		}
	}
}

// awaitOwners waits until the running map is want.
func (r *recorder) awaitOwners(want map[string]string) {
	r.t.Helper()
	r.await(fmt.Sprint(want), func(running map[string]string) bool { return cmp.Equal(want, running) })
}

func (r *recorder) entries() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.log...)
}

func (r *recorder) owner(stream string) *etcd.Owner {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.owners[stream]
}

// member is one Group.Run in a goroutine of the test.
type member struct {
	cancel context.CancelFunc
	done   chan error
}

func startMember(t *testing.T, c *clientv3.Client, prefix, name string, streams []string, run etcd.RunFunc, opts ...etcd.GroupOption) *member {
	t.Helper()
	g, err := etcd.NewGroup(c, name, append([]etcd.GroupOption{etcd.WithTTL(ttl), etcd.WithKeyPrefix(prefix)}, opts...)...)
	if err != nil {
		t.Fatalf("NewGroup() = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &member{cancel: cancel, done: make(chan error, 1)}
	go func() { m.done <- g.Run(ctx, streams, run) }()
	t.Cleanup(func() { m.stop(t) })
	return m
}

// stop cancels the member and waits for its Run; it returns Run's error.
func (m *member) stop(t *testing.T) error {
	t.Helper()
	m.cancel()
	select {
	case err, ok := <-m.done:
		if ok {
			close(m.done)
		}
		return err
	case <-time.After(deadline):
		t.Fatal("Group.Run did not return after its context ended")
		return nil
	}
}

// picked returns the member hrw picks for each stream.
func picked(streams, members []string) map[string]string {
	out := map[string]string{}
	for _, s := range streams {
		out[s], _ = hrw.Pick(s, members)
	}
	return out
}

func keysUnder(t *testing.T, c *clientv3.Client, prefix string) []string {
	t.Helper()
	resp, err := c.Get(ctxFor(t), prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatalf("Get(%s) = %v", prefix, err)
	}
	var keys []string
	for _, kv := range resp.Kvs {
		keys = append(keys, string(kv.Key))
	}
	return keys
}

var streams3 = []string{"s1", "s2", "s3", "s4", "s5", "s6"}

func TestGroupOneMember(t *testing.T) {
	c := newClient(t)
	p := newPrefix(t)
	r := newRecorder(t)
	m := startMember(t, c, p, "a", streams3, r.run("a"), etcd.WithOwnerHook(r.hook))
	r.awaitOwners(picked(streams3, []string{"a"}))
	if err := m.stop(t); !errors.Is(err, context.Canceled) {
		t.Errorf("Run() after cancel = %v, want %v", err, context.Canceled)
	}
	r.awaitOwners(map[string]string{})
	r.mu.Lock()
	events := r.events
	r.mu.Unlock()
	for _, s := range streams3 {
		// Owned in the order offered; released once each at the stop.
		if n := len(slices.DeleteFunc(slices.Clone(events), func(e string) bool { return e != "a released "+s })); n != 1 {
			t.Errorf("owner events %q: %d releases of %s, want 1", events, n, s)
		}
	}
	if want := []string{"a owned s1", "a owned s2", "a owned s3", "a owned s4", "a owned s5", "a owned s6"}; len(events) != 12 || !slices.Equal(want, events[:6]) {
		t.Errorf("owner events = %q, want %q then a release of each", events, want)
	}
	// The lease was revoked: no member key, no owner key is left.
	if keys := keysUnder(t, c, p+"members/"); len(keys) != 0 {
		t.Errorf("member keys after Run returned: %v", keys)
	}
	if keys := keysUnder(t, c, p+"owners/"); len(keys) != 0 {
		t.Errorf("owner keys after Run returned: %v", keys)
	}
}

// TestGroupMoves checks that streams spread over members as rendezvous
// hashing says, that a stream moves only after its run returned, and that a
// member that stops hands its streams back at once.
func TestGroupMoves(t *testing.T) {
	c := newClient(t)
	p := newPrefix(t)
	r := newRecorder(t)
	startMember(t, c, p, "a", streams3, r.run("a"))
	r.awaitOwners(picked(streams3, []string{"a"}))
	b := startMember(t, c, p, "b", streams3, r.run("b"))
	r.awaitOwners(picked(streams3, []string{"a", "b"}))
	startMember(t, c, p, "c", streams3, r.run("c"))
	r.awaitOwners(picked(streams3, []string{"a", "b", "c"}))
	if err := b.stop(t); !errors.Is(err, context.Canceled) {
		t.Errorf("Run() = %v, want %v", err, context.Canceled)
	}
	r.awaitOwners(picked(streams3, []string{"a", "c"}))

	// Every start of a stream after the first follows the stop of its
	// previous run.
	last := map[string]string{}
	for _, e := range r.entries() {
		var verb, who, s string
		fmt.Sscan(e, &verb, &who, &s)
		if verb == "start" && last[s] == "start" {
			t.Errorf("%q follows another start of %s without a stop: %v", e, s, r.entries())
		}
		last[s] = verb
	}
}

// TestGroupOffersDiffer checks that a stream offered by one member only is
// run by it, whatever the hashing says.
func TestGroupOffersDiffer(t *testing.T) {
	c := newClient(t)
	p := newPrefix(t)
	r := newRecorder(t)
	startMember(t, c, p, "a", []string{"shared", "only-a"}, r.run("a"))
	startMember(t, c, p, "b", []string{"shared", "only-b"}, r.run("b"))
	want := picked([]string{"shared"}, []string{"a", "b"})
	want["only-a"], want["only-b"] = "a", "b"
	r.awaitOwners(want)
}

// TestGroupLeaseLost revokes a member's lease behind its back, as its
// expiry would after a long pause: its runs end, its fenced Saves are
// refused, its guard stops, and it joins again with a new lease.
func TestGroupLeaseLost(t *testing.T) {
	c := newClient(t)
	ctx := ctxFor(t)
	p := newPrefix(t)
	r := newRecorder(t)
	startMember(t, c, p, "a", []string{"s"}, r.run("a"), etcd.WithOwnerHook(r.hook))
	r.awaitOwners(map[string]string{"s": "a"})
	o := r.owner("s")
	store, err := etcd.NewOwnerStore(o, etcd.CursorCodec(), etcd.Cursor{})
	if err != nil {
		t.Fatalf("NewOwnerStore() = %v", err)
	}
	if _, err := store.Load(ctx); err != nil {
		t.Fatalf("Load() = %v", err)
	}
	if err := store.Save(ctx, etcd.Cursor{Revision: 3}); err != nil {
		t.Fatalf("Save() as the owner = %v", err)
	}
	if resp, err := c.Get(ctx, p+"cursors/s"); err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("Get(%s) = %v, %v, want the saved cursor", p+"cursors/s", resp, err)
	}
	handled := 0
	guarded := etcd.Guard(o, func(context.Context, int) error { handled++; return nil })
	if err := guarded(ctx, 1); err != nil || handled != 1 {
		t.Fatalf("guarded handler as the owner = %v (handled %d), want nil (1)", err, handled)
	}

	resp, err := c.Get(ctx, p+"members/a")
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("Get(member key) = %v, %v", resp, err)
	}
	if _, err := c.Revoke(ctx, clientv3.LeaseID(resp.Kvs[0].Lease)); err != nil {
		t.Fatalf("Revoke() = %v", err)
	}
	r.await("the member to run the stream again", func(running map[string]string) bool {
		return running["s"] == "a" && r.owners["s"] != o
	})
	r.awaitEvents("a owned s", "a lost s", "a owned s")

	if err := store.Save(ctx, etcd.Cursor{Revision: 4}); !errors.Is(err, etcd.ErrNotOwner) {
		t.Errorf("Save() after the lease was lost = %v, want %v", err, etcd.ErrNotOwner)
	}
	err = guarded(ctx, 2)
	if !errors.Is(err, etcd.ErrNotOwner) || handled != 1 {
		t.Errorf("guarded handler after the lease was lost = %v (handled %d), want %v (1)", err, handled, etcd.ErrNotOwner)
	}
	if d := errclass.Default().Classify(err); d.Action != errclass.Fail {
		t.Errorf("Classify(%v) = %v, want fail", err, d)
	}
	if got, _ := store.Load(ctx); got != (etcd.Cursor{Revision: 3}) {
		t.Errorf("cursor = %v, want %v", got, etcd.Cursor{Revision: 3})
	}
}

// TestGroupMemberDies closes a member's client, so that its lease is no
// longer kept alive: another member takes its streams once the lease
// expired.
func TestGroupMemberDies(t *testing.T) {
	p := newPrefix(t)
	r := newRecorder(t)
	dying, err := server.Client()
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	startMember(t, dying, p, "a", streams3, r.run("a"))
	r.awaitOwners(picked(streams3, []string{"a"}))
	startMember(t, newClient(t), p, "b", streams3, r.run("b"))
	r.awaitOwners(picked(streams3, []string{"a", "b"}))
	dying.Close()
	r.awaitOwners(picked(streams3, []string{"b"}))
}

// TestGroupRestartsReturnedRun checks that a run that returns while its
// member owns the stream is started again.
func TestGroupRestartsReturnedRun(t *testing.T) {
	c := newClient(t)
	var mu sync.Mutex
	runs := 0
	again := make(chan struct{})
	startMember(t, c, newPrefix(t), "a", []string{"s"}, func(ctx context.Context, o *etcd.Owner) error {
		mu.Lock()
		defer mu.Unlock()
		runs++
		if runs == 3 {
			close(again)
		}
		return errors.New("test: the run failed")
	})
	select {
	case <-again:
	case <-time.After(deadline):
		t.Fatal("the run was not started again")
	}
}

func TestGroupRunTwice(t *testing.T) {
	c := newClient(t)
	g, err := etcd.NewGroup(c, "a", etcd.WithKeyPrefix(newPrefix(t)), etcd.WithTTL(ttl))
	if err != nil {
		t.Fatalf("NewGroup() = %v", err)
	}
	started := make(chan struct{})
	ctx, cancel := context.WithCancel(ctxFor(t))
	done := make(chan error, 1)
	go func() {
		done <- g.Run(ctx, []string{"s"}, func(ctx context.Context, _ *etcd.Owner) error {
			close(started)
			<-ctx.Done()
			return nil
		})
	}()
	<-started
	if err := g.Run(ctx, []string{"s"}, func(context.Context, *etcd.Owner) error { return nil }); !errors.Is(err, etcd.ErrAlreadyRunning) {
		t.Errorf("second Run() = %v, want %v", err, etcd.ErrAlreadyRunning)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Run() = %v, want %v", err, context.Canceled)
	}
}

// errReplyLost is what lossyTxn returns after its transaction was applied.
var errReplyLost = errors.New("test: the reply to the transaction was lost")

// lossyKV applies every transaction and then loses its reply, as a client
// whose context ends, or whose connection drops, just after the server
// applied a Txn.
type lossyKV struct{ clientv3.KV }

func (k lossyKV) Txn(ctx context.Context) clientv3.Txn { return lossyTxn{k.KV.Txn(ctx)} }

type lossyTxn struct{ clientv3.Txn }

func (t lossyTxn) If(cs ...clientv3.Cmp) clientv3.Txn   { return lossyTxn{t.Txn.If(cs...)} }
func (t lossyTxn) Then(ops ...clientv3.Op) clientv3.Txn { return lossyTxn{t.Txn.Then(ops...)} }
func (t lossyTxn) Else(ops ...clientv3.Op) clientv3.Txn { return lossyTxn{t.Txn.Else(ops...)} }
func (t lossyTxn) Commit() (*clientv3.TxnResponse, error) {
	if _, err := t.Txn.Commit(); err != nil {
		return nil, err
	}
	return nil, errReplyLost
}

// TestGroupLostRepliesLeaveNoOwnerKey checks that a member every one of
// whose transactions is applied but loses its reply still runs the stream
// it took, and still hands it off: it knows its owner key by its lease.
func TestGroupLostRepliesLeaveNoOwnerKey(t *testing.T) {
	stream := ""
	for _, s := range streams3 {
		if p, _ := hrw.Pick(s, []string{"a", "b"}); p == "b" {
			stream = s
			break
		}
	}
	if stream == "" {
		t.Fatal("no stream of streams3 is picked for b among a and b")
	}
	p := newPrefix(t)
	r := newRecorder(t)
	ca := newClient(t)
	ca.KV = lossyKV{ca.KV} // every Txn of a is applied, and its reply lost
	startMember(t, ca, p, "a", []string{stream}, r.run("a"))
	// No take of a returns success: a runs the stream only by finding its
	// key in the watch, so this wait also shows that the fault fired.
	r.awaitOwners(map[string]string{stream: "a"})
	startMember(t, newClient(t), p, "b", []string{stream}, r.run("b"))
	r.awaitOwners(map[string]string{stream: "b"})
}

// deleteFailsKV fails the first n transactions that delete (a handoff),
// without applying them, as an etcd that cannot be reached for a while.
type deleteFailsKV struct {
	clientv3.KV
	n      int64
	failed *atomic.Int64 // how many failed
}

func (k deleteFailsKV) Txn(ctx context.Context) clientv3.Txn {
	return &deleteFailsTxn{Txn: k.KV.Txn(ctx), kv: k}
}

type deleteFailsTxn struct {
	clientv3.Txn
	kv      deleteFailsKV
	deletes bool
}

func (t *deleteFailsTxn) If(cs ...clientv3.Cmp) clientv3.Txn {
	t.Txn = t.Txn.If(cs...)
	return t
}

func (t *deleteFailsTxn) Then(ops ...clientv3.Op) clientv3.Txn {
	for _, op := range ops {
		t.deletes = t.deletes || op.IsDelete()
	}
	t.Txn = t.Txn.Then(ops...)
	return t
}

func (t *deleteFailsTxn) Else(ops ...clientv3.Op) clientv3.Txn {
	t.Txn = t.Txn.Else(ops...)
	return t
}

func (t *deleteFailsTxn) Commit() (*clientv3.TxnResponse, error) {
	if t.deletes && t.kv.failed.Add(1) <= t.kv.n {
		return nil, errors.New("test: the handoff's transaction failed")
	}
	return t.Txn.Commit()
}

// TestGroupFailedHandoffLeavesNoOwnerKey checks that a member whose
// deletion of its owner key failed at a handoff deletes it later: the
// stream moves to the member picked for it while the first one lives.
func TestGroupFailedHandoffLeavesNoOwnerKey(t *testing.T) {
	stream := ""
	for _, s := range streams3 {
		if p, _ := hrw.Pick(s, []string{"a", "b"}); p == "b" {
			stream = s
			break
		}
	}
	p := newPrefix(t)
	r := newRecorder(t)
	ca := newClient(t)
	failed := new(atomic.Int64)
	ca.KV = deleteFailsKV{KV: ca.KV, n: 2, failed: failed}
	startMember(t, ca, p, "a", []string{stream}, r.run("a"))
	r.awaitOwners(map[string]string{stream: "a"})
	startMember(t, newClient(t), p, "b", []string{stream}, r.run("b"))
	r.awaitOwners(map[string]string{stream: "b"})
	if n := failed.Load(); n < 3 {
		t.Errorf("%d handoff transactions of a were tried, want the 2 that fail and one more", n)
	}
}

// silentLease leaves every lease renewal unanswered, as an etcd that a
// member cannot reach for its renewals; grants and revocations pass.
type silentLease struct {
	clientv3.Lease
	renewals *atomic.Int64 // how many renewals were sent
}

func (l silentLease) KeepAliveOnce(ctx context.Context, _ clientv3.LeaseID) (*clientv3.LeaseKeepAliveResponse, error) {
	l.renewals.Add(1)
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestGroupRenewalsUnanswered checks that a member whose renewals go
// unanswered counts its lease lost once the TTL, counted from the grant,
// ran out (nobody revoked it): its run ends as lost, its guard fails, and
// it joins again with a new lease.
func TestGroupRenewalsUnanswered(t *testing.T) {
	c := newClient(t)
	renewals := new(atomic.Int64)
	c.Lease = silentLease{Lease: c.Lease, renewals: renewals}
	r := newRecorder(t)
	startMember(t, c, newPrefix(t), "a", []string{"s"}, r.run("a"), etcd.WithOwnerHook(r.hook))
	r.awaitOwners(map[string]string{"s": "a"})
	guarded := etcd.Guard(r.owner("s"), func(context.Context, int) error { return nil })
	// Nothing else ends the ownership: the lost event shows the fault fired.
	r.awaitEvents("a owned s", "a lost s", "a owned s")
	if n := renewals.Load(); n == 0 {
		t.Error("no renewal was sent")
	}
	if err := guarded(ctxFor(t), 1); !errors.Is(err, etcd.ErrNotOwner) {
		t.Errorf("guarded handler of the lost ownership = %v, want %v", err, etcd.ErrNotOwner)
	}
}

// TestGuardFailsAfterItsRun checks that a guard fails once the run it was
// made in returned, while the run started again guards its own handler.
func TestGuardFailsAfterItsRun(t *testing.T) {
	type result struct{ old, fresh error }
	results := make(chan result, 1)
	var first func(context.Context, int) error // the first run's guard; the runs of one stream come one after another
	noop := func(context.Context, int) error { return nil }
	startMember(t, newClient(t), newPrefix(t), "a", []string{"s"}, func(ctx context.Context, o *etcd.Owner) error {
		if first == nil {
			first = etcd.Guard(o, noop)
			return errors.New("test: the first run failed")
		}
		results <- result{old: first(ctx, 1), fresh: etcd.Guard(o, noop)(ctx, 2)}
		<-ctx.Done()
		return ctx.Err()
	})
	select {
	case r := <-results:
		if !errors.Is(r.old, etcd.ErrNotOwner) {
			t.Errorf("the first run's guard in the second run = %v, want %v", r.old, etcd.ErrNotOwner)
		}
		if r.fresh != nil {
			t.Errorf("the second run's guard = %v, want nil", r.fresh)
		}
	case <-time.After(deadline):
		t.Fatal("the run was not started again")
	}
}
