package redis_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	goredis "github.com/redis/go-redis/v9"

	"github.com/resumable-go/resumable/adapters/redis"
	"github.com/resumable-go/resumable/errclass"
	"github.com/resumable-go/resumable/stream"
)

// TestGroupCrashLoopParksOnlyThePoison: one entry's handler call kills
// the process (here: ends its context), life after life. The entries
// behind it are read again at every start but never reach the handler:
// they must not count, so only the poison entry is parked, and every
// other entry is then handled.
func TestGroupCrashLoopParksOnlyThePoison(t *testing.T) {
	_, rdb := server(t)
	ids := add(t, rdb, "s", 0, 10)
	poison := ids[0]
	const limit = 3
	var calls int
	var parked, handled []string
	done := func() bool { return len(parked)+len(handled) == len(ids) }
	for life := 0; life < 2*limit+2 && !done(); life++ {
		ctx, cancel := context.WithTimeout(t.Context(), guard)
		g := newGroup(t, rdb, "c1", redis.WithMaxDeliveries(limit), redis.WithCount(4))
		r, err := redis.NewGroupResumer(g, fast, stream.WithDeadLetter(func(_ context.Context, e redis.Entry, _ error) error {
			parked = append(parked, e.ID)
			if done() {
				cancel()
			}
			return nil
		}))
		if err != nil {
			t.Fatal(err)
		}
		err = r.Run(ctx, g.Handler(func(ctx context.Context, e redis.Entry) error {
			if e.ID == poison {
				calls++
				cancel() // the process dies in the call
				return ctx.Err()
			}
			handled = append(handled, e.ID)
			if done() {
				return stream.ErrStop
			}
			return nil
		}))
		cancel()
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("Run() = %v, want nil or context.Canceled", err)
		}
	}
	if diff := cmp.Diff([]string{poison}, parked); diff != "" {
		t.Errorf("parked (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(ids[1:], handled); diff != "" {
		t.Errorf("handled (-want +got):\n%s", diff)
	}
	// The first call, right after the entry was read as new, is not
	// recorded: one more than the limit.
	if calls != limit+1 {
		t.Errorf("calls with the poison entry = %d, want %d", calls, limit+1)
	}
}

// TestGroupTransientFailuresDoNotCount: a handler error marked
// errclass.RetryAfter (a downstream outage) is retried in place, with the
// group's defaults, for as long as it lasts, and never parks the entry.
func TestGroupTransientFailuresDoNotCount(t *testing.T) {
	_, rdb := server(t)
	ids := add(t, rdb, "s", 0, 3)
	g := newGroup(t, rdb, "c1", redis.WithMaxDeliveries(2))
	ctx, cancel := context.WithTimeout(t.Context(), guard)
	defer cancel()
	var parked, handled []string
	r, err := redis.NewGroupResumer(g, stream.WithDeadLetter(func(_ context.Context, e redis.Entry, err error) error {
		parked = append(parked, e.ID)
		if len(parked)+len(handled) == len(ids) {
			cancel()
		}
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	outage := 8
	err = r.Run(ctx, g.Handler(func(_ context.Context, e redis.Entry) error {
		if outage > 0 {
			outage--
			return errclass.RetryAfter(errors.New("downstream unavailable"), 0)
		}
		handled = append(handled, e.ID)
		if len(parked)+len(handled) == len(ids) {
			return stream.ErrStop
		}
		return nil
	}))
	if err != nil {
		t.Errorf("Run() = %v, want nil", err)
	}
	if len(parked) != 0 {
		t.Errorf("parked %v, want none", parked)
	}
	if diff := cmp.Diff(ids, handled); diff != "" {
		t.Errorf("handled (-want +got):\n%s", diff)
	}
}

// TestGroupClaimsBehindABacklog: a dead consumer's entries are claimed on
// the claim clock while the survivor works through a backlog that never
// runs dry (each entry handled adds one), not only after a read finds
// nothing new: were claims to wait for the end of the backlog, they would
// never come, and Run would hit the guard.
func TestGroupClaimsBehindABacklog(t *testing.T) {
	_, rdb := server(t)
	rdb.XGroupCreateMkStream(t.Context(), "s", "g", "0")
	dead := add(t, rdb, "s", 0, 5)
	if err := rdb.XReadGroup(t.Context(), &goredis.XReadGroupArgs{Group: "g", Consumer: "dead", Streams: []string{"s", ">"}, Count: 5, Block: -1}).Err(); err != nil {
		t.Fatal(err)
	}
	add(t, rdb, "s", 5, 300)
	const idle = 200 * time.Millisecond
	g := newGroup(t, rdb, "alive", redis.WithClaimIdle(idle), redis.WithCount(10))
	r, err := redis.NewGroupResumer(g, fast, stream.WithConcurrency(2), stream.WithWindow(10))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), guard) // a guard against a hang, not a timing check
	defer cancel()
	var mu sync.Mutex
	left := map[string]bool{}
	for _, id := range dead {
		left[id] = true
	}
	handled := 0
	err = r.Run(ctx, g.Handler(func(ctx context.Context, e redis.Entry) error {
		mu.Lock()
		defer mu.Unlock()
		handled++
		delete(left, e.ID)
		if len(left) == 0 {
			return stream.ErrStop
		}
		// One more entry for each handled: the reader never finds the
		// stream read to its end.
		return rdb.XAdd(ctx, &goredis.XAddArgs{Stream: "s", Values: map[string]any{"n": "more"}}).Err()
	}))
	if err != nil {
		t.Fatalf("Run() = %v after %d entries, the dead consumer's %v still unhandled; want nil: claimed behind the backlog", err, handled, left)
	}
	lag, err := rdb.XInfoGroups(t.Context(), "s").Result()
	if err != nil || len(lag) != 1 {
		t.Fatalf("XINFO GROUPS = %v, %v", lag, err)
	}
	if lag[0].Lag == 0 {
		t.Errorf("group lag = 0 when the dead consumer's entries were handled, want the backlog still unread")
	}
	t.Logf("the dead consumer's entries were handled after %d entries, with %d unread", handled, lag[0].Lag)
}

// TestGroupKeepsEntriesInHand: entries a live consumer read and is
// handling (slowly) are never claimed by another consumer, however long
// they wait: the claim idle time bounds only a dead consumer's entries.
func TestGroupKeepsEntriesInHand(t *testing.T) {
	_, rdb := server(t)
	ids := add(t, rdb, "s", 0, 4)
	const idle = 500 * time.Millisecond
	slow := newGroup(t, rdb, "slow", redis.WithClaimIdle(idle))
	other := newGroup(t, rdb, "other", redis.WithClaimIdle(idle))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var stolen atomic.Int64
	var wg sync.WaitGroup
	started := make(chan struct{})
	wg.Go(func() {
		<-started
		r, err := redis.NewGroupResumer(other)
		if err != nil {
			t.Error(err)
			return
		}
		_ = r.Run(ctx, other.Handler(func(context.Context, redis.Entry) error {
			stolen.Add(1)
			return nil
		}))
	})
	r, err := redis.NewGroupResumer(slow)
	if err != nil {
		t.Fatal(err)
	}
	var handled []string
	err = r.Run(ctx, slow.Handler(func(_ context.Context, e redis.Entry) error {
		if e.ID == ids[0] {
			close(started)
		}
		// Each call holds its entry, and the entries behind it wait,
		// longer than the claim idle time.
		time.Sleep(idle) // the scenario: a slow handler
		handled = append(handled, e.ID)
		if len(handled) == len(ids) {
			return stream.ErrStop
		}
		return nil
	}))
	cancel()
	wg.Wait()
	if err != nil {
		t.Fatalf("Run() = %v, want nil", err)
	}
	if diff := cmp.Diff(ids, handled); diff != "" {
		t.Errorf("handled (-want +got):\n%s", diff)
	}
	if n := stolen.Load(); n != 0 {
		t.Errorf("another consumer handled %d entries in the hands of a live one", n)
	}
}
