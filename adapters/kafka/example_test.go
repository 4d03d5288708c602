package kafka_test

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/resumable-go/resumable/adapters/kafka"
	"github.com/resumable-go/resumable/backoff"
	"github.com/resumable-go/resumable/stream"
)

// A member of the group "billing" on the topic "orders" (here an
// in-process cluster): up to 16 records in the handler at once, one
// basket's records in order; a record that fails three times goes to the
// topic "orders.parked".
func ExampleGroup_Run() {
	fake, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "orders", "orders.parked"))
	if err != nil {
		panic(err)
	}
	defer fake.Close()
	producer, err := kgo.NewClient(kgo.SeedBrokers(fake.ListenAddrs()...), kgo.DefaultProduceTopic("orders"))
	if err != nil {
		panic(err)
	}
	defer producer.Close()
	for _, fruit := range []string{"apple", "pear", "plum"} {
		rec := &kgo.Record{Key: []byte("basket-1"), Value: []byte(fruit)}
		if err := producer.ProduceSync(context.Background(), rec).FirstErr(); err != nil {
			panic(err)
		}
	}

	g, err := kafka.NewGroup(fake.ListenAddrs(), "billing", []string{"orders"})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var handled atomic.Int32
	err = g.Run(ctx, func(ctx context.Context, r *kgo.Record) error {
		fmt.Println(r.Partition, r.Offset, string(r.Key), string(r.Value))
		if handled.Add(1) == 3 {
			cancel() // the records in flight finish and are committed
		}
		return nil
	},
		stream.WithConcurrency(16),
		stream.WithHandlerRetry(3, backoff.Constant(0)),
		stream.WithDeadLetter(kafka.DeadLetter(producer, "orders.parked")),
	)
	fmt.Println(err)
	// Output:
	// 0 0 basket-1 apple
	// 0 1 basket-1 pear
	// 0 2 basket-1 plum
	// context canceled
}
