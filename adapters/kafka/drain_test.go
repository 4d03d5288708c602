package kafka_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/resumable-go/resumable/adapters/kafka"
	"github.com/resumable-go/resumable/stream"
)

// A handler that outlives the drain timeout sees its context cancelled;
// what finished before it is committed, it is not.
func TestGroupDrainTimeoutCancelsTheStragglers(t *testing.T) {
	c := newCluster(t, 1, "orders")
	recs := records("orders", 1, 10, 10)
	recs[4].Key = []byte("stuck")
	c.produce(t, recs...)
	g := c.group(t, "billing", []string{"orders"}, kafka.WithDrainTimeout(100*time.Millisecond))

	var l log
	cancelled := make(chan error, 1)
	r := start(g, func(ctx context.Context, rec *kgo.Record) error {
		if string(rec.Key) == "stuck" {
			<-ctx.Done()
			cancelled <- ctx.Err()
			return ctx.Err()
		}
		l.add("a", rec)
		return nil
	}, stream.WithConcurrency(4))
	eventually(t, "every record but the stuck one handled", func() bool { return l.len() == 9 })
	if err := r.stop(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run() = %v, want %v", err, context.Canceled)
	}
	if err := <-cancelled; !errors.Is(err, context.Canceled) {
		t.Errorf("the stuck handler's context ended with %v, want %v", err, context.Canceled)
	}
	if got := c.committed(t, "billing", "orders")[0]; got != 4 {
		t.Errorf("committed offset = %d, want 4 (the stuck record's)", got)
	}
}

// A handler error that nothing retries or parks ends Run with it, and the
// partition is committed up to the failed record, never past it.
func TestGroupHandlerErrorEndsRun(t *testing.T) {
	c := newCluster(t, 1, "orders")
	c.produce(t, records("orders", 1, 10, 10)...)
	g := c.group(t, "billing", []string{"orders"})
	boom := errors.New("boom")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := g.Run(ctx, func(_ context.Context, rec *kgo.Record) error {
		if rec.Offset == 6 {
			return boom
		}
		return nil
	}, stream.WithConcurrency(4))
	if !errors.Is(err, boom) {
		t.Fatalf("Run() = %v, want %v", err, boom)
	}
	if got := c.committed(t, "billing", "orders")[0]; got != 6 {
		t.Errorf("committed offset = %d, want 6 (the failed record's)", got)
	}
}
