package etcd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/errclass"
	"github.com/resumable-go/resumable/internal/badarg"
	"github.com/resumable-go/resumable/stream"
)

type kvStore[C any] struct {
	kv      clientv3.KV
	key     string
	codec   cursor.Codec[C]
	initial C
	fence   []clientv3.Cmp
	timeout time.Duration

	mu      sync.Mutex // serialises Saves, so the compare-and-set sees its own writes
	modRev  int64      // the key's mod revision as last read or written; 0: absent
	known   bool       // modRev was read or written
	pending [][]byte   // what Saves that failed since tried to write: etcd may have applied one
	cluster uint64     // the ID of the cluster the replies came from; 0 until the first
	seen    int64      // the highest revision a reply reported
}

// maxPending bounds the failed writes remembered: beyond it, an applied
// one looks like another writer's.
const maxPending = 32

var _ cursor.Store[int] = (*kvStore[int])(nil)

// StoreOption configures [NewStore].
type StoreOption interface {
	applyStore(*storeConfig)
}

type storeConfig struct {
	fence   []clientv3.Cmp
	timeout time.Duration
	errs    []error
}

type storeOptionFunc func(*storeConfig)

func (f storeOptionFunc) applyStore(c *storeConfig) { f(c) }

// WithFence makes every Save conditional on cmps, in the write's
// transaction: a Save whose condition fails writes nothing and returns an
// error matching [ErrNotOwner]. See [Owner.Fence].
func WithFence(cmps ...clientv3.Cmp) StoreOption {
	return storeOptionFunc(func(c *storeConfig) { c.fence = append(c.fence, cmps...) })
}

// WithTimeout bounds each Load and Save by d, on top of its context: the
// etcd client otherwise waits out a network partition. Default: no
// timeout. A negative d makes NewStore fail.
func WithTimeout(d time.Duration) StoreOption {
	return storeOptionFunc(func(c *storeConfig) {
		if d < 0 {
			c.errs = append(c.errs, badarg.New("etcd: WithTimeout", "d", d, "must not be negative"))
			return
		}
		c.timeout = d
	})
}

// NewStore returns a [cursor.Store] that keeps one stream's cursor at key
// through kv, encoded by codec; Load returns initial while the key does not
// exist. It is safe for concurrent use.
//
// Save is a compare-and-set: it writes only if the key was not written
// since the Store read or wrote it ([ErrCursorChanged] otherwise), and only
// if every [WithFence] condition holds ([ErrNotOwner] otherwise); both are
// [errclass.Permanent] and leave the key as it was. A Save that fails
// otherwise is retried by a stream. A reply from another cluster, or with
// a lower revision than seen before, fails with [stream.ErrSourceChanged],
// permanent (a Save may have written by then).
//
// NewStore returns an error matching [stream.ErrInvalidOption] for a nil kv
// or codec, an empty key or a bad option.
func NewStore[C any](kv clientv3.KV, key string, codec cursor.Codec[C], initial C, opts ...StoreOption) (cursor.Store[C], error) {
	var cfg storeConfig
	if kv == nil {
		cfg.errs = append(cfg.errs, badarg.New("etcd: NewStore", "kv", nil, "must not be nil"))
	}
	if codec == nil {
		cfg.errs = append(cfg.errs, badarg.New("etcd: NewStore", "codec", nil, "must not be nil"))
	}
	if key == "" {
		cfg.errs = append(cfg.errs, badarg.New("etcd: NewStore", "key", key, "must not be empty"))
	}
	for _, o := range opts {
		if o != nil {
			o.applyStore(&cfg)
		}
	}
	if len(cfg.errs) > 0 {
		return nil, errors.Join(cfg.errs...)
	}
	return &kvStore[C]{kv: kv, key: key, codec: codec, initial: initial, fence: cfg.fence, timeout: cfg.timeout}, nil
}

func (s *kvStore[C]) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if s.timeout <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, s.timeout)
}

// Load reads the cursor with a linearizable read. A value the codec cannot
// decode gives a permanent error matching [cursor.ErrCorrupt]: repair the
// key, or delete it to start over.
func (s *kvStore[C]) Load(ctx context.Context) (C, error) {
	var zero C
	ctx, cancel := s.bound(ctx)
	defer cancel()
	resp, err := s.kv.Get(ctx, s.key)
	if err != nil {
		return zero, refused(fmt.Errorf("etcd: loading the cursor at %q: %w", s.key, err))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.observe(resp.Header); err != nil {
		return zero, err
	}
	c := s.initial
	var modRev int64
	if len(resp.Kvs) > 0 {
		kv := resp.Kvs[0]
		if c, err = s.codec.Decode(kv.Value); err != nil {
			return zero, errclass.Permanent(&corrupt{
				err: fmt.Errorf("etcd: the cursor key %q holds no cursor at revision %d: %w", s.key, kv.ModRevision, err),
			})
		}
		modRev = kv.ModRevision
	}
	s.modRev, s.known = modRev, true
	return c, nil
}

// Save writes c, fenced and compared (see NewStore); before any Load it
// only checks the fence. A failed Save may have been applied: a later Save
// that finds the key holding what one of the last maxPending failed Saves
// tried to write takes it as its own and goes on.
func (s *kvStore[C]) Save(ctx context.Context, c C) error {
	data, err := s.codec.Encode(c)
	if err != nil {
		return errclass.Permanent(fmt.Errorf("etcd: encoding the cursor for %q: %w", s.key, err))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ctx, cancel := s.bound(ctx)
	defer cancel()
	for {
		now, err := s.save(ctx, data)
		if err == nil || now == nil || !s.wrote(now.Value) {
			return err
		}
		s.modRev, s.pending = now.ModRevision, s.pending[:0] // the lost write was ours
	}
}

func (s *kvStore[C]) wrote(data []byte) bool {
	for _, p := range s.pending {
		if bytes.Equal(p, data) {
			return true
		}
	}
	return false
}

func (s *kvStore[C]) remember(data []byte) {
	if s.wrote(data) {
		return
	}
	if len(s.pending) == maxPending {
		s.pending = append(s.pending[:0], s.pending[1:]...)
	}
	s.pending = append(s.pending, data)
}

// observe checks a reply's header: in one history a linearizable read or a
// write never reports a lower revision or another cluster ID.
func (s *kvStore[C]) observe(h *etcdserverpb.ResponseHeader) error {
	if h == nil {
		return nil
	}
	switch {
	case s.cluster != 0 && h.ClusterId != 0 && h.ClusterId != s.cluster:
		return errclass.Permanent(fmt.Errorf("etcd: cursor key %q: the cluster ID was %x, now %x: %w",
			s.key, s.cluster, h.ClusterId, stream.ErrSourceChanged))
	case h.Revision < s.seen:
		return errclass.Permanent(fmt.Errorf("etcd: cursor key %q: the revision went back from %d to %d: %w",
			s.key, s.seen, h.Revision, stream.ErrSourceChanged))
	}
	if s.cluster == 0 {
		s.cluster = h.ClusterId
	}
	s.seen = max(s.seen, h.Revision)
	return nil
}

// save tries one compare-and-set; on a changed key it returns the key now.
func (s *kvStore[C]) save(ctx context.Context, data []byte) (*mvccpb.KeyValue, error) {
	// The fence guards a compare-and-set of the key: a failed fence shows
	// as the outer transaction failing, a changed key as the inner one.
	put := clientv3.OpPut(s.key, string(data))
	if s.known {
		put = clientv3.OpTxn(
			[]clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(s.key), "=", s.modRev)},
			[]clientv3.Op{put},
			[]clientv3.Op{clientv3.OpGet(s.key)})
	}
	resp, err := s.kv.Txn(ctx).If(s.fence...).Then(put).Commit()
	if err != nil {
		s.remember(data) // applied or not: a later Save finds out
		return nil, refused(fmt.Errorf("etcd: saving the cursor at %q: %w", s.key, err))
	}
	if err := s.observe(resp.Header); err != nil {
		return nil, err
	}
	if !resp.Succeeded {
		return nil, errclass.Permanent(fmt.Errorf("%w: save to %q refused: the fence failed at revision %d", ErrNotOwner, s.key, resp.Header.Revision))
	}
	if inner := resp.Responses[0].GetResponseTxn(); inner != nil && !inner.Succeeded {
		var now *mvccpb.KeyValue
		var rev int64
		if r := inner.Responses[0].GetResponseRange(); r != nil && len(r.Kvs) > 0 {
			now, rev = r.Kvs[0], r.Kvs[0].ModRevision
		}
		return now, errclass.Permanent(fmt.Errorf("%w: save to %q refused: written at revision %d, after revision %d which this store last saw",
			ErrCursorChanged, s.key, rev, s.modRev))
	}
	s.modRev, s.known, s.pending = resp.Header.Revision, true, s.pending[:0]
	return nil, nil
}

// NewOwnerStore returns the [cursor.Store] ([NewStore]) of the stream o
// owns, at the group's prefix + "cursors/" + its name, every Save fenced by
// [Owner.Fence]: once the stream has a new owner no Save of this one lands.
// It returns an error matching [stream.ErrInvalidOption] for a nil o or
// codec.
func NewOwnerStore[C any](o *Owner, codec cursor.Codec[C], initial C) (cursor.Store[C], error) {
	var errs []error
	if o == nil {
		errs = append(errs, badarg.New("etcd: NewOwnerStore", "o", nil, "must not be nil"))
	}
	if codec == nil {
		errs = append(errs, badarg.New("etcd: NewOwnerStore", "codec", nil, "must not be nil"))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return NewStore(o.m.client, o.m.prefix+"cursors/"+o.stream, codec, initial, WithFence(o.Fence()))
}
