package integration_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/resumable-go/resumable/adapters/etcd"
	"github.com/resumable-go/resumable/adapters/etcd/internal/cluster"
	"github.com/resumable-go/resumable/adapters/etcd/internal/hrw"
)

// hookLog records the owner events of one member.
type hookLog struct {
	mu      sync.Mutex
	events  []etcd.OwnerEvent
	changed chan struct{}
}

func newHookLog() *hookLog { return &hookLog{changed: make(chan struct{})} }

func (h *hookLog) hook(e etcd.OwnerEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events = append(h.events, e)
	close(h.changed)
	h.changed = make(chan struct{})
}

// await waits until the member reported at least n events, and returns
// them as lines: "MEMBER owned STREAM", "... released STREAM", "... lost
// STREAM". A lost event's error must match etcd.ErrNotOwner.
func (h *hookLog) await(t *testing.T, n int) []string {
	t.Helper()
	timeout := time.After(deadline)
	for {
		h.mu.Lock()
		events, changed := h.events, h.changed
		h.mu.Unlock()
		if len(events) >= n {
			var out []string
			for _, e := range events {
				verb := "owned"
				switch {
				case e.Owned && e.Err != nil:
					t.Errorf("event %+v: owned with an error", e)
				case e.Err != nil && !errors.Is(e.Err, etcd.ErrNotOwner):
					t.Errorf("lost event's error %v does not match %v", e.Err, etcd.ErrNotOwner)
				case e.Err != nil:
					verb = "lost"
				case !e.Owned:
					verb = "released"
				}
				out = append(out, e.Member+" "+verb+" "+e.Stream)
			}
			return out
		}
		select {
		case <-changed:
		case <-timeout:
			t.Fatalf("%d owner events, want %d: %v", len(events), n, events)
		}
	}
}

// hookMember runs a Group member in the test's process until stop.
type hookMember struct {
	log    *hookLog
	cancel context.CancelFunc
	done   chan error
}

func startHookMember(t *testing.T, c *clientv3.Client, name string, streams []string) *hookMember {
	t.Helper()
	m := &hookMember{log: newHookLog(), done: make(chan error, 1)}
	g, err := etcd.NewGroup(c, name, etcd.WithTTL(ttl), etcd.WithOwnerHook(m.log.hook))
	if err != nil {
		t.Fatalf("NewGroup() = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	go func() {
		m.done <- g.Run(ctx, streams, func(ctx context.Context, _ *etcd.Owner) error {
			<-ctx.Done()
			return ctx.Err()
		})
	}()
	t.Cleanup(func() { m.stop(t) })
	return m
}

func (m *hookMember) stop(t *testing.T) {
	t.Helper()
	m.cancel()
	select {
	case err, ok := <-m.done:
		if ok && !errors.Is(err, context.Canceled) {
			t.Errorf("Run() = %v, want %v", err, context.Canceled)
		}
		if ok {
			close(m.done)
		}
	case <-time.After(deadline):
		t.Fatal("Group.Run did not return after its context ended")
	}
}

// TestOwnerHooks checks the owner events of two members against a real
// cluster: owned when a member takes a stream, released when it hands it
// over (to a member that joined, or on a graceful stop), lost when its
// lease is revoked behind its back.
func TestOwnerHooks(t *testing.T) {
	c := cluster.Start(t, 3)
	cl := c.Client(t)
	var x, y string // x is picked for a, y for b
	for i := 0; x == "" || y == ""; i++ {
		s := fmt.Sprintf("h%d", i)
		if p, _ := hrw.Pick(s, []string{"a", "b"}); p == "a" && x == "" {
			x = s
		} else if p == "b" && y == "" {
			y = s
		}
	}
	streams := []string{x, y}

	a := startHookMember(t, cl, "a", streams)
	if diff := cmp.Diff([]string{"a owned " + x, "a owned " + y}, a.log.await(t, 2)); diff != "" {
		t.Errorf("a alone (-want +got):\n%s", diff)
	}
	b := startHookMember(t, cl, "b", streams)
	if diff := cmp.Diff([]string{"a owned " + x, "a owned " + y, "a released " + y}, a.log.await(t, 3)); diff != "" {
		t.Errorf("a after b joined (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"b owned " + y}, b.log.await(t, 1)); diff != "" {
		t.Errorf("b after it joined (-want +got):\n%s", diff)
	}
	if got := awaitPicks(t, cl, streams, []string{"a", "b"}); got[y] != "b" {
		t.Fatalf("owners = %v, want %s owned by b", got, y)
	}

	// b's lease revoked, as its expiry after a long pause would: b loses y,
	// joins again, and takes y back (a may hold it meanwhile).
	resp, err := cl.Get(ctxFor(t), "/resumable/members/b")
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("Get(member key) = %v, %v", resp, err)
	}
	if _, err := cl.Revoke(ctxFor(t), clientv3.LeaseID(resp.Kvs[0].Lease)); err != nil {
		t.Fatalf("Revoke() = %v", err)
	}
	if diff := cmp.Diff([]string{"b owned " + y, "b lost " + y, "b owned " + y}, b.log.await(t, 3)); diff != "" {
		t.Errorf("b after its lease was revoked (-want +got):\n%s", diff)
	}

	// A graceful stop releases every stream the member owns.
	b.stop(t)
	if diff := cmp.Diff([]string{"b owned " + y, "b lost " + y, "b owned " + y, "b released " + y}, b.log.await(t, 4)); diff != "" {
		t.Errorf("b after its graceful stop (-want +got):\n%s", diff)
	}
	awaitPicks(t, cl, streams, []string{"a"})
	a.stop(t)
	got := a.log.await(t, 0)
	owned := map[string]int{}
	for _, e := range got {
		var who, verb, s string
		fmt.Sscan(e, &who, &verb, &s)
		switch verb {
		case "owned":
			owned[s]++
		case "released":
			owned[s]--
		default:
			t.Errorf("a reported %q", e)
		}
	}
	if want := map[string]int{x: 0, y: 0}; !cmp.Equal(want, owned) {
		t.Errorf("a's events %v do not end every ownership with a release", got)
	}
}
