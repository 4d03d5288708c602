package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The demo's shape.
const (
	demoTopic      = "orders"
	demoPartitions = 4
	demoRecords    = 2000
	demoKeys       = 50
	demoPoisonEach = 100 // every 100th record is poison
)

// demo runs a member with 8 handlers on an in-process cluster holding
// demoRecords records, until every partition is committed to its end, and
// checks what it printed and parked.
func demo(ctx context.Context, stdout io.Writer) error {
	fake, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(demoPartitions, demoTopic))
	if err != nil {
		return err
	}
	defer fake.Close()
	brokers := fake.ListenAddrs()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(demoTopic))
	if err != nil {
		return err
	}
	defer cl.Close()
	recs := make([]*kgo.Record, demoRecords)
	poison := 0
	for i := range recs {
		value := fmt.Sprintf("order %d", i)
		if i%demoPoisonEach == demoPoisonEach-1 {
			value, poison = "poison "+value, poison+1
		}
		recs[i] = &kgo.Record{Key: fmt.Appendf(nil, "customer-%d", i%demoKeys), Value: []byte(value)}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return err
	}

	out := &lines{}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- member(runCtx, out, config{brokers: brokers, topic: demoTopic, group: "billing", concurrency: 8,
			work: 100 * time.Microsecond, maxDeliveries: 3, deadLetter: demoTopic + ".parked",
			sessionTimeout: 10 * time.Second, commitInterval: 50 * time.Millisecond})
	}()
	adm := kadm.NewClient(cl)
	if err := waitCommitted(ctx, adm, done); err != nil {
		return err
	}
	cancel()
	if err := <-done; err != nil {
		return err
	}

	handled, parked := out.count()
	if handled != demoRecords-poison || parked != poison || out.badOrder != 0 || out.poisonHandled != 0 {
		return fmt.Errorf("demo: %d handled (want %d), %d parked (want %d), %d records of a key out of order, %d poison records handled (want 0 and 0)",
			handled, demoRecords-poison, parked, poison, out.badOrder, out.poisonHandled)
	}
	ends, err := adm.ListEndOffsets(ctx, demoTopic+".parked")
	if err != nil {
		return err
	}
	var inTopic int64
	ends.Each(func(o kadm.ListedOffset) { inTopic += o.Offset })
	if inTopic != int64(poison) {
		return fmt.Errorf("demo: the dead-letter topic holds %d records, want %d", inTopic, poison)
	}
	_, err = fmt.Fprintf(stdout, "demo: %d records over %d partitions and %d keys, 8 handlers: %d handled, %d parked in %s.parked, "+
		"each key in offset order, every partition committed to its end: ok\n",
		demoRecords, demoPartitions, demoKeys, handled, parked, demoTopic)
	return err
}

// waitCommitted waits until the group billing committed every partition of
// the demo's topic to its end, or the member ended.
func waitCommitted(ctx context.Context, adm *kadm.Client, done <-chan error) error {
	deadline := time.NewTimer(time.Minute)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			return fmt.Errorf("demo: the member ended early: %v", err)
		case <-deadline.C:
			return errors.New("demo: the partitions were not committed to their ends within a minute")
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		ends, err := adm.ListEndOffsets(ctx, demoTopic)
		if err != nil {
			return err
		}
		committed, err := adm.FetchOffsets(ctx, "billing")
		if err != nil {
			continue // the group is not there yet
		}
		all := true
		ends.Each(func(e kadm.ListedOffset) {
			c, ok := committed.Lookup(demoTopic, e.Partition)
			all = all && ok && c.At == e.Offset
		})
		if all {
			return nil
		}
	}
}

// lines checks the member's output, one line per Write.
type lines struct {
	mu            sync.Mutex
	handled       map[[2]int64]bool
	parked        map[[2]int64]bool
	last          map[string]int64 // partition/key → last offset printed
	badOrder      int
	poisonHandled int
}

func (l *lines) Write(p []byte) (int, error) {
	var verb, key string
	var partition, offset int64
	if _, err := fmt.Sscanf(string(bytes.TrimSpace(p)), "%s %d %d %s", &verb, &partition, &offset, &key); err != nil {
		return 0, fmt.Errorf("demo: bad line %q: %w", p, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.handled == nil {
		l.handled, l.parked, l.last = map[[2]int64]bool{}, map[[2]int64]bool{}, map[string]int64{}
	}
	at := [2]int64{partition, offset}
	switch verb {
	case "handled":
		l.handled[at] = true
	case "parked":
		l.parked[at] = true
	}
	k := fmt.Sprintf("%d/%s", partition, key)
	if last, ok := l.last[k]; ok && offset <= last {
		l.badOrder++
	}
	l.last[k] = offset
	return len(p), nil
}

func (l *lines) count() (handled, parked int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for at := range l.parked {
		if l.handled[at] {
			l.poisonHandled++
		}
	}
	return len(l.handled), len(l.parked)
}
