package main

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// EnvBacklog sets the backlog of TestBacklogMemory, in records; the test
// is skipped without it. RESUMABLE_KAFKA_BACKLOG=1000000 is the measure
// docs/kafka.md reports.
const EnvBacklog = "RESUMABLE_KAFKA_BACKLOG"

// A member started on a large backlog holds what its window and fetch
// buffers allow, not the backlog: the program's peak resident memory
// (VmHWM, read while it runs and after it finished the backlog) stays
// below half the backlog's bytes.
func TestBacklogMemory(t *testing.T) {
	s := os.Getenv(EnvBacklog)
	if s == "" {
		t.Skipf("set %s=1000000 to measure the memory of a member under a backlog", EnvBacklog)
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 500_000 {
		t.Fatalf("%s=%q: want a count of at least 500000 records (below, the program's own memory outweighs the backlog)", EnvBacklog, s)
	}
	c := newTestCluster(t, 4)
	// Random values, produced uncompressed: a fetch's size limits are on
	// the bytes on the wire, and a compressible backlog decodes into many
	// times what one fetch weighs.
	producer, err := kgo.NewClient(kgo.SeedBrokers(c.addrs...), kgo.DefaultProduceTopic(c.topic),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	rnd := rand.New(rand.NewPCG(1, 2))
	var backlog int64
	const batch = 10_000
	for i := 0; i < n; i += batch {
		recs := make([]*kgo.Record, min(batch, n-i))
		for j := range recs {
			value := make([]byte, 200)
			for k := range value {
				value[k] = byte(rnd.Uint32())
			}
			recs[j] = &kgo.Record{Key: fmt.Appendf(nil, "k%d", (i+j)%1000), Value: value}
			backlog += int64(len(recs[j].Key) + len(value))
		}
		if err := producer.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	bin := build(t)
	l := startLife(t, bin, []string{"-brokers", strings.Join(c.addrs, ","), "-topic", c.topic, "-group", c.group,
		"-concurrency", "16", "-dead-letter", c.dead, "-session-timeout", "1s"})
	ends := c.ends(t)
	var peak int64
	deadline := time.Now().Add(10 * time.Minute)
	for {
		peak = max(peak, hwm(t, l.cmd.Process.Pid))
		committed := c.committed(t)
		done := true
		for p, e := range ends {
			done = done && committed[p] == e
		}
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the backlog was not committed within 10 minutes")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := l.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-l.done
	t.Logf("%d records, %d MiB of keys and values: the member's peak resident memory %d MiB", n, backlog>>20, peak>>20)
	if peak > backlog/2 {
		t.Errorf("peak resident memory %d MiB, want below half the backlog's %d MiB", peak>>20, backlog>>20)
	}
}

// hwm returns the peak resident memory of process pid (VmHWM), in bytes;
// 0 once it exited.
func hwm(t *testing.T, pid int) int64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("VmHWM: %q: %v", rest, err)
			}
			return kb << 10
		}
	}
	return 0
}
