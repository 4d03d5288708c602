package kafka_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/resumable-go/resumable/adapters/kafka"
	"github.com/resumable-go/resumable/stream"
)

// A partition lost with its session (the coordinator no longer knows the
// member) stops at once: the handler in flight sees its context end, and
// nothing handled since the last commit is committed; the member joins
// again and handles those records once more.
func TestGroupLostPartitionCommitsNothing(t *testing.T) {
	const n = 20
	c := newCluster(t, 1, "orders")
	c.produce(t, records("orders", 1, n, n)...)
	// No commit while it runs: only a revoke or the end of Run commits.
	g := c.group(t, "billing", []string{"orders"}, kafka.WithCommitInterval(time.Hour))

	var l log
	var blocked atomic.Bool
	cancelled := make(chan struct{})
	var losses atomic.Int32
	r := start(g, func(ctx context.Context, rec *kgo.Record) error {
		if rec.Offset == 10 && blocked.CompareAndSwap(false, true) {
			// The member's next heartbeat learns that its session is gone.
			c.fake.ControlKey(int16(kmsg.Heartbeat), func(req kmsg.Request) (kmsg.Response, error, bool) {
				losses.Add(1)
				resp := req.(*kmsg.HeartbeatRequest).ResponseKind().(*kmsg.HeartbeatResponse)
				resp.ErrorCode = kerr.UnknownMemberID.Code
				return resp, nil, true
			})
			<-ctx.Done()
			close(cancelled)
			return ctx.Err()
		}
		l.add("a", rec)
		return nil
	}, stream.WithConcurrency(1))
	eventually(t, "the partition lost", func() bool { return g.Stats().Lost == 1 })
	<-cancelled
	if losses.Load() != 1 {
		t.Fatalf("session losses injected = %d, want 1", losses.Load())
	}
	if got := c.committed(t, "billing", "orders")[0]; got > 0 {
		t.Errorf("committed offset %d after the loss, want nothing committed", got)
	}
	if got := g.Stats().Uncommitted; got != 10 {
		t.Errorf("Stats().Uncommitted = %d, want 10 (offsets 0 to 9 handled, not committed)", got)
	}
	eventually(t, "every record handled after the member joined again", func() bool { return l.len() >= 10+n })
	if err := r.stop(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run() = %v, want %v", err, context.Canceled)
	}
	if got := c.committed(t, "billing", "orders")[0]; got != n {
		t.Errorf("committed offset = %d, want %d", got, n)
	}
}
