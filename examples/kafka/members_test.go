package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/resumable-go/resumable/adapters/kafka"
)

// EnvBrokers names a real cluster (HOST:PORT[,HOST:PORT]) the tests of
// this package run against instead of an in-process kfake; they make
// topics and groups of names of their own there.
const EnvBrokers = "RESUMABLE_KAFKA_BROKERS"

// testCluster is the cluster a test runs against, with its topic, the
// topic's dead-letter topic and a group name.
type testCluster struct {
	addrs              []string
	topic, dead, group string
	cl                 *kgo.Client
	adm                *kadm.Client
}

// newTestCluster returns the cluster of $RESUMABLE_KAFKA_BROKERS, or a
// kfake one, with a topic of partitions partitions and its dead-letter
// topic, named for the test on a real broker.
func newTestCluster(t *testing.T, partitions int32) *testCluster {
	t.Helper()
	c := &testCluster{topic: "orders", group: "billing"}
	if env := os.Getenv(EnvBrokers); env != "" {
		c.addrs = strings.Split(env, ",")
		suffix := strconv.FormatInt(time.Now().UnixNano(), 36)
		c.topic, c.group = "orders-"+suffix, "billing-"+suffix
	} else {
		fake, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.GroupMinSessionTimeout(100*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(fake.Close)
		c.addrs = fake.ListenAddrs()
	}
	c.dead = c.topic + ".parked"
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.addrs...), kgo.DefaultProduceTopic(c.topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	c.cl, c.adm = cl, kadm.NewClient(cl)
	for _, tp := range []struct {
		name string
		n    int32
	}{{c.topic, partitions}, {c.dead, 1}} {
		resp, err := c.adm.CreateTopic(context.Background(), tp.n, -1, nil, tp.name)
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			t.Fatalf("creating topic %s: %v", tp.name, err)
		}
	}
	return c
}

// committed returns the group's committed offsets of the topic.
func (c *testCluster) committed(t *testing.T) map[int32]int64 {
	t.Helper()
	got := map[int32]int64{}
	os, err := c.adm.FetchOffsets(context.Background(), c.group)
	if err != nil {
		return got // no group yet
	}
	for p, o := range os[c.topic] {
		got[p] = o.At
	}
	return got
}

// ends returns the end offsets of the topic.
func (c *testCluster) ends(t *testing.T) map[int32]int64 {
	t.Helper()
	lo, err := c.adm.ListEndOffsets(context.Background(), c.topic)
	if err != nil {
		t.Fatal(err)
	}
	got := map[int32]int64{}
	lo.Each(func(o kadm.ListedOffset) { got[o.Partition] = o.Offset })
	return got
}

// busy returns a member of lives that is handling records: one that
// printed 20 more lines since busy was called.
func busy(t *testing.T, lives []*life) *life {
	t.Helper()
	before := make([]int, len(lives))
	for i, l := range lives {
		before[i] = len(l.lines(t))
	}
	var found *life
	eventually(t, "a member handling records", func() bool {
		for i, l := range lives {
			if len(l.lines(t)) >= before[i]+20 {
				found = l
				return true
			}
		}
		return false
	})
	return found
}

// seen is one line the program printed: a record handled or parked.
type seen struct {
	verb      string
	partition int32
	offset    int64
	key       string
}

func parse(t *testing.T, l *life) []seen {
	t.Helper()
	var out []seen
	for _, line := range l.lines(t) {
		var s seen
		if _, err := fmt.Sscanf(line, "%s %d %d %s", &s.verb, &s.partition, &s.offset, &s.key); err != nil {
			t.Fatalf("bad line %q", line)
		}
		out = append(out, s)
	}
	return out
}

// Three members with 16 handlers each share a 6-partition topic; members
// are SIGKILLed mid-stream and replaced, one more joins and one leaves
// gracefully (SIGTERM), the others stop with SIGTERM at the end. Every
// record is handled or parked at least once; poison records only parked,
// every one in the dead-letter topic and nothing else there; each key's
// offsets strictly increase within each process's life; the committed
// offsets reach the topic's end; and the records handled twice are no
// more than those the killed members had handled past the group's
// committed offsets when they died: graceful handoffs repeat nothing.
//
// RESUMABLE_KAFKA_SOAK_KILLS=15 kills more often (with 1,500 records more
// per kill); RESUMABLE_KAFKA_BROKERS runs it against a real cluster.
func TestMembersKilledAddedRemoved(t *testing.T) {
	kills := 3
	if s := os.Getenv("RESUMABLE_KAFKA_SOAK_KILLS"); s != "" {
		k, err := strconv.Atoi(s)
		if err != nil || k < 1 {
			t.Fatalf("RESUMABLE_KAFKA_SOAK_KILLS=%q: want a count of at least 1", s)
		}
		kills = k
	}
	const partitions, keys = 6, 120
	n := 6000 + 1500*max(0, kills-3)
	c := newTestCluster(t, partitions)
	bin := build(t)
	recs := make([]*kgo.Record, n)
	for i := range recs {
		v := fmt.Sprintf("order %d", i)
		if i%100 == 42 {
			v = "poison " + v
		}
		recs[i] = &kgo.Record{Key: fmt.Appendf(nil, "k%d", i%keys), Value: []byte(v)}
	}
	if err := c.cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	poison := map[[2]int64]bool{}
	for _, r := range recs {
		if strings.HasPrefix(string(r.Value), "poison") {
			poison[[2]int64{int64(r.Partition), r.Offset}] = true
		}
	}

	args := []string{"-brokers", strings.Join(c.addrs, ","), "-topic", c.topic, "-group", c.group,
		"-concurrency", "16", "-work", "5ms", "-max-deliveries", "2", "-dead-letter", c.dead, "-session-timeout", "1s",
		// kfake waits the whole rebalance timeout for a member that died
		// before it rejoined: 60s by default.
		"-rebalance-timeout", "4s"}
	var all, running []*life
	startMember := func() {
		l := startLife(t, bin, args)
		all, running = append(all, l), append(running, l)
	}
	printed := func() (total int) {
		for _, l := range all {
			total += len(l.lines(t))
		}
		return total
	}
	for range 3 {
		startMember()
	}
	explained := map[[2]int64]int{} // per record: how many kills left it handled and uncommitted
	inFlight := 0                   // records the killed members handled past the committed offsets
	step := n / (kills + 3)         // kill k once (k+1) steps of records were printed
	for k := range kills {
		at := (k + 1) * step
		eventually(t, "the members handling records", func() bool { return printed() >= at })
		// The victim: a member busy handling, not one that holds nothing
		// while a rebalance settles.
		victim := busy(t, running)
		running = slices.DeleteFunc(running, func(l *life) bool { return l == victim })
		if err := victim.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-victim.done
		// Its partitions stay its own for a session (1s): nobody commits
		// them before this reads.
		committed := c.committed(t)
		past := 0
		for _, s := range parse(t, victim) {
			if c, ok := committed[s.partition]; !ok || s.offset >= c {
				past++
				explained[[2]int64{int64(s.partition), s.offset}]++
			}
		}
		inFlight += past
		t.Logf("kill %d: %d records handled and not committed (of %d printed; committed %v)", k+1, past, len(parse(t, victim)), committed)
		startMember()
	}
	// A member joins, another leaves gracefully.
	startMember()
	at := (kills+1)*step + step/2
	eventually(t, "the members handling records after the join", func() bool { return printed() >= at })
	leaving := running[0]
	running = running[1:]
	if err := leaving.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-leaving.done
	if leaving.err != nil {
		t.Fatalf("the member leaving after SIGTERM: %v, want exit status 0", leaving.err)
	}

	ends := c.ends(t)
	eventually(t, "every partition committed to its end", func() bool {
		committed := c.committed(t)
		for p, e := range ends {
			if committed[p] != e {
				return false
			}
		}
		return true
	})
	for _, l := range running {
		if err := l.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
	}
	for i, l := range running {
		select {
		case <-l.done:
			if l.err != nil {
				t.Errorf("member %d after SIGTERM: %v, want exit status 0", i, l.err)
			}
		case <-time.After(wait):
			t.Fatalf("member %d did not exit after SIGTERM", i)
		}
	}

	count := map[[2]int64]int{}
	for i, l := range all {
		order := map[string]int64{}
		for _, s := range parse(t, l) {
			at := [2]int64{int64(s.partition), s.offset}
			switch {
			case s.verb == "handled" && poison[at]:
				t.Errorf("life %d: poison record %v printed as handled", i, at)
			case s.verb == "parked" && !poison[at]:
				t.Errorf("life %d: record %v parked, not a poison record", i, at)
			}
			k := fmt.Sprintf("%d/%s", s.partition, s.key)
			if was, ok := order[k]; ok && s.offset <= was {
				t.Errorf("life %d: key %s: offset %d after %d", i, k, s.offset, was)
			}
			order[k] = s.offset
			count[at]++
		}
	}
	who := map[[2]int64][]int{}
	for i, l := range all {
		for _, s := range parse(t, l) {
			at := [2]int64{int64(s.partition), s.offset}
			who[at] = append(who[at], i)
		}
	}
	pairs := map[string]int{}
	for at, ls := range who {
		if extra := len(ls) - 1 - explained[at]; extra > 0 {
			pairs[fmt.Sprint(at[0], ls)] += extra
		}
	}
	if len(pairs) > 0 {
		t.Errorf("records handled more than once that no kill left uncommitted (partition [lives]: count): %v", pairs)
	}
	dup := 0
	for _, n := range count {
		dup += n - 1
	}
	if len(count) != n {
		t.Errorf("%d records handled or parked, want %d", len(count), n)
	}
	if inFlight == 0 {
		t.Errorf("no kill found records handled and not committed: the kills tested nothing")
	}
	if dup > inFlight {
		t.Errorf("%d records handled twice, want at most the %d the killed members had not committed", dup, inFlight)
	}
	t.Logf("%d records, %d members over time, %d kills: %d handled twice (bound %d)", n, len(all), kills, dup, inFlight)

	parked := readTopic(t, c.addrs, c.dead)
	got := map[[2]int64]bool{}
	for _, r := range parked {
		var p, o int64
		for _, h := range r.Headers {
			switch h.Key {
			case kafka.HeaderPartition:
				fmt.Sscan(string(h.Value), &p)
			case kafka.HeaderOffset:
				fmt.Sscan(string(h.Value), &o)
			}
		}
		if !poison[[2]int64{p, o}] {
			t.Errorf("dead-letter topic: %q from partition %d offset %d, not a poison record", r.Value, p, o)
		}
		got[[2]int64{p, o}] = true
	}
	if len(got) != len(poison) {
		t.Errorf("dead-letter topic: %d distinct poison records, want %d", len(got), len(poison))
	}
}
