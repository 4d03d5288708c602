package redis_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	goredis "github.com/redis/go-redis/v9"

	"github.com/resumable-go/resumable/adapters/redis"
	"github.com/resumable-go/resumable/backoff"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/internal/testkit/redistest"
	"github.com/resumable-go/resumable/stream"
)

// guard bounds a test that would otherwise hang on a defect; it is never
// a timing assertion.
const guard = 20 * time.Second

// proxied starts a server and a reply-losing proxy in front of it, and
// returns a direct client and one through the proxy (go-redis defaults:
// MaxRetries 3).
func proxied(t *testing.T) (*redistest.Proxy, *goredis.Client, *goredis.Client) {
	t.Helper()
	srv, rdb := server(t)
	px := redistest.NewProxy(t, srv)
	via := goredis.NewClient(&goredis.Options{Addr: px.Addr})
	t.Cleanup(func() { _ = via.Close() })
	return px, rdb, via
}

// quick makes the stream reopen quickly after a failure.
var quick = stream.WithBackoff(backoff.Constant(time.Millisecond))

// TestGroupLostReplyOfNewRead: the reply of a pipelined XREADGROUP > is
// lost after Redis ran it (the entries are in this consumer's pending
// list). go-redis must not retry it blind (the retry finds nothing new);
// the consumer reads its own pending list again and handles every entry.
func TestGroupLostReplyOfNewRead(t *testing.T) {
	px, rdb, via := proxied(t)
	ids := add(t, rdb, "s", 0, 10)
	rdb.XGroupCreate(t.Context(), "s", "g", "0")
	fired := px.CutReply("xreadgroup", "\r\n>\r\n")
	ctx, cancel := context.WithTimeout(t.Context(), guard)
	defer cancel()
	g := newGroup(t, via, "c1")
	r, err := redis.NewGroupResumer(g, fast, quick)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	more := make(chan []string, 1)
	go func() {
		<-fired
		more <- add(t, rdb, "s", 10, 10)
	}()
	err = r.Run(ctx, g.Handler(func(_ context.Context, e redis.Entry) error {
		if !slices.Contains(got, e.ID) {
			got = append(got, e.ID)
		}
		if len(got) == 20 {
			return stream.ErrStop
		}
		return nil
	}))
	select {
	case <-fired:
	default:
		t.Fatal("the proxy never cut a reply")
	}
	want := append(ids, <-more...)
	if err != nil {
		t.Errorf("Run() = %v, want nil", err)
	}
	slices.SortFunc(got, redis.Compare)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("handled (-want +got):\n%s", diff)
	}
}

// largeEntries adds 20 entries of 64 KiB to stream s and has px lose the
// replies of more than three and a half of them, as replies that outlast
// the client's read timeout; it returns their IDs.
func largeEntries(t *testing.T, px *redistest.Proxy, rdb *goredis.Client) []string {
	t.Helper()
	big := strings.Repeat("x", 64<<10)
	var ids []string
	for range 20 {
		id, err := rdb.XAdd(t.Context(), &goredis.XAddArgs{Stream: "s", Values: []string{"v", big}}).Result()
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	px.CutRepliesOver(3*len(big) + len(big)/2)
	return ids
}

// checkLargeEntries checks a run over largeEntries: a reply was lost, Run
// returned nil, and got (the IDs handled, in order) is ids.
func checkLargeEntries(t *testing.T, px *redistest.Proxy, err error, ids, got []string) {
	t.Helper()
	if px.CutOver() == 0 {
		t.Fatal("the proxy cut no reply")
	}
	if err != nil {
		t.Errorf("Run() = %v, want nil", err)
	}
	if diff := cmp.Diff(ids, got); diff != "" {
		t.Errorf("handled (-want +got):\n%s", diff)
	}
}

// TestGroupLargeEntries: replies of more than three entries are lost (as
// a reply that outlasts the client's read timeout). After a failed read
// the consumer reads one entry at a time, then more, and handles every
// entry.
func TestGroupLargeEntries(t *testing.T) {
	px, rdb, via := proxied(t)
	ids := largeEntries(t, px, rdb)
	ctx, cancel := context.WithTimeout(t.Context(), guard)
	defer cancel()
	g := newGroup(t, via, "c1")
	r, err := redis.NewGroupResumer(g, fast, quick)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	err = r.Run(ctx, g.Handler(func(_ context.Context, e redis.Entry) error {
		if !slices.Contains(got, e.ID) {
			got = append(got, e.ID)
		}
		if len(got) == len(ids) {
			return stream.ErrStop
		}
		return nil
	}))
	slices.SortFunc(got, redis.Compare)
	checkLargeEntries(t, px, err, ids, got)
}

// TestSourceLargeEntries: replies of more than three entries are lost (as
// a reply that outlasts the client's read timeout). After a failed read
// the Source reads one entry at a time, then more, and hands over every
// entry once, in order; with WithCount as without.
func TestSourceLargeEntries(t *testing.T) {
	for _, tt := range []struct {
		name string
		opts []redis.Option
	}{
		{name: "default"},
		{name: "WithCount(10)", opts: []redis.Option{redis.WithCount(10)}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			px, rdb, via := proxied(t)
			ids := largeEntries(t, px, rdb)
			ctx, cancel := context.WithTimeout(t.Context(), guard)
			defer cancel()
			src, err := redis.NewSource(via, "s", tt.opts...)
			if err != nil {
				t.Fatal(err)
			}
			r, err := redis.NewResumer(src, cursor.NewMemory(""), quick)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			err = r.Run(ctx, func(_ context.Context, e redis.Entry) error {
				got = append(got, e.ID)
				if len(got) == len(ids) {
					return stream.ErrStop
				}
				return nil
			})
			checkLargeEntries(t, px, err, ids, got)
		})
	}
}
