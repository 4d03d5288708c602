package redis_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	goredis "github.com/redis/go-redis/v9"

	"github.com/resumable-go/resumable/adapters/redis"
	"github.com/resumable-go/resumable/backoff"
	"github.com/resumable-go/resumable/errclass"
	"github.com/resumable-go/resumable/stream"
)

// fast makes handler retries quick for tests.
var fast = stream.WithHandlerRetry(100, backoff.Constant(time.Millisecond))

func newGroup(t *testing.T, rdb *goredis.Client, consumer string, opts ...redis.Option) *redis.Group {
	t.Helper()
	g, err := redis.NewGroup(rdb, "s", "g", consumer, append([]redis.Option{redis.WithBlock(20 * time.Millisecond)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// pending returns the group's pending count per consumer.
func pending(t *testing.T, g *redis.Group) map[string]int64 {
	t.Helper()
	p, err := g.Pending(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// handleUntil runs a Resumer over g until n distinct entries were handled
// by h (nil: succeed), and returns the IDs in the order handled.
func handleUntil(t *testing.T, g *redis.Group, n int, h func(redis.Entry) error, opts ...stream.Option) ([]string, error) {
	t.Helper()
	r, err := redis.NewGroupResumer(g, append([]stream.Option{fast}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []string
	seen := map[string]bool{}
	err = r.Run(t.Context(), g.Handler(func(_ context.Context, e redis.Entry) error {
		if h != nil {
			if err := h(e); err != nil {
				return err
			}
		}
		mu.Lock()
		defer mu.Unlock()
		got = append(got, e.ID)
		seen[e.ID] = true
		if len(seen) == n {
			return stream.ErrStop
		}
		return nil
	}))
	return got, err
}

func TestGroupCreatesAndAcknowledges(t *testing.T) {
	_, rdb := server(t)
	ids := add(t, rdb, "s", 0, 25)
	g := newGroup(t, rdb, "c1", redis.WithCount(10))
	got, err := handleUntil(t, g, 25, nil)
	if err != nil {
		t.Fatalf("Run() = %v, want nil", err)
	}
	if diff := cmp.Diff(ids, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if p := pending(t, g); len(p) != 0 {
		t.Errorf("pending after Run = %v, want none", p)
	}
}

// TestGroupCreatesStream: neither stream nor group exist: both are made,
// at the stream's start.
func TestGroupCreatesStream(t *testing.T) {
	_, rdb := server(t)
	g := newGroup(t, rdb, "c1")
	var wg sync.WaitGroup
	var ids []string
	wg.Go(func() {
		awaitBlocked(t, rdb, "xreadgroup")
		ids = add(t, rdb, "s", 0, 3)
	})
	got, err := handleUntil(t, g, 3, nil)
	wg.Wait()
	if err != nil {
		t.Fatalf("Run() = %v, want nil", err)
	}
	if diff := cmp.Diff(ids, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestGroupPendingFirst: entries a consumer read and never acknowledged
// (it died) come first when it starts again under its name, with their
// delivery count: 1, since no handler call on them was recorded.
func TestGroupPendingFirst(t *testing.T) {
	_, rdb := server(t)
	ids := add(t, rdb, "s", 0, 6)
	ctx := t.Context()
	rdb.XGroupCreate(ctx, "s", "g", "0")
	if err := rdb.XReadGroup(ctx, &goredis.XReadGroupArgs{Group: "g", Consumer: "c1", Streams: []string{"s", ">"}, Count: 3, Block: -1}).Err(); err != nil {
		t.Fatal(err)
	}
	more := add(t, rdb, "s", 6, 2)
	g := newGroup(t, rdb, "c1")
	var deliveries []int64
	got, err := handleUntil(t, g, 8, func(e redis.Entry) error {
		deliveries = append(deliveries, e.Deliveries)
		return nil
	})
	if err != nil {
		t.Fatalf("Run() = %v, want nil", err)
	}
	want := append(slices.Clone(ids), more...)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int64{1, 1, 1, 1, 1, 1, 1, 1}, deliveries); diff != "" {
		t.Errorf("deliveries (-want +got):\n%s", diff)
	}
	if p := pending(t, g); len(p) != 0 {
		t.Errorf("pending = %v, want none", p)
	}
}

// TestGroupClaimsFromDeadConsumer: entries idle in another consumer's
// pending list are claimed and handled; a claim is no handler call, so
// their delivery count stays 1.
func TestGroupClaimsFromDeadConsumer(t *testing.T) {
	_, rdb := server(t)
	ids := add(t, rdb, "s", 0, 5)
	ctx := t.Context()
	rdb.XGroupCreate(ctx, "s", "g", "0")
	if err := rdb.XReadGroup(ctx, &goredis.XReadGroupArgs{Group: "g", Consumer: "dead", Streams: []string{"s", ">"}, Count: 5, Block: -1}).Err(); err != nil {
		t.Fatal(err)
	}
	g := newGroup(t, rdb, "alive", redis.WithClaimIdle(time.Millisecond))
	var deliveries []int64
	got, err := handleUntil(t, g, 5, func(e redis.Entry) error {
		deliveries = append(deliveries, e.Deliveries)
		return nil
	})
	if err != nil {
		t.Fatalf("Run() = %v, want nil", err)
	}
	if diff := cmp.Diff(ids, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int64{1, 1, 1, 1, 1}, deliveries); diff != "" {
		t.Errorf("deliveries (-want +got):\n%s", diff)
	}
	if p := pending(t, g); len(p) != 0 {
		t.Errorf("pending = %v, want none", p)
	}
}

// TestGroupPoison: an entry that always fails is handed to the handler
// exactly the delivery limit times, parked, acknowledged; the others are
// handled.
func TestGroupPoison(t *testing.T) {
	_, rdb := server(t)
	ctx := t.Context()
	ids := add(t, rdb, "s", 0, 2)
	poison, _ := rdb.XAdd(ctx, &goredis.XAddArgs{Stream: "s", Values: []string{"poison", "1"}}).Result()
	ids = append(ids, add(t, rdb, "s", 2, 2)...)
	g := newGroup(t, rdb, "c1", redis.WithMaxDeliveries(3))
	calls := 0
	var parked []error
	got, err := handleUntil(t, g, 4, func(e redis.Entry) error {
		if e.Values["poison"] == "1" {
			calls++
			return errors.New("poison")
		}
		return nil
	}, stream.WithDeadLetter(func(_ context.Context, e redis.Entry, err error) error {
		parked = append(parked, err)
		return nil
	}))
	if err != nil {
		t.Fatalf("Run() = %v, want nil", err)
	}
	if diff := cmp.Diff(ids, got); diff != "" {
		t.Errorf("handled (-want +got):\n%s", diff)
	}
	if calls != 3 {
		t.Errorf("handler called %d times with the poison entry %s, want 3", calls, poison)
	}
	if len(parked) != 1 || !errors.Is(parked[0], redis.ErrPoison) {
		t.Errorf("parked = %v, want one error matching ErrPoison", parked)
	}
	if p := pending(t, g); len(p) != 0 {
		t.Errorf("pending = %v, want none: the parked entry is acknowledged", p)
	}
	n, _ := rdb.XPendingExt(ctx, &goredis.XPendingExtArgs{Stream: "s", Group: "g", Start: "-", End: "+", Count: 10}).Result()
	if len(n) != 0 {
		t.Errorf("XPENDING = %v", n)
	}
}

// TestGroupPoisonCountSurvivesRestart: handler calls recorded before a
// restart count: an entry whose calls reached the limit is parked without
// a call.
func TestGroupPoisonCountSurvivesRestart(t *testing.T) {
	_, rdb := server(t)
	ctx := t.Context()
	ids := add(t, rdb, "s", 0, 1)
	rdb.XGroupCreate(ctx, "s", "g", "0")
	rdb.XReadGroup(ctx, &goredis.XReadGroupArgs{Group: "g", Consumer: "c1", Streams: []string{"s", ">"}, Block: -1})
	// 3 calls recorded: the delivery count is one more.
	rdb.Do(ctx, "XCLAIM", "s", "g", "c1", 0, ids[0], "RETRYCOUNT", 4, "JUSTID")
	more := add(t, rdb, "s", 1, 1)
	g := newGroup(t, rdb, "c1", redis.WithMaxDeliveries(3))
	var parked []string
	got, err := handleUntil(t, g, 1, func(e redis.Entry) error {
		if e.ID == ids[0] {
			t.Errorf("handler called with %s after 3 calls, the limit", e.ID)
		}
		return nil
	}, stream.WithDeadLetter(func(_ context.Context, e redis.Entry, err error) error {
		parked = append(parked, e.ID)
		return nil
	}))
	if err != nil {
		t.Fatalf("Run() = %v, want nil", err)
	}
	if diff := cmp.Diff(more, got); diff != "" {
		t.Errorf("handled (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(ids, parked); diff != "" {
		t.Errorf("parked (-want +got):\n%s", diff)
	}
}

// TestGroupPoisonWithoutDeadLetter: no dead letter: Run ends with the
// error and the entry stays pending; never dropped.
func TestGroupPoisonWithoutDeadLetter(t *testing.T) {
	_, rdb := server(t)
	add(t, rdb, "s", 0, 1)
	g := newGroup(t, rdb, "c1", redis.WithMaxDeliveries(2))
	_, err := handleUntil(t, g, 1, func(redis.Entry) error { return errors.New("poison") })
	if !errors.Is(err, redis.ErrPoison) {
		t.Fatalf("Run() = %v, want ErrPoison", err)
	}
	if diff := cmp.Diff(map[string]int64{"c1": 1}, pending(t, g)); diff != "" {
		t.Errorf("pending (-want +got):\n%s", diff)
	}
}

func TestGroupChanged(t *testing.T) {
	tests := []struct {
		name   string
		change func(t *testing.T, rdb *goredis.Client)
	}{
		{name: "stream deleted", change: func(t *testing.T, rdb *goredis.Client) { rdb.Del(context.Background(), "s") }},
		{name: "flushed", change: func(t *testing.T, rdb *goredis.Client) { rdb.FlushAll(context.Background()) }},
		{name: "group destroyed", change: func(t *testing.T, rdb *goredis.Client) { rdb.XGroupDestroy(context.Background(), "s", "g") }},
		{name: "group recreated at the start", change: func(t *testing.T, rdb *goredis.Client) {
			rdb.XGroupDestroy(context.Background(), "s", "g")
			rdb.XGroupCreate(context.Background(), "s", "g", "0")
		}},
		{name: "group recreated at the end", change: func(t *testing.T, rdb *goredis.Client) {
			rdb.XGroupDestroy(context.Background(), "s", "g")
			rdb.XGroupCreate(context.Background(), "s", "g", "$")
		}},
		{name: "stream deleted and recreated with the group", change: func(t *testing.T, rdb *goredis.Client) {
			rdb.Del(context.Background(), "s")
			rdb.XGroupCreateMkStream(context.Background(), "s", "g", "0")
			add(t, rdb, "s", 100, 20)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, rdb := server(t)
			ids := add(t, rdb, "s", 0, 5)
			g := newGroup(t, rdb, "c1", redis.WithCount(2))
			got, err := handleUntil(t, g, 100, func(e redis.Entry) error {
				if e.ID == ids[4] {
					tt.change(t, rdb)
				}
				return nil
			})
			if !errors.Is(err, stream.ErrSourceChanged) {
				t.Fatalf("Run() = %v, want ErrSourceChanged", err)
			}
			if diff := cmp.Diff(ids, got); diff != "" {
				t.Errorf("handled (-want +got):\n%s", diff)
			}
			n, _ := rdb.Exists(context.Background(), "s").Result()
			groups, _ := rdb.XInfoGroups(context.Background(), "s").Result()
			if tt.name != "stream deleted and recreated with the group" && tt.name != "group recreated at the start" && tt.name != "group recreated at the end" && (n != 0 && len(groups) != 0) {
				t.Errorf("stream exists %d with groups %v: the group was recreated", n, groups)
			}
		})
	}
}

// TestGroupServerRestarted: Redis restarted without persistence while the
// consumer runs: ErrSourceChanged, and nothing recreated.
func TestGroupServerRestarted(t *testing.T) {
	srv, rdb := server(t)
	ids := add(t, rdb, "s", 0, 3)
	g := newGroup(t, rdb, "c1")
	_, err := handleUntil(t, g, 100, func(e redis.Entry) error {
		if e.ID == ids[2] {
			if err := srv.Restart(); err != nil {
				t.Fatal(err)
			}
		}
		return nil
	})
	if !errors.Is(err, stream.ErrSourceChanged) {
		t.Fatalf("Run() = %v, want ErrSourceChanged", err)
	}
	if n, err := rdb.Exists(context.Background(), "s").Result(); err != nil || n != 0 {
		t.Errorf("EXISTS s = %d, %v; want 0: nothing recreated", n, err)
	}
}

// TestGroupPendingTrimmed: entries pending for the consumer were trimmed
// before they were acknowledged: Expired; after a resync they are
// acknowledged and the stream goes on.
func TestGroupPendingTrimmed(t *testing.T) {
	_, rdb := server(t)
	ctx := t.Context()
	add(t, rdb, "s", 0, 3)
	rdb.XGroupCreate(ctx, "s", "g", "0")
	rdb.XReadGroup(ctx, &goredis.XReadGroupArgs{Group: "g", Consumer: "c1", Streams: []string{"s", ">"}, Block: -1})
	rdb.XTrimMaxLen(ctx, "s", 0)
	more := add(t, rdb, "s", 3, 2)

	g := newGroup(t, rdb, "c1")
	if _, err := handleUntil(t, g, 2, nil); !errors.Is(err, errclass.ErrExpired) || errors.Is(err, stream.ErrSourceChanged) {
		t.Fatalf("Run() = %v, want Expired", err)
	}
	resyncs := 0
	got, err := handleUntil(t, g, 2, nil, stream.WithResync(func(context.Context, error, func(redis.Entry) error) (string, error) {
		resyncs++
		return "", nil
	}))
	if err != nil {
		t.Fatalf("Run() with a resync = %v, want nil", err)
	}
	if diff := cmp.Diff(more, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if resyncs != 1 {
		t.Errorf("resyncs = %d, want 1", resyncs)
	}
	if p := pending(t, g); len(p) != 0 {
		t.Errorf("pending = %v, want none", p)
	}
}

// TestGroupTrimmedPastGroup: entries the group never delivered were
// trimmed: Expired.
func TestGroupTrimmedPastGroup(t *testing.T) {
	_, rdb := server(t)
	ctx := t.Context()
	ids := add(t, rdb, "s", 0, 2)
	g := newGroup(t, rdb, "c1")
	if _, err := handleUntil(t, g, 2, nil); err != nil {
		t.Fatal(err)
	}
	add(t, rdb, "s", 2, 5)
	rdb.XTrimMaxLen(ctx, "s", 2)
	_, err := handleUntil(t, g, 2, nil)
	if !errors.Is(err, errclass.ErrExpired) || errors.Is(err, stream.ErrSourceChanged) {
		t.Fatalf("Run() = %v, want Expired", err)
	}
	_ = ids
}

// TestGroupConcurrencyAcknowledgesAll: with 8 handlers, every entry is
// handled, and once all are committed and Run stopped, all are
// acknowledged.
func TestGroupConcurrencyAcknowledgesAll(t *testing.T) {
	_, rdb := server(t)
	ids := add(t, rdb, "s", 0, 300)
	g := newGroup(t, rdb, "c1", redis.WithCount(32))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	commits := 0
	r, err := redis.NewGroupResumer(g, stream.WithConcurrency(8), stream.WithHooks(stream.Hooks[string]{
		OnCommit: func(stream.CommitEvent[string]) {
			if commits++; commits == len(ids) {
				cancel()
			}
		},
	}))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []string
	err = r.Run(ctx, g.Handler(func(_ context.Context, e redis.Entry) error {
		mu.Lock()
		got = append(got, e.ID)
		mu.Unlock()
		return nil
	}))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run() = %v, want context.Canceled", err)
	}
	slices.SortFunc(got, redis.Compare)
	if diff := cmp.Diff(ids, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if p := pending(t, g); len(p) != 0 {
		t.Errorf("pending = %v, want none", p)
	}
}

// TestGroupAcknowledgesOnlyThePrefix: under WithConcurrency, entries
// handled after an unfinished one are not acknowledged until it finished.
func TestGroupAcknowledgesOnlyThePrefix(t *testing.T) {
	_, rdb := server(t)
	ids := add(t, rdb, "s", 0, 4)
	g := newGroup(t, rdb, "c1")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	release := make(chan struct{})
	later := make(chan string, 3)
	commits := 0
	r, err := redis.NewGroupResumer(g, stream.WithConcurrency(4), stream.WithHooks(stream.Hooks[string]{
		OnCommit: func(stream.CommitEvent[string]) {
			if commits++; commits == len(ids) {
				cancel()
			}
		},
	}))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		done <- r.Run(ctx, g.Handler(func(_ context.Context, e redis.Entry) error {
			if e.ID == ids[0] {
				<-release
				return nil
			}
			later <- e.ID
			return nil
		}))
	}()
	for range 3 {
		<-later
	}
	// The three after the first are handled; the first is not: nothing
	// may be acknowledged.
	if diff := cmp.Diff(map[string]int64{"c1": 4}, pending(t, g)); diff != "" {
		t.Errorf("pending while the first entry is in hand (-want +got):\n%s", diff)
	}
	close(release)
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run() = %v, want context.Canceled", err)
	}
	if p := pending(t, g); len(p) != 0 {
		t.Errorf("pending after the first finished = %v, want none", p)
	}
}
