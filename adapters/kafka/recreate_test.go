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

// A topic deleted and created again under the same name is another
// history: Run says so (stream.ErrSourceChanged) instead of reading the
// new topic from offsets of the old one.
func TestGroupTopicRecreated(t *testing.T) {
	c := newCluster(t, 1, "orders")
	c.produce(t, records("orders", 1, 10, 2)...)
	// franz-go retries an unknown topic ID a few times (about 13s by
	// default) before it reports it: quick retries here.
	g := c.group(t, "billing", []string{"orders"}, kafka.WithClientOptions(kgo.RetryBackoffFn(func(int) time.Duration { return 10 * time.Millisecond })))
	var l log
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- g.Run(ctx, func(_ context.Context, rec *kgo.Record) error {
			l.add("a", rec)
			return nil
		})
	}()
	eventually(t, "the old topic handled", func() bool { return l.len() == 10 })
	if _, err := c.adm.DeleteTopic(context.Background(), "orders"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.adm.CreateTopic(context.Background(), 1, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	// A new client: the cluster's own one keeps the old topic's ID.
	fresh, err := kgo.NewClient(kgo.SeedBrokers(c.addrs...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	if err := fresh.ProduceSync(context.Background(), records("orders", 1, 20, 2)...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	err = <-done
	if !errors.Is(err, stream.ErrSourceChanged) {
		t.Fatalf("Run() = %v, want an error matching %v", err, stream.ErrSourceChanged)
	}
	if l.len() != 10 {
		t.Errorf("handled %d records, want the old topic's 10 only", l.len())
	}
}
