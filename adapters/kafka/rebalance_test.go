package kafka_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/resumable-go/resumable/stream"
)

// A second member takes half of the partitions, and gives them back when it
// leaves: each revoked partition drains its records in flight and commits
// them before it is released, so no record is handled twice.
func TestGroupRebalanceHandsOverWithoutDuplicates(t *testing.T) {
	const n, more = 600, 200
	c := newCluster(t, 4, "orders")
	c.produce(t, records("orders", 4, n, 30)...)

	var l log
	handler := func(member string) func(context.Context, *kgo.Record) error {
		return func(_ context.Context, rec *kgo.Record) error {
			time.Sleep(500 * time.Microsecond) // work, so that records are in flight at the rebalance
			l.add(member, rec)
			return nil
		}
	}
	a := c.group(t, "billing", []string{"orders"})
	ra := start(a, handler("a"), stream.WithConcurrency(4))
	eventually(t, "a member handling records", func() bool { return l.len() >= 50 })

	// Records keep coming while b joins and a hands partitions over.
	stop, produced := make(chan struct{}), make(chan int)
	go func() {
		total := n
		for {
			select {
			case <-stop:
				produced <- total
				return
			default:
			}
			if err := c.cl.ProduceSync(context.Background(), records("orders", 4, 20, 30)...).FirstErr(); err != nil {
				t.Error(err)
			}
			total += 20
		}
	}()
	b := c.group(t, "billing", []string{"orders"})
	rb := start(b, handler("b"), stream.WithConcurrency(4))
	eventually(t, "b handling records", func() bool { return b.Stats().Assigned > 0 && l.count("b") >= 50 })
	close(stop)
	total := <-produced
	eventually(t, "every record handled", func() bool { return l.len() >= total })
	if a.Stats().Revoked == 0 || b.Stats().Assigned == 0 {
		t.Errorf("a revoked %d partitions and b was assigned %d, want both > 0", a.Stats().Revoked, b.Stats().Assigned)
	}

	if err := rb.stop(); !errors.Is(err, context.Canceled) {
		t.Errorf("b: Run() = %v, want %v", err, context.Canceled)
	}
	c.produce(t, records("orders", 4, more, 30)...)
	eventually(t, "the records produced after b left handled", func() bool { return l.len() >= total+more })
	if err := ra.stop(); !errors.Is(err, context.Canceled) {
		t.Errorf("a: Run() = %v, want %v", err, context.Canceled)
	}

	seen := map[[2]int64]string{}
	members := map[string]int{}
	for _, h := range l.snapshot() {
		k := [2]int64{int64(h.partition), h.offset}
		if was, ok := seen[k]; ok {
			t.Errorf("partition %d offset %d handled by %s and by %s", h.partition, h.offset, was, h.member)
		}
		seen[k] = h.member
		members[h.member]++
	}
	if len(seen) != total+more || members["a"] == 0 || members["b"] == 0 {
		t.Errorf("handled %d distinct records (a %d, b %d), want %d, some by each", len(seen), members["a"], members["b"], total+more)
	}
	if a.Stats().Lost != 0 || b.Stats().Lost != 0 {
		t.Errorf("lost partitions: a %d, b %d, want none", a.Stats().Lost, b.Stats().Lost)
	}
}
