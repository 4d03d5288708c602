package redis_test

import (
	"context"
	"errors"
	"slices"
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
// the claim clock while the survivor works through a backlog, not after
// it.
func TestGroupClaimsBehindABacklog(t *testing.T) {
	_, rdb := server(t)
	ctx := t.Context()
	rdb.XGroupCreateMkStream(ctx, "s", "g", "0")
	dead := add(t, rdb, "s", 0, 5)
	if err := rdb.XReadGroup(ctx, &goredis.XReadGroupArgs{Group: "g", Consumer: "dead", Streams: []string{"s", ">"}, Count: 5, Block: -1}).Err(); err != nil {
		t.Fatal(err)
	}
	backlog := add(t, rdb, "s", 5, 300)
	const idle = 200 * time.Millisecond
	g := newGroup(t, rdb, "alive", redis.WithClaimIdle(idle), redis.WithCount(10))
	var mu sync.Mutex
	var order []string
	// Claims run when the reader reads: a small window keeps it from
	// reading the whole backlog ahead while the first call waits.
	got, err := handleUntil(t, g, len(dead)+len(backlog), func(e redis.Entry) error {
		if e.ID == backlog[0] {
			awaitIdle(t, rdb, "dead", idle)
		}
		mu.Lock()
		order = append(order, e.ID)
		mu.Unlock()
		return nil
	}, stream.WithConcurrency(2), stream.WithWindow(10))
	if err != nil {
		t.Fatalf("Run() = %v, want nil", err)
	}
	_ = got
	last := slices.Index(order, dead[len(dead)-1])
	if last < 0 || last > len(order)/2 {
		t.Errorf("the dead consumer's last entry was handled %d of %d: after the backlog, not on the claim clock", last+1, len(order))
	}
}

// awaitIdle polls until every entry pending for consumer was idle for at
// least d.
func awaitIdle(t *testing.T, rdb *goredis.Client, consumer string, d time.Duration) {
	t.Helper()
	end := time.Now().Add(guard)
	for {
		p, err := rdb.XPendingExt(context.Background(), &goredis.XPendingExtArgs{Stream: "s", Group: "g", Start: "-", End: "+", Count: 100, Consumer: consumer}).Result()
		if err != nil {
			t.Fatal(err)
		}
		ok := len(p) > 0
		for _, x := range p {
			ok = ok && x.Idle >= d
		}
		if ok {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("entries of %s not idle for %v after %v: %v", consumer, d, guard, p)
		}
		time.Sleep(10 * time.Millisecond) // polling, bounded by guard
	}
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
