// Command kafka consumes a Kafka topic as one member of a consumer group,
// with resumable's kafka adapter: up to -concurrency records in the
// handler at once, the records of one key in offset order, each
// partition's offsets committed only below its oldest unfinished record,
// poison records parked in a dead-letter topic.
//
// For every record it handles it prints exactly one line to stdout, as the
// record is handled:
//
//	handled PARTITION OFFSET KEY
//
// A record whose value starts with "poison" makes the handler fail every
// time; after -max-deliveries tries (retried in place, at most 10 ms
// apart) it is produced to the dead-letter topic (key and value unchanged,
// headers naming its topic, partition, offset and the error), printed as
//
//	parked PARTITION OFFSET KEY
//
// and committed past. On SIGTERM or SIGINT it finishes the records in
// flight, commits them, leaves the group and exits with status 0; a
// partition revoked by a rebalance is released only after its records in
// flight finished and were committed.
//
// With no flags it runs a self-checking demo on an in-process cluster
// (franz-go's kfake) and exits with status 0 when every check passed.
//
// Usage:
//
//	go run ./examples/kafka -brokers HOST:PORT[,HOST:PORT] -topic NAME -group NAME
//	    [-concurrency N] [-work D] [-max-deliveries N] [-dead-letter TOPIC]
//	    [-session-timeout D] [-rebalance-timeout D] [-postgres URL]
//
// With -postgres, each record's effect (a row of kafka_effects) and its
// partition's offset commit in one PostgreSQL transaction: exactly once,
// a partition's records one at a time (-concurrency must be 1).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/resumable-go/resumable/adapters/kafka"
	"github.com/resumable-go/resumable/backoff"
	"github.com/resumable-go/resumable/stream"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, os.Stdout, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "kafka:", err)
		stop()
		os.Exit(1)
	}
}

const usage = "usage: kafka -brokers HOST:PORT[,HOST:PORT] -topic NAME -group NAME [-concurrency N] [-work D] [-max-deliveries N] [-dead-letter TOPIC] [-session-timeout D] [-rebalance-timeout D] [-postgres URL]"

// config is what the flags say.
type config struct {
	brokers        []string
	topic, group   string
	concurrency    int
	work           time.Duration
	maxDeliveries  int
	deadLetter     string
	sessionTimeout time.Duration
	rebalance      time.Duration // 0: kgo's default (60s)
	commitInterval time.Duration // 0: the adapter's default
	postgres       string        // "": no sink
}

func run(ctx context.Context, stdout io.Writer, args []string) error {
	if len(args) == 0 {
		return demo(ctx, stdout)
	}
	fs := flag.NewFlagSet("kafka", flag.ContinueOnError)
	brokers := fs.String("brokers", "", "seed brokers, `HOST:PORT[,HOST:PORT]`")
	topic := fs.String("topic", "", "the topic's `NAME`")
	group := fs.String("group", "", "the consumer group's `NAME`")
	concurrency := fs.Int("concurrency", 1, "records in the handler at once")
	work := fs.Duration("work", 0, "how long each handler sleeps, a stand-in for real work")
	maxDeliveries := fs.Int("max-deliveries", 3, "tries of a record before it is parked")
	deadLetter := fs.String("dead-letter", "", "the dead-letter `TOPIC` (default: the topic's name + \".parked\")")
	session := fs.Duration("session-timeout", 45*time.Second, "the group session timeout: how soon a killed member's partitions move")
	rebalance := fs.Duration("rebalance-timeout", 0, "how long the group waits for its members to rejoin a rebalance (default kgo's 60s); a revoked partition drains for at most half of it")
	pg := fs.String("postgres", "", "a PostgreSQL `URL`: each record's effect and offset in one transaction")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *brokers == "" || *topic == "" || *group == "" || fs.NArg() > 0 || (*pg != "" && *concurrency != 1) {
		return errors.New(usage)
	}
	if *deadLetter == "" {
		*deadLetter = *topic + ".parked"
	}
	return member(ctx, stdout, config{brokers: strings.Split(*brokers, ","), topic: *topic, group: *group,
		concurrency: *concurrency, work: *work, maxDeliveries: *maxDeliveries, deadLetter: *deadLetter,
		sessionTimeout: *session, rebalance: *rebalance, postgres: *pg})
}

// errPoison is the handler's error for a poison record.
var errPoison = errors.New("poison record")

// member runs one member of the group until ctx ends.
func member(ctx context.Context, stdout io.Writer, cfg config) error {
	producer, err := kgo.NewClient(kgo.SeedBrokers(cfg.brokers...))
	if err != nil {
		return err
	}
	defer producer.Close()
	if err := createTopic(ctx, producer, cfg.deadLetter); err != nil {
		return err
	}
	opts := []kafka.Option{kafka.WithClientOptions(
		kgo.SessionTimeout(cfg.sessionTimeout),
		kgo.HeartbeatInterval(min(3*time.Second, cfg.sessionTimeout/10)),
	)}
	if cfg.commitInterval > 0 {
		opts = append(opts, kafka.WithCommitInterval(cfg.commitInterval))
	}
	if cfg.rebalance > 0 {
		opts = append(opts, kafka.WithClientOptions(kgo.RebalanceTimeout(cfg.rebalance)),
			kafka.WithDrainTimeout(max(cfg.rebalance/2, time.Millisecond)))
	}
	effect := func(context.Context, *kgo.Record) error { return nil }
	if cfg.postgres != "" {
		s, err := newSink(ctx, cfg.postgres)
		if err != nil {
			return err
		}
		defer s.Close()
		opts = append(opts, kafka.WithStore(s.open))
		effect = s.handle
	}
	g, err := kafka.NewGroup(cfg.brokers, cfg.group, []string{cfg.topic}, opts...)
	if err != nil {
		return err
	}
	var mu sync.Mutex // one line at a time, each written at once
	say := func(verb string, r *kgo.Record) error {
		mu.Lock()
		defer mu.Unlock()
		_, err := fmt.Fprintf(stdout, "%s %d %d %s\n", verb, r.Partition, r.Offset, r.Key)
		return err
	}
	deadLetter := kafka.DeadLetter(producer, cfg.deadLetter)
	park := func(ctx context.Context, r *kgo.Record, err error) error {
		if err := deadLetter(ctx, r, err); err != nil {
			return err
		}
		return say("parked", r)
	}
	err = g.Run(ctx, func(ctx context.Context, r *kgo.Record) error {
		if cfg.work > 0 {
			time.Sleep(cfg.work)
		}
		if strings.HasPrefix(string(r.Value), "poison") {
			return errPoison
		}
		if err := effect(ctx, r); err != nil {
			return err
		}
		return say("handled", r)
	},
		stream.WithConcurrency(cfg.concurrency),
		stream.WithHandlerRetry(cfg.maxDeliveries, backoff.Constant(10*time.Millisecond)),
		stream.WithDeadLetter(park),
	)
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return nil // SIGTERM or SIGINT: what was handled is committed
	}
	return err
}

// createTopic creates topic with one partition, unless it exists.
func createTopic(ctx context.Context, cl *kgo.Client, topic string) error {
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, 1, -1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("creating the dead-letter topic %s: %w", topic, err)
	}
	return nil
}
