package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/resumable-go/resumable/adapters/redis"
	"github.com/resumable-go/resumable/deadletter"
	"github.com/resumable-go/resumable/internal/testkit/childproc"
	"github.com/resumable-go/resumable/internal/testkit/redistest"
)

// bin is the example's binary, built once by TestMain.
var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "redis-example")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = filepath.Join(dir, "redis-example")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// wait bounds every wait of these tests: a guard against a hang, never a
// timing assertion.
const wait = 60 * time.Second

// consumer is one consumer process, started again under the same name
// after each kill, its output appended to the same files.
type consumer struct {
	name, out, errf string
	args            []string
	proc            *childproc.Proc
}

func startConsumer(t *testing.T, srv *redistest.Server, name string, extra ...string) *consumer {
	t.Helper()
	dir := t.TempDir()
	c := &consumer{name: name, out: filepath.Join(dir, "stdout"), errf: filepath.Join(dir, "stderr"),
		args: append([]string{"-addr", srv.Addr, "-stream", "s", "-group", "g", "-consumer", name, "-dead-letter", filepath.Join(dir, "dead")}, extra...)}
	c.start(t)
	t.Cleanup(func() {
		if done, _ := c.proc.Exited(); !done {
			c.proc.Kill()
		}
	})
	return c
}

func (c *consumer) start(t *testing.T) {
	t.Helper()
	p, err := childproc.Start(c.name, bin, c.args, c.out, c.errf)
	if err != nil {
		t.Fatal(err)
	}
	c.proc = p
}

// lines returns the consumer's stdout lines so far.
func (c *consumer) lines() []string {
	b, _ := os.ReadFile(c.out)
	s := strings.TrimSpace(string(b))
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// awaitLines polls until the consumer printed n lines.
func awaitLines(t *testing.T, c *consumer, n int) []string {
	t.Helper()
	end := time.Now().Add(wait)
	for {
		if got := c.lines(); len(got) >= n {
			return got
		}
		if done, err := c.proc.Exited(); done {
			t.Fatalf("%s exited (%v) after %d lines; stderr:\n%s", c.name, err, len(c.lines()), childproc.Tail(c.errf, 20))
		}
		if time.Now().After(end) {
			t.Fatalf("%s printed %d lines after %v, want %d", c.name, len(c.lines()), wait, n)
		}
		time.Sleep(5 * time.Millisecond) // polling the child's output, bounded
	}
}

func client(t *testing.T, srv *redistest.Server) *goredis.Client {
	rdb := goredis.NewClient(&goredis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

func addEntries(t *testing.T, rdb *goredis.Client, n int, values ...string) []string {
	t.Helper()
	if len(values) == 0 {
		values = []string{"k", "v"}
	}
	var ids []string
	for range n {
		id, err := rdb.XAdd(context.Background(), &goredis.XAddArgs{Stream: "s", Values: values}).Result()
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

func prefixed(prefix string, ids []string) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = prefix + " " + id
	}
	return out
}

func pendingCount(t *testing.T, rdb *goredis.Client) int64 {
	t.Helper()
	p, err := rdb.XPending(context.Background(), "s", "g").Result()
	if err != nil {
		t.Fatal(err)
	}
	return p.Count
}

// awaitTotal polls until the consumers printed n lines together.
func awaitTotal(t *testing.T, cs []*consumer, n int) {
	t.Helper()
	end := time.Now().Add(wait)
	for {
		total := 0
		for _, c := range cs {
			total += len(c.lines())
		}
		if total >= n {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("%d lines after %v, want %d", total, wait, n)
		}
		time.Sleep(time.Millisecond) // polling the children's output, bounded
	}
}

// blockedReads counts the clients blocked in XREADGROUP (CLIENT LIST).
func blockedReads(rdb *goredis.Client) int {
	list, _ := rdb.ClientList(context.Background()).Result()
	n := 0
	for _, line := range strings.Split(list, "\n") {
		if strings.Contains(line, " flags=b ") && strings.Contains(line, " cmd=xreadgroup") {
			n++
		}
	}
	return n
}

func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// TestHandlesAndStops: entries added before the first start are handled
// in order, one line each; SIGTERM acknowledges and exits 0.
func TestHandlesAndStops(t *testing.T) {
	srv := redistest.Start(t)
	rdb := client(t, srv)
	ids := addEntries(t, rdb, 20)
	c := startConsumer(t, srv, "c1")
	awaitLines(t, c, 20)
	more := addEntries(t, rdb, 5)
	got := awaitLines(t, c, 25)
	if want := prefixed("handled", append(ids, more...)); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("stdout:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if err := c.proc.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := c.proc.Wait(wait); exitCode(err) != 0 {
		t.Fatalf("exit after SIGTERM: %v; stderr:\n%s", err, childproc.Tail(c.errf, 20))
	}
	if n := pendingCount(t, rdb); n != 0 {
		t.Errorf("pending after SIGTERM = %d, want 0", n)
	}
}

// TestPoison: a poison entry is parked at the third delivery, never
// handled, and acknowledged.
func TestPoison(t *testing.T) {
	srv := redistest.Start(t)
	rdb := client(t, srv)
	a := addEntries(t, rdb, 1)
	p := addEntries(t, rdb, 1, "poison", "1")
	b := addEntries(t, rdb, 1)
	c := startConsumer(t, srv, "c1", "-max-deliveries", "3")
	got := awaitLines(t, c, 3)
	want := []string{"handled " + a[0], "parked " + p[0], "handled " + b[0]}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("stdout:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	var parked []deadletter.Record[redis.Entry, string]
	for rec, err := range deadletter.Read[redis.Entry, string](filepath.Join(filepath.Dir(c.out), "dead")) {
		if err != nil {
			t.Fatal(err)
		}
		parked = append(parked, rec)
	}
	if len(parked) != 1 || parked[0].Cursor != p[0] || parked[0].Event.Deliveries > 3 {
		t.Errorf("dead letter = %+v, want the poison entry %s", parked, p[0])
	}
	if err := c.proc.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := c.proc.Wait(wait); exitCode(err) != 0 {
		t.Fatalf("exit after SIGTERM: %v", err)
	}
	if n := pendingCount(t, rdb); n != 0 {
		t.Errorf("pending = %d, want 0: the parked entry is acknowledged", n)
	}
}

// TestVanished: the stream or the group disappears or is recreated while
// consumers run: each exits 1, saying so, having printed nothing more;
// nothing is recreated.
func TestVanished(t *testing.T) {
	tests := []struct {
		name     string
		change   func(srv *redistest.Server, rdb *goredis.Client) error
		noStream bool // the stream must not exist afterwards
	}{
		{name: "server restarted without persistence", change: func(srv *redistest.Server, _ *goredis.Client) error { return srv.Restart() }, noStream: true},
		{name: "stream deleted", change: func(_ *redistest.Server, rdb *goredis.Client) error { return rdb.Del(context.Background(), "s").Err() }, noStream: true},
		{name: "group destroyed", change: func(_ *redistest.Server, rdb *goredis.Client) error {
			return rdb.XGroupDestroy(context.Background(), "s", "g").Err()
		}},
		{name: "group recreated", change: func(_ *redistest.Server, rdb *goredis.Client) error {
			if err := rdb.XGroupDestroy(context.Background(), "s", "g").Err(); err != nil {
				return err
			}
			return rdb.XGroupCreate(context.Background(), "s", "g", "0").Err()
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := redistest.Start(t)
			rdb := client(t, srv)
			addEntries(t, rdb, 4)
			c1 := startConsumer(t, srv, "c1")
			c2 := startConsumer(t, srv, "c2")
			end := time.Now().Add(wait)
			// Both consumers started (their first start may create the
			// group), the entries were handled, and both wait in a
			// blocking read (a consumer that found nothing to read is no
			// member of the group yet: Redis 7.0 makes one when it serves
			// it).
			for (len(c1.lines())+len(c2.lines()) < 4 || blockedReads(rdb) < 2) && time.Now().Before(end) {
				time.Sleep(5 * time.Millisecond) // polling the children's output, bounded
			}
			before := len(c1.lines()) + len(c2.lines())
			if before != 4 {
				t.Fatalf("%d lines before the change, want 4", before)
			}
			if err := tt.change(srv, rdb); err != nil {
				t.Fatal(err)
			}
			for _, c := range []*consumer{c1, c2} {
				// The program promises to notice within 10s.
				err := c.proc.Wait(10 * time.Second)
				if exitCode(err) != 1 {
					t.Errorf("%s: exit = %v, want status 1 within 10s", c.name, err)
				}
				if msg := childproc.Tail(c.errf, 5); !strings.Contains(msg, "disappeared or was recreated") {
					t.Errorf("%s: stderr does not say what happened:\n%s", c.name, msg)
				}
			}
			if after := len(c1.lines()) + len(c2.lines()); after != before {
				t.Errorf("%d lines after the change, want %d", after, before)
			}
			if tt.noStream {
				if n, err := rdb.Exists(context.Background(), "s").Result(); err != nil || n != 0 {
					t.Errorf("EXISTS s = %d, %v; want 0: nothing recreated", n, err)
				}
			}
		})
	}
}

// TestKills is the three-worker pool of issue 44: three consumers of one
// group with the program's defaults, entries added (1% poison) while the
// consumers are SIGKILLed and restarted under the same names. Every entry
// is handled at least once, or parked when poison; each poison entry is
// parked, never handled, and parked a second time only after a kill
// between its dead-letter record and its acknowledgement (the record then
// says the limit was reached before the call); no healthy entry is parked;
// the pending list is empty at the end. The duplicates and the throughput
// are logged. By default 2,000 entries and 5 kills; RESUMABLE_SOAK=1 (or
// RESUMABLE_REDIS_SOAK=1) runs the 20,000 entries and 10 kills.
// RESUMABLE_REDIS_EXAMPLE_BIN runs another build of the program (an older
// version, to compare its numbers).
func TestKills(t *testing.T) {
	entries, kills := 2000, 5
	if os.Getenv("RESUMABLE_SOAK") != "" || os.Getenv("RESUMABLE_REDIS_SOAK") != "" {
		entries, kills = 20000, 10
	}
	if other := os.Getenv("RESUMABLE_REDIS_EXAMPLE_BIN"); other != "" {
		defer func(b string) { bin = b }(bin)
		bin = other
	}
	srv := redistest.Start(t)
	rdb := client(t, srv)
	if err := rdb.XGroupCreateMkStream(context.Background(), "s", "g", "0").Err(); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	cs := []*consumer{startConsumer(t, srv, "c1"), startConsumer(t, srv, "c2"), startConsumer(t, srv, "c3")}
	rng := rand.New(rand.NewPCG(1, 2))
	var ids []string
	poison := map[string]bool{} // every 100th entry
	inHand := 0                 // entries pending for the killed consumers at their deaths
	batch := entries / (kills + 1)
	for k := 0; len(ids) < entries; k++ {
		for n := min(batch, entries-len(ids)); n > 0; {
			// In pipelines of 100: the consumers, not the adding, set
			// the pace.
			k := min(n, 100)
			cmds := make([]*goredis.StringCmd, k)
			_, err := rdb.Pipelined(context.Background(), func(p goredis.Pipeliner) error {
				for i := range cmds {
					values := []string{"k", "v"}
					if (len(ids)+i)%100 == 99 {
						values = []string{"poison", "1"}
					}
					cmds[i] = p.XAdd(context.Background(), &goredis.XAddArgs{Stream: "s", Values: values})
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			for i, cmd := range cmds {
				if (len(ids)+i)%100 == 99 {
					poison[cmd.Val()] = true
				}
			}
			for _, cmd := range cmds {
				ids = append(ids, cmd.Val())
			}
			n -= k
		}
		if k < kills {
			// Kill a consumer once some of this batch was handled: in
			// the middle of the group's work.
			awaitTotal(t, cs, len(ids)-batch+1+rng.IntN(batch/2)-len(poison))
			c := cs[rng.IntN(len(cs))]
			c.proc.Kill()
			if err := c.proc.Wait(wait); err == nil {
				t.Fatalf("%s: exited 0 after SIGKILL", c.name)
			}
			// What the killed consumer held: read, maybe handled, not
			// acknowledged; its next life reads these first.
			p, err := rdb.XPendingExt(context.Background(), &goredis.XPendingExtArgs{Stream: "s", Group: "g", Start: "-", End: "+", Count: 10000, Consumer: c.name}).Result()
			if err != nil {
				t.Fatal(err)
			}
			inHand += len(p)
			c.start(t)
		}
	}
	want := make(map[string]bool, len(ids))
	for _, id := range ids {
		want[id] = true
	}
	end := time.Now().Add(5 * wait)
	var handled, parked map[string]int
	for {
		handled, parked = map[string]int{}, map[string]int{}
		for _, c := range cs {
			for _, l := range c.lines() {
				if id, ok := strings.CutPrefix(l, "handled "); ok {
					handled[id]++
				} else if id, ok := strings.CutPrefix(l, "parked "); ok {
					parked[id]++
				}
			}
		}
		if len(handled)+len(parked) >= len(want) && pendingCount(t, rdb) == 0 {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("after %v: %d of %d entries handled or parked, %d pending", 5*wait, len(handled)+len(parked), len(want), pendingCount(t, rdb))
		}
		time.Sleep(20 * time.Millisecond) // polling the children's output, bounded
	}
	elapsed := time.Since(began)
	for id := range want {
		if handled[id] == 0 && parked[id] == 0 {
			t.Errorf("entry %s lost: neither handled nor parked", id)
		}
	}
	for id := range poison {
		if parked[id] == 0 || handled[id] > 0 {
			t.Errorf("poison entry %s: parked %d times, handled %d times; want parked, never handled", id, parked[id], handled[id])
		}
	}
	// Each park is recorded once, at the limit of 3 handler calls: in the
	// third call, or, after a kill in that call, before a fourth. A kill
	// between the record and the acknowledgement prints a second "parked"
	// line, without a second record.
	records := map[string][]string{}
	for _, c := range cs {
		for rec, err := range deadletter.Read[redis.Entry, string](filepath.Join(filepath.Dir(c.out), "dead")) {
			if err != nil {
				t.Fatal(err)
			}
			if !poison[rec.Cursor] {
				t.Errorf("parked %s, not a poison entry", rec.Cursor)
			}
			if !strings.Contains(rec.Err, "in handler call 3, the limit") && !strings.Contains(rec.Err, "the limit is 3") {
				t.Errorf("parked %s: %s; want parked at the limit of 3 handler calls", rec.Cursor, rec.Err)
			}
			records[rec.Cursor] = append(records[rec.Cursor], c.name+": "+rec.Err)
		}
	}
	reparked := 0 // poison entries settled as parked twice: killed between the record and the acknowledgement
	for id := range poison {
		if n := len(records[id]); n != 1 {
			t.Errorf("poison entry %s: %d dead-letter records %q, want 1", id, n, records[id])
		}
		if parked[id] > 1 {
			reparked++
		}
	}
	if reparked > kills {
		t.Errorf("%d poison entries settled twice after %d kills: at most one a kill", reparked, kills)
	}
	dups := 0
	for id, n := range handled {
		if !want[id] {
			t.Errorf("handled %s, which was never added", id)
		}
		dups += n - 1
	}
	for _, c := range cs {
		if err := c.proc.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := c.proc.Wait(wait); exitCode(err) != 0 {
			t.Errorf("%s: exit after SIGTERM: %v; stderr:\n%s", c.name, err, childproc.Tail(c.errf, 10))
		}
	}
	t.Logf("%d entries (%d poison), %d kills (%d entries pending for the killed consumers): 0 lost, %d duplicates (%s per kill), %d poison entries settled twice (one record each); %v from the first start to the last entry: %.0f entries/s",
		len(want), len(poison), kills, inHand, dups, strconv.FormatFloat(float64(dups)/float64(kills), 'f', 1, 64), reparked, elapsed.Round(time.Millisecond), float64(len(want))/elapsed.Seconds())
	// Each kill can redeliver at most what the killed consumer held
	// unacknowledged: one read (100 entries) and the acknowledgements
	// waiting for the next one (up to 200).
	if limit := kills * 300; dups > limit {
		t.Errorf("%d duplicates after %d kills, more than %d", dups, kills, limit)
	}
}
