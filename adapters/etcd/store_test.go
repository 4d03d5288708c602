package etcd_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/resumable-go/resumable/adapters/etcd"
	"github.com/resumable-go/resumable/adapters/etcd/internal/etcdtest"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/errclass"
	"github.com/resumable-go/resumable/stream"
)

// get returns the value at key, and false when it does not exist.
func get(t *testing.T, c *clientv3.Client, key string) (string, bool) {
	t.Helper()
	resp, err := c.Get(ctxFor(t), key)
	if err != nil {
		t.Fatalf("Get(%s) = %v", key, err)
	}
	if len(resp.Kvs) == 0 {
		return "", false
	}
	return string(resp.Kvs[0].Value), true
}

func newStore(t *testing.T, c *clientv3.Client, key string, opts ...etcd.StoreOption) cursor.Store[etcd.Cursor] {
	t.Helper()
	s, err := etcd.NewStore(c, key, etcd.CursorCodec(), etcd.Cursor{Revision: 7}, opts...)
	if err != nil {
		t.Fatalf("NewStore() = %v", err)
	}
	return s
}

func TestStoreLoadSave(t *testing.T) {
	c := newClient(t)
	ctx := ctxFor(t)
	key := newPrefix(t) + "cursor"
	s := newStore(t, c, key)
	if got, err := s.Load(ctx); err != nil || got != (etcd.Cursor{Revision: 7}) {
		t.Fatalf("Load() of a missing key = %v, %v; want the initial cursor", got, err)
	}
	for _, want := range []etcd.Cursor{{Revision: 9, Index: 2}, {Revision: 9}, {Revision: 12, Index: 1}} {
		if err := s.Save(ctx, want); err != nil {
			t.Fatalf("Save(%v) = %v", want, err)
		}
		got, err := newStore(t, c, key).Load(ctx)
		if err != nil || got != want {
			t.Errorf("Load() after Save(%v) = %v, %v", want, got, err)
		}
	}
	if v, _ := get(t, c, key); v != "{\"revision\":12,\"index\":1}\n" {
		t.Errorf("stored value = %q", v)
	}
}

func TestStoreCorrupt(t *testing.T) {
	c := newClient(t)
	key := newPrefix(t) + "cursor"
	put(t, c, key, "not a cursor")
	_, err := newStore(t, c, key).Load(ctxFor(t))
	if !errors.Is(err, cursor.ErrCorrupt) {
		t.Fatalf("Load() = %v, want %v", err, cursor.ErrCorrupt)
	}
	if d := errclass.Default().Classify(err); d.Action != errclass.Fail {
		t.Errorf("Classify(%v) = %v, want fail", err, d)
	}
}

// TestStoreFence checks that a Save whose fence fails writes nothing and is
// permanent.
func TestStoreFence(t *testing.T) {
	c := newClient(t)
	ctx := ctxFor(t)
	p := newPrefix(t)
	put(t, c, p+"owner", "me")
	resp, err := c.Get(ctx, p+"owner")
	if err != nil {
		t.Fatalf("Get() = %v", err)
	}
	fence := clientv3.Compare(clientv3.CreateRevision(p+"owner"), "=", resp.Kvs[0].CreateRevision)
	s := newStore(t, c, p+"cursor", etcd.WithFence(fence))
	if _, err := s.Load(ctx); err != nil {
		t.Fatalf("Load() = %v", err)
	}
	if err := s.Save(ctx, etcd.Cursor{Revision: 10}); err != nil {
		t.Fatalf("Save() while the fence holds = %v", err)
	}
	if _, err := c.Delete(ctx, p+"owner"); err != nil {
		t.Fatalf("Delete() = %v", err)
	}
	// A successor writes the cursor: the refusal still names the fence.
	if err := newStore(t, c, p+"cursor").Save(ctx, etcd.Cursor{Revision: 20}); err != nil {
		t.Fatalf("successor's Save() = %v", err)
	}
	err = s.Save(ctx, etcd.Cursor{Revision: 11})
	if !errors.Is(err, etcd.ErrNotOwner) {
		t.Fatalf("Save() after the fence failed = %v, want %v", err, etcd.ErrNotOwner)
	}
	if d := errclass.Default().Classify(err); d.Action != errclass.Fail {
		t.Errorf("Classify(%v) = %v, want fail", err, d)
	}
	if got, _ := newStore(t, c, p+"cursor").Load(ctx); got != (etcd.Cursor{Revision: 20}) {
		t.Errorf("cursor after a refused Save = %v, want the successor's %v", got, etcd.Cursor{Revision: 20})
	}
}

// TestStoreChangedUnder checks that a Save does not overwrite a cursor
// written by someone else since the store read it.
func TestStoreChangedUnder(t *testing.T) {
	c := newClient(t)
	ctx := ctxFor(t)
	key := newPrefix(t) + "cursor"
	s := newStore(t, c, key)
	if _, err := s.Load(ctx); err != nil {
		t.Fatalf("Load() = %v", err)
	}
	other := newStore(t, c, key)
	if err := other.Save(ctx, etcd.Cursor{Revision: 50}); err != nil {
		t.Fatalf("other Save() = %v", err)
	}
	err := s.Save(ctx, etcd.Cursor{Revision: 40})
	if !errors.Is(err, etcd.ErrCursorChanged) {
		t.Fatalf("Save() after another writer = %v, want %v", err, etcd.ErrCursorChanged)
	}
	if d := errclass.Default().Classify(err); d.Action != errclass.Fail {
		t.Errorf("Classify(%v) = %v, want fail", err, d)
	}
	if got, _ := newStore(t, c, key).Load(ctx); got != (etcd.Cursor{Revision: 50}) {
		t.Errorf("cursor = %v, want the other writer's %v", got, etcd.Cursor{Revision: 50})
	}
}

// onceLossyKV loses the reply of its first n transactions (they are
// applied), then works.
type onceLossyKV struct {
	clientv3.KV
	n atomic.Int32
}

func (k *onceLossyKV) Txn(ctx context.Context) clientv3.Txn {
	if k.n.Add(-1) >= 0 {
		return lossyTxn{k.KV.Txn(ctx)}
	}
	return k.KV.Txn(ctx)
}

// TestStoreSaveAfterALostReply checks that a Save etcd applied but whose
// reply was lost (its context ended just after) does not make the next Save
// refuse the Store's own write, while a write of someone else still is.
func TestStoreSaveAfterALostReply(t *testing.T) {
	c := newClient(t)
	key := newPrefix(t) + "cursor"
	kv := &onceLossyKV{KV: c.KV}
	kv.n.Store(1)
	s, err := etcd.NewStore[int64](kv, key, cursor.Int64(), 0)
	if err != nil {
		t.Fatalf("NewStore() = %v", err)
	}
	ctx := ctxFor(t)
	if _, err := s.Load(ctx); err != nil {
		t.Fatalf("Load() = %v", err)
	}
	if err := s.Save(ctx, 10); !errors.Is(err, errReplyLost) {
		t.Fatalf("Save(10) = %v, want the lost reply %v", err, errReplyLost)
	}
	if err := s.Save(ctx, 20); err != nil {
		t.Fatalf("Save(20) after a lost reply = %v, want nil", err)
	}
	if got, err := s.Load(ctx); err != nil || got != 20 {
		t.Fatalf("Load() = %d, %v, want 20", got, err)
	}
	put(t, c, key, "99\n") // another writer
	if err := s.Save(ctx, 30); !errors.Is(err, etcd.ErrCursorChanged) {
		t.Errorf("Save(30) after another writer = %v, want %v", err, etcd.ErrCursorChanged)
	}
}

// TestStoreSaveAfterTwoLostReplies checks that a Store recognises its own
// write after two Saves in a row lost their replies, the first one applied
// (the second found the key changed by it): the third Save goes on.
func TestStoreSaveAfterTwoLostReplies(t *testing.T) {
	c := newClient(t)
	key := newPrefix(t) + "cursor"
	kv := &onceLossyKV{KV: c.KV}
	kv.n.Store(2)
	s, err := etcd.NewStore[int64](kv, key, cursor.Int64(), 0)
	if err != nil {
		t.Fatalf("NewStore() = %v", err)
	}
	ctx := ctxFor(t)
	if _, err := s.Load(ctx); err != nil {
		t.Fatalf("Load() = %v", err)
	}
	for _, c := range []int64{10, 20} {
		if err := s.Save(ctx, c); !errors.Is(err, errReplyLost) {
			t.Fatalf("Save(%d) = %v, want the lost reply %v", c, err, errReplyLost)
		}
	}
	if v, _ := get(t, c, key); v != "10\n" {
		t.Fatalf("stored value = %q, want the first lost write's %q", v, "10\n")
	}
	if err := s.Save(ctx, 30); err != nil {
		t.Fatalf("Save(30) after two lost replies = %v, want nil", err)
	}
	if got, err := s.Load(ctx); err != nil || got != 30 {
		t.Fatalf("Load() = %d, %v, want 30", got, err)
	}
}

// switchKV sends every call to the KV in use, which the test switches.
type switchKV struct {
	clientv3.KV
	use atomic.Pointer[clientv3.KV]
}

func (k *switchKV) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	return (*k.use.Load()).Get(ctx, key, opts...)
}

func (k *switchKV) Txn(ctx context.Context) clientv3.Txn { return (*k.use.Load()).Txn(ctx) }

// rewoundKV reports every revision back revisions lower, as a cluster
// wiped and refilled, or restored from an older snapshot, with the same
// cluster ID would.
type rewoundKV struct {
	clientv3.KV
	back int64
}

func (k rewoundKV) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	resp, err := k.KV.Get(ctx, key, opts...)
	if err == nil {
		resp.Header.Revision -= k.back
	}
	return resp, err
}

func (k rewoundKV) Txn(ctx context.Context) clientv3.Txn { return rewoundTxn{k.KV.Txn(ctx), k.back} }

type rewoundTxn struct {
	clientv3.Txn
	back int64
}

func (t rewoundTxn) If(cs ...clientv3.Cmp) clientv3.Txn { return rewoundTxn{t.Txn.If(cs...), t.back} }
func (t rewoundTxn) Then(ops ...clientv3.Op) clientv3.Txn {
	return rewoundTxn{t.Txn.Then(ops...), t.back}
}
func (t rewoundTxn) Else(ops ...clientv3.Op) clientv3.Txn {
	return rewoundTxn{t.Txn.Else(ops...), t.back}
}
func (t rewoundTxn) Commit() (*clientv3.TxnResponse, error) {
	resp, err := t.Txn.Commit()
	if err == nil {
		resp.Header.Revision -= t.back
	}
	return resp, err
}

// TestStoreOtherHistory checks that a Store whose etcd turns out to be
// another history (another cluster, or a revision below one it saw) refuses
// to Load or Save there, permanently, naming what changed.
func TestStoreOtherHistory(t *testing.T) {
	other, err := etcdtest.Start()
	if err != nil {
		t.Fatalf("etcdtest.Start() = %v", err)
	}
	t.Cleanup(other.Close)
	oc, err := other.Client()
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	t.Cleanup(func() { oc.Close() })
	c := newClient(t)

	tests := []struct {
		name string
		then clientv3.KV // what the Store's calls reach after its first Load and Save
		want string      // in the error
	}{
		{name: "another cluster", then: oc.KV, want: "cluster ID was"},
		{name: "revision went back", then: rewoundKV{KV: c.KV, back: 1 << 20}, want: "revision went back"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := ctxFor(t)
			key := newPrefix(t) + "cursor"
			kv := &switchKV{}
			kv.use.Store(&c.KV)
			s, err := etcd.NewStore(kv, key, etcd.CursorCodec(), etcd.Cursor{})
			if err != nil {
				t.Fatalf("NewStore() = %v", err)
			}
			if _, err := s.Load(ctx); err != nil {
				t.Fatalf("Load() = %v", err)
			}
			if err := s.Save(ctx, etcd.Cursor{Revision: 9}); err != nil {
				t.Fatalf("Save() = %v", err)
			}
			kv.use.Store(&tt.then)
			_, loadErr := s.Load(ctx)
			saveErr := s.Save(ctx, etcd.Cursor{Revision: 10})
			for _, err := range []error{loadErr, saveErr} {
				if !errors.Is(err, stream.ErrSourceChanged) || !strings.Contains(err.Error(), tt.want) {
					t.Errorf("Load() or Save() = %v, want an error matching %v that says %q", err, stream.ErrSourceChanged, tt.want)
				}
				if d := errclass.Default().Classify(err); d.Action != errclass.Fail {
					t.Errorf("Classify(%v) = %v, want fail", err, d)
				}
			}
		})
	}
}
