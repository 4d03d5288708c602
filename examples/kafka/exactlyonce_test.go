package main

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/resumable-go/resumable/internal/testkit/pgtest"
)

// The command line with -postgres, SIGKILLed twice mid-stream and
// restarted: every record's effect is in kafka_effects exactly once (none
// of a poison record), and each partition's cursor row holds its last
// offset, although the group's committed offsets lagged at every kill.
// RESUMABLE_KAFKA_BROKERS runs it against a real cluster.
func TestExactlyOnceIntoPostgres(t *testing.T) {
	const n, kills = 2000, 2
	dsn := pgtest.Shared(t).CreateDB(t)
	bin := build(t)
	c := newTestCluster(t, 4)
	cl := c.cl
	recs := make([]*kgo.Record, n)
	for i := range recs {
		v := fmt.Sprintf("order %d", i)
		if i%100 == 42 {
			v = "poison " + v
		}
		recs[i] = &kgo.Record{Key: fmt.Appendf(nil, "k%d", i%50), Value: []byte(v)}
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	poison := 0
	last, applied := map[int32]int64{}, map[int32]int64{} // per partition: the last record, the last not poison
	for _, r := range recs {
		if strings.HasPrefix(string(r.Value), "poison") {
			poison++
		} else {
			applied[r.Partition] = max(applied[r.Partition], r.Offset)
		}
		last[r.Partition] = max(last[r.Partition], r.Offset)
	}

	ctx := pgtest.Ctx(t)
	db, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(context.Background())
	effects := func() (rows int) {
		// The table is made by the first process.
		if err := db.QueryRow(ctx, `SELECT count(*) FROM kafka_effects`).Scan(&rows); err != nil {
			return -1
		}
		return rows
	}

	args := []string{"-brokers", strings.Join(c.addrs, ","), "-topic", c.topic, "-group", c.group, "-dead-letter", c.dead,
		"-work", "1ms", "-max-deliveries", "2", "-session-timeout", "1s", "-postgres", dsn}
	at := 0
	for k := range kills {
		l := startLife(t, bin, args)
		at += n / (kills + 2)
		eventually(t, "the process applying records", func() bool { return effects() >= at })
		if err := l.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-l.done
		t.Logf("kill %d after %d effects", k+1, effects())
	}
	final := startLife(t, bin, args)
	eventually(t, "every record applied", func() bool { return effects() >= n-poison })
	if err := final.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-final.done
	if final.err != nil {
		t.Fatalf("after SIGTERM: %v, want exit status 0", final.err)
	}

	var rows, distinct, poisoned int
	if err := db.QueryRow(ctx, `SELECT count(*), count(DISTINCT (partition, "offset")), count(*) FILTER (WHERE value LIKE 'poison%')
		FROM kafka_effects`).Scan(&rows, &distinct, &poisoned); err != nil {
		t.Fatal(err)
	}
	if rows != n-poison || distinct != n-poison || poisoned != 0 {
		t.Errorf("kafka_effects: %d rows, %d distinct records, %d poison; want %d, %d, 0", rows, distinct, poisoned, n-poison, n-poison)
	}
	for p, want := range last {
		var got int64
		if err := db.QueryRow(ctx, `SELECT max("offset") FROM kafka_effects WHERE partition = $1`, p).Scan(&got); err != nil {
			t.Fatal(err)
		}
		var enc []byte
		if err := db.QueryRow(ctx, `SELECT cursor FROM resumable_cursors WHERE stream = $1`, fmt.Sprintf("kafka/%s/%d", c.topic, p)).Scan(&enc); err != nil {
			t.Fatalf("partition %d's cursor: %v", p, err)
		}
		if c := strings.TrimSpace(string(enc)); c != fmt.Sprint(want) || got != applied[p] {
			t.Errorf("partition %d: cursor %s, last effect at %d; want %d, %d", p, c, got, want, applied[p])
		}
	}
}
