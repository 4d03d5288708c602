package redis_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/resumable-go/resumable/adapters/redis"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/errclass"
)

// newStore returns a Store of the string cursor at key, initial "".
func newStore(t *testing.T, rdb goredis.UniversalClient, key string) *redis.Store[string] {
	t.Helper()
	s, err := redis.NewStore(rdb, key, cursor.String(), "")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// wantChanged fails t unless err matches redis.ErrCursorChanged and is
// marked errclass.Permanent.
func wantChanged(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, redis.ErrCursorChanged) {
		t.Fatalf("%s = %v, want an error matching ErrCursorChanged", what, err)
	}
	if !permanent(err) {
		t.Errorf("%s = %v, not marked Permanent", what, err)
	}
}

// permanent reports whether the stream fails on err at once.
func permanent(err error) bool { return errclass.Default().Classify(err).Action == errclass.Fail }

// TestStoreLoadSave: a fresh key loads the initial cursor; a Save is what
// the next Store of the key loads.
func TestStoreLoadSave(t *testing.T) {
	_, rdb := server(t)
	ctx := t.Context()
	a, err := redis.NewStore(rdb, "cur", cursor.JSON[[]int](), []int{7})
	if err != nil {
		t.Fatal(err)
	}
	if c, err := a.Load(ctx); err != nil || len(c) != 1 || c[0] != 7 {
		t.Fatalf("Load() = %v, %v, want [7], nil", c, err)
	}
	if err := a.Save(ctx, []int{1, 2}); err != nil {
		t.Fatal(err)
	}
	b, _ := redis.NewStore(rdb, "cur", cursor.JSON[[]int](), nil)
	if c, err := b.Load(ctx); err != nil || len(c) != 2 || c[1] != 2 {
		t.Fatalf("Load() = %v, %v, want [1 2], nil", c, err)
	}
}

// TestStoreFencesPredecessor: once a second Store loaded the key, every
// Save of the first fails with ErrCursorChanged, marked Permanent, and
// writes nothing; the second's Saves go on.
func TestStoreFencesPredecessor(t *testing.T) {
	_, rdb := server(t)
	ctx := t.Context()
	a, b := newStore(t, rdb, "cur"), newStore(t, rdb, "cur")
	if _, err := a.Load(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Save(ctx, "1-0"); err != nil {
		t.Fatal(err)
	}
	if c, err := b.Load(ctx); err != nil || c != "1-0" {
		t.Fatalf("Load() = %q, %v, want 1-0, nil", c, err)
	}
	wantChanged(t, "predecessor's Save()", a.Save(ctx, "2-0"))
	// cursor.String's encoding ends in a newline.
	if got := rdb.HGet(ctx, "cur", "cursor").Val(); got != "1-0\n" {
		t.Fatalf("cursor = %q after a refused Save, want 1-0", got)
	}
	if err := b.Save(ctx, "3-0"); err != nil {
		t.Fatalf("successor's Save() = %v", err)
	}
	wantChanged(t, "predecessor's second Save()", a.Save(ctx, "4-0"))
	if got := rdb.HGet(ctx, "cur", "cursor").Val(); got != "3-0\n" {
		t.Fatalf("cursor = %q, want 3-0", got)
	}
}

// TestStoreFencedByFlush: a key that vanished (FLUSHALL, a restart
// without persistence) is no longer the Store's: its Save fails rather
// than writing a cursor into an empty server.
func TestStoreFencedByFlush(t *testing.T) {
	_, rdb := server(t)
	ctx := t.Context()
	a := newStore(t, rdb, "cur")
	if _, err := a.Load(ctx); err != nil {
		t.Fatal(err)
	}
	rdb.FlushAll(ctx)
	wantChanged(t, "Save() after FLUSHALL", a.Save(ctx, "1-0"))
	if n := rdb.Exists(ctx, "cur").Val(); n != 0 {
		t.Fatalf("EXISTS cur = %d after a refused Save, want 0", n)
	}
}

// TestStoreSaveBeforeLoad: a Save before any Load takes the key over.
func TestStoreSaveBeforeLoad(t *testing.T) {
	_, rdb := server(t)
	ctx := t.Context()
	a, b := newStore(t, rdb, "cur"), newStore(t, rdb, "cur")
	if _, err := a.Load(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Save(ctx, "5-0"); err != nil {
		t.Fatal(err)
	}
	wantChanged(t, "Save() of the Store b took over", a.Save(ctx, "6-0"))
}

// counter counts the commands a client sends.
type counter struct{ n atomic.Int64 }

func (c *counter) DialHook(next goredis.DialHook) goredis.DialHook { return next }
func (c *counter) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}
func (c *counter) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		c.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// TestStoreSaveOfHeldCursor: a Save of the cursor the Store wrote last
// sends nothing.
func TestStoreSaveOfHeldCursor(t *testing.T) {
	_, rdb := server(t)
	ctx := t.Context()
	var cnt counter
	rdb.AddHook(&cnt)
	s := newStore(t, rdb, "cur")
	if err := s.Save(ctx, "1-0"); err != nil {
		t.Fatal(err)
	}
	before := cnt.n.Load()
	if before == 0 {
		t.Fatal("the hook counted no command")
	}
	if err := s.Save(ctx, "1-0"); err != nil {
		t.Fatal(err)
	}
	if n := cnt.n.Load() - before; n != 0 {
		t.Errorf("a Save of the held cursor sent %d commands, want 0", n)
	}
}

// TestStoreBadData: a cursor the codec cannot decode, and a key of
// another type, are Permanent errors.
func TestStoreBadData(t *testing.T) {
	_, rdb := server(t)
	ctx := t.Context()
	rdb.HSet(ctx, "garbled", "cursor", "not json")
	rdb.Set(ctx, "str", "x", 0)
	for _, key := range []string{"garbled", "str"} {
		s, _ := redis.NewStore(rdb, key, cursor.JSON[[]int](), nil)
		if _, err := s.Load(ctx); err == nil || !permanent(err) {
			t.Errorf("Load() of %s = %v, want a Permanent error", key, err)
		}
	}
}
