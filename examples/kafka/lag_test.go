package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/resumable-go/resumable/adapters/kafka"
	"github.com/resumable-go/resumable/metrics/prom"
)

// lagOf is how a program feeds a member's partitions to
// prom.NewLagCollector: the adapter and the collector know nothing of
// each other.
func lagOf(g *kafka.Group) func() []prom.Lag {
	return func() []prom.Lag {
		var out []prom.Lag
		for _, p := range g.Partitions() {
			out = append(out, prom.Lag{Topic: p.Topic, Partition: p.Partition,
				End: p.HighWatermark, Committed: p.Committed, InFlight: p.InFlight + p.Queued})
		}
		return out
	}
}

// A member's lag on a scrape: the records behind while the handler is
// held, none once they are handled and committed.
func TestLagMetrics(t *testing.T) {
	fake, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "orders"))
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(fake.ListenAddrs()...), kgo.DefaultProduceTopic("orders"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := range 5 {
		if err := cl.ProduceSync(context.Background(), &kgo.Record{Value: []byte{byte('a' + i)}}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	g, err := kafka.NewGroup(fake.ListenAddrs(), "billing", []string{"orders"},
		kafka.WithCommitInterval(10*time.Millisecond), kafka.WithClientOptions(kgo.FetchMaxWait(50*time.Millisecond)))
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(prom.NewLagCollector("m1", lagOf(g))); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hold := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- g.Run(ctx, func(ctx context.Context, _ *kgo.Record) error {
			select {
			case <-hold:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}()
	scrape := func(lag, inFlight string) string {
		return `
# HELP resumable_partition_in_flight Records of the partition the consumer holds and has not committed.
# TYPE resumable_partition_in_flight gauge
resumable_partition_in_flight{member="m1",partition="0",topic="orders"} ` + inFlight + `
# HELP resumable_partition_lag Records of the partition past the consumer's committed offset: its end offset minus the committed one.
# TYPE resumable_partition_lag gauge
resumable_partition_lag{member="m1",partition="0",topic="orders"} ` + lag + "\n"
	}
	// Nothing committed yet: the lag is known once the group's offset is,
	// so it shows only after the first commit; before that, in flight.
	eventually(t, "4 records queued behind the held one", func() bool {
		ps := g.Partitions()
		return len(ps) == 1 && ps[0].Queued == 4
	})
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP resumable_partition_in_flight Records of the partition the consumer holds and has not committed.
# TYPE resumable_partition_in_flight gauge
resumable_partition_in_flight{member="m1",partition="0",topic="orders"} 4
`), "resumable_partition_in_flight", "resumable_partition_lag"); err != nil {
		t.Fatal(err)
	}
	close(hold)
	eventually(t, "lag 0 after the commit", func() bool {
		return testutil.GatherAndCompare(reg, strings.NewReader(scrape("0", "0")), "resumable_partition_in_flight", "resumable_partition_lag") == nil
	})
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run() = %v, want %v", err, context.Canceled)
	}
}
