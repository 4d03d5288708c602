package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/resumable-go/resumable/adapters/kafka"
	"github.com/resumable-go/resumable/internal/testkit/pgtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(pgtest.Main(m))
}

// wait bounds every wait of these tests: a guard against a hang, never a
// timing assertion.
const wait = 60 * time.Second

func TestDemo(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), &out, nil); err != nil {
		t.Fatalf("run() = %v, want nil", err)
	}
	if !strings.HasSuffix(out.String(), ": ok\n") {
		t.Errorf("demo printed %q, want a line ending in \": ok\"", out.String())
	}
}

// build builds the example into a temporary directory.
func build(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "kafka-example")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// life is one run of the example's process.
type life struct {
	cmd  *exec.Cmd
	out  string
	done chan struct{} // closed when the process exited
	err  error         // what Wait returned, once done is closed
}

func startLife(t *testing.T, bin string, args []string) *life {
	t.Helper()
	out := filepath.Join(t.TempDir(), "stdout")
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	l := &life{cmd: cmd, out: out, done: make(chan struct{})}
	go func() {
		l.err = cmd.Wait()
		close(l.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-l.done
	})
	return l
}

// lines returns the lines the process printed so far.
func (l *life) lines(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(l.out)
	if err != nil {
		t.Fatal(err)
	}
	var ls []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		ls = append(ls, sc.Text())
	}
	// A line still being written (no newline yet) is not counted.
	if len(b) > 0 && b[len(b)-1] != '\n' && len(ls) > 0 {
		ls = ls[:len(ls)-1]
	}
	return ls
}

// The pinned command line, SIGKILLed three times mid-stream and restarted,
// then stopped with SIGTERM: every record is handled (or parked) at least
// once, records of a key in offset order within each process's life,
// poison records only in the dead-letter topic, never printed as handled,
// and the committed offsets end at the topic's end.
//
// RESUMABLE_KAFKA_KILLS=15 kills more often (and produces 1,500 records
// more per kill); RESUMABLE_KAFKA_BROKERS runs it against a real cluster.
func TestKillAndRestart(t *testing.T) {
	kills := 3
	if s := os.Getenv("RESUMABLE_KAFKA_KILLS"); s != "" {
		k, err := strconv.Atoi(s)
		if err != nil || k < 0 {
			t.Fatalf("RESUMABLE_KAFKA_KILLS=%q: want a count", s)
		}
		kills = k
	}
	n, keys := 4000+1500*max(0, kills-3), 100
	bin := build(t)
	c := newTestCluster(t, 4)
	cl, adm := c.cl, c.adm
	recs := make([]*kgo.Record, n)
	for i := range recs {
		v := fmt.Sprintf("order %d", i)
		if i%100 == 42 {
			v = "poison " + v
		}
		recs[i] = &kgo.Record{Key: fmt.Appendf(nil, "k%d", i%keys), Value: []byte(v)}
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	poison := map[[2]int64]bool{}
	for _, r := range recs {
		if strings.HasPrefix(string(r.Value), "poison") {
			poison[[2]int64{int64(r.Partition), r.Offset}] = true
		}
	}

	args := []string{"-brokers", strings.Join(c.addrs, ","), "-topic", c.topic, "-group", c.group,
		"-concurrency", "8", "-work", "2ms", "-max-deliveries", "3", "-dead-letter", c.dead, "-session-timeout", "1s"}
	var lives []*life
	for range kills {
		l := startLife(t, bin, args)
		lives = append(lives, l)
		eventually(t, "the process handling records", func() bool { return len(l.lines(t)) >= 300 })
		if err := l.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-l.done
	}
	last := startLife(t, bin, args)
	lives = append(lives, last)
	ends, err := adm.ListEndOffsets(context.Background(), c.topic)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "every partition committed to its end", func() bool {
		committed, err := adm.FetchOffsets(context.Background(), c.group)
		if err != nil {
			return false
		}
		all := true
		ends.Each(func(e kadm.ListedOffset) {
			o, ok := committed.Lookup(c.topic, e.Partition)
			all = all && ok && o.At == e.Offset
		})
		return all
	})
	if err := last.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-last.done:
		if last.err != nil {
			t.Fatalf("after SIGTERM: %v, want exit status 0", last.err)
		}
	case <-time.After(wait):
		t.Fatal("the process did not exit after SIGTERM")
	}

	seen := map[[2]int64]int{}
	for i, l := range lives {
		order := map[string]int64{}
		for _, line := range l.lines(t) {
			var verb, key string
			var p, o int64
			if _, err := fmt.Sscanf(line, "%s %d %d %s", &verb, &p, &o, &key); err != nil {
				t.Fatalf("life %d: bad line %q", i, line)
			}
			at := [2]int64{p, o}
			switch {
			case verb == "handled" && poison[at]:
				t.Errorf("life %d: poison record %v printed as handled", i, at)
			case verb == "parked" && !poison[at]:
				t.Errorf("life %d: record %v parked, not a poison record", i, at)
			}
			k := fmt.Sprintf("%d/%s", p, key)
			if was, ok := order[k]; ok && o <= was {
				t.Errorf("life %d: key %s: offset %d after %d", i, k, o, was)
			}
			order[k] = o
			seen[at]++
		}
	}
	dup := 0
	for _, c := range seen {
		dup += c - 1
	}
	if len(seen) != n {
		t.Errorf("%d records handled or parked, want %d", len(seen), n)
	}
	t.Logf("%d records, %d kills: %d handled more than once", n, kills, dup)

	// The dead-letter topic holds poison records only, every one of them
	// (some twice: a kill between a park and its commit parks it again).
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
		if !strings.HasPrefix(string(r.Value), "poison") || !poison[[2]int64{p, o}] {
			t.Errorf("dead-letter topic: %q from partition %d offset %d, not a poison record", r.Value, p, o)
		}
		got[[2]int64{p, o}] = true
	}
	if len(got) != len(poison) {
		t.Errorf("dead-letter topic: %d distinct poison records, want %d", len(got), len(poison))
	}
}

// readTopic reads every record of topic.
func readTopic(t *testing.T, brokers []string, topic string) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	var got []*kgo.Record
	for int64(len(got)) < total {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		got = append(got, fs.Records()...)
	}
	return got
}

// eventually polls cond until it holds, or fails the test after wait.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
