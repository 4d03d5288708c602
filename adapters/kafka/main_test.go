package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/resumable-go/resumable/adapters/kafka"
	"github.com/resumable-go/resumable/stream"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// cluster is an in-process Kafka (kfake) on loopback, with a producing
// client and an admin client of it; closed when the test ends.
type cluster struct {
	fake  *kfake.Cluster
	addrs []string
	cl    *kgo.Client
	adm   *kadm.Client
}

// newCluster starts a cluster with topics of partitions partitions each.
// Its groups accept short sessions, so that a member that died leaves
// quickly.
func newCluster(t testing.TB, partitions int32, topics ...string) *cluster {
	t.Helper()
	fake, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, topics...),
		kfake.GroupMinSessionTimeout(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(fake.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return &cluster{fake: fake, addrs: fake.ListenAddrs(), cl: cl, adm: kadm.NewClient(cl)}
}

// produce writes records; each names its topic and partition.
func (c *cluster) produce(t testing.TB, recs ...*kgo.Record) {
	t.Helper()
	if err := c.cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// records returns n records of topic over partitions, key i%keys and value
// "v<i>", in rounds over the partitions.
func records(topic string, partitions int32, n, keys int) []*kgo.Record {
	recs := make([]*kgo.Record, n)
	for i := range n {
		recs[i] = &kgo.Record{Topic: topic, Partition: int32(i) % partitions,
			Key: fmt.Appendf(nil, "k%d", i%keys), Value: fmt.Appendf(nil, "v%d", i)}
	}
	return recs
}

// committed returns the group's committed offsets of topic per partition.
func (c *cluster) committed(t testing.TB, group, topic string) map[int32]int64 {
	t.Helper()
	os, err := c.adm.FetchOffsets(context.Background(), group)
	if errors.Is(err, kerr.GroupIDNotFound) {
		return map[int32]int64{}
	}
	if err != nil {
		t.Fatal(err)
	}
	got := map[int32]int64{}
	for p, o := range os[topic] {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		got[p] = o.At
	}
	return got
}

// ends returns the end offsets of topic per partition.
func (c *cluster) ends(t testing.TB, topic string) map[int32]int64 {
	t.Helper()
	lo, err := c.adm.ListEndOffsets(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	got := map[int32]int64{}
	for p, o := range lo[topic] {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		got[p] = o.Offset
	}
	return got
}

// group returns a member of group on the cluster's topics, with quick
// commits for tests; its session (5s, heartbeats every 100ms) outlives a
// heartbeat delayed by a loaded machine under -race, and no test waits for
// it to expire (a lost session is injected).
func (c *cluster) group(t testing.TB, group string, topics []string, opts ...kafka.Option) *kafka.Group {
	t.Helper()
	base := []kafka.Option{
		kafka.WithCommitInterval(20 * time.Millisecond),
		kafka.WithClientOptions(kgo.SessionTimeout(5*time.Second), kgo.HeartbeatInterval(100*time.Millisecond),
			kgo.RebalanceTimeout(10*time.Second), kgo.FetchMaxWait(50*time.Millisecond)),
	}
	g, err := kafka.NewGroup(c.addrs, group, topics, append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// running is a Group.Run in progress.
type running struct {
	cancel context.CancelFunc
	done   chan error
}

// start runs g until stop is called.
func start(g *kafka.Group, handle func(context.Context, *kgo.Record) error, opts ...stream.Option) *running {
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- g.Run(ctx, handle, opts...) }()
	return r
}

// stop cancels the Run and returns what it returned.
func (r *running) stop() error {
	r.cancel()
	return <-r.done
}

// eventually polls cond until it holds, or fails the test after a deadline.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// handled is a record handled by a member.
type handled struct {
	member    string
	partition int32
	offset    int64
	key       string
}

// log records the records handled, safe for concurrent use.
type log struct {
	mu  sync.Mutex
	all []handled
}

func (l *log) add(member string, r *kgo.Record) {
	l.mu.Lock()
	l.all = append(l.all, handled{member: member, partition: r.Partition, offset: r.Offset, key: string(r.Key)})
	l.mu.Unlock()
}

func (l *log) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.all)
}

func (l *log) count(member string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, h := range l.all {
		if h.member == member {
			n++
		}
	}
	return n
}

func (l *log) snapshot() []handled {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]handled(nil), l.all...)
}
