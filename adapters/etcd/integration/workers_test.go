package integration_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/resumable-go/resumable/adapters/etcd"
	"github.com/resumable-go/resumable/adapters/etcd/internal/cluster"
	"github.com/resumable-go/resumable/adapters/etcd/internal/hrw"
	"github.com/resumable-go/resumable/cursor"
)

var (
	fourStreams  = []string{"s1", "s2", "s3", "s4"}
	threeWorkers = []string{"w1", "w2", "w3"}
)

// checkpointEvery is the workers' checkpoint cadence in the kill test: the
// bound on what a killed owner's successor handles again.
const checkpointEvery = 10

// startThree starts a cluster, a writer and three workers over four
// streams, and waits until the streams are spread and handled.
func startThree(t *testing.T, extra ...string) (*cluster.Cluster, *clientv3.Client, *fleet, *writer, map[string]string) {
	c := cluster.Start(t, 3)
	cl := c.Client(t)
	f := newFleet(t, c, extra...)
	for _, id := range threeWorkers {
		f.start(id, fourStreams)
	}
	w := startWriter(t, cl, "/streams/", fourStreams, 10*time.Millisecond)
	owners := awaitPicks(t, cl, fourStreams, threeWorkers)
	f.await("every stream handled by its owner", func(lines []line) bool {
		for s, m := range owners {
			if !slices.ContainsFunc(lines, func(l line) bool { return l.Stream == s && l.Worker == m }) {
				return false
			}
		}
		return true
	})
	return c, cl, f, w, owners
}

// handledCounts returns how often each event was handled, and by whom.
func handledCounts(lines []line) map[event][]string {
	out := map[event][]string{}
	for _, l := range lines {
		out[l.Event] = append(out[l.Event], l.Worker)
	}
	return out
}

// TestKillOwner kills a worker that owns streams: a survivor takes each of
// them over within the lease TTL plus 2 s, every event is handled at least
// once, and what is handled twice is bounded by the checkpoint cadence.
func TestKillOwner(t *testing.T) {
	_, cl, f, w, owners := startThree(t, "-checkpoint-every", fmt.Sprint(checkpointEvery), "-checkpoint-interval", "0")
	victim, moved := mostStreams(owners)
	t.Logf("owners %v; killing %s, owner of %v", owners, victim, moved)

	killed := time.Now()
	f.workers[victim].proc.Kill()
	f.await("a survivor handling each stream of the killed worker", func(lines []line) bool {
		return len(firstAfter(lines, moved, victim, killed)) == len(moved)
	})
	for s, l := range firstAfter(f.snapshot(), moved, victim, killed) {
		took := l.Seen.Sub(killed)
		t.Logf("stream %s: taken over by %s %v after SIGKILL (lease TTL %v)", s, l.Worker, took.Round(time.Millisecond), ttl)
		if took > ttl+2*time.Second {
			t.Errorf("stream %s taken over %v after SIGKILL, want within the lease TTL %v + 2s", s, took, ttl)
		}
	}
	survivors := slices.DeleteFunc(slices.Clone(threeWorkers), func(m string) bool { return m == victim })
	awaitPicks(t, cl, fourStreams, survivors)
	w.halt()
	events := history(t, cl, "/streams/", 1)
	f.awaitHandled(events)

	redelivered := map[string]int{}
	for e, by := range handledCounts(f.snapshot()) {
		if len(by) > 1 {
			redelivered[streamOf(e.Key)]++
			if len(by) > 2 || !slices.Contains(by, victim) {
				t.Errorf("event %v handled by %v: only an event of the killed worker may be handled again, once", e, by)
			}
		}
	}
	for _, s := range fourStreams {
		n := redelivered[s]
		t.Logf("stream %s: %d events handled again", s, n)
		switch {
		case !slices.Contains(moved, s) && n > 0:
			t.Errorf("stream %s, not owned by the killed worker: %d events handled again, want 0", s, n)
		case n > checkpointEvery:
			t.Errorf("stream %s: %d events handled again, want at most the checkpoint cadence %d", s, n, checkpointEvery)
		}
	}
	for _, id := range survivors {
		f.terminate(id)
	}
	checkMonotonic(t, cl, fourStreams)
}

// TestTerminateOwner stops a worker that owns streams with SIGTERM: it
// exits 0, its streams move to others within 2 s (no wait for its lease),
// and nothing is handled twice.
func TestTerminateOwner(t *testing.T) {
	_, cl, f, w, owners := startThree(t)
	victim, moved := mostStreams(owners)
	t.Logf("owners %v; stopping %s, owner of %v", owners, victim, moved)

	stopped := time.Now()
	f.terminate(victim)
	exited := time.Since(stopped)
	f.await("another worker handling each stream of the stopped one", func(lines []line) bool {
		return len(firstAfter(lines, moved, victim, stopped)) == len(moved)
	})
	for s, l := range firstAfter(f.snapshot(), moved, victim, stopped) {
		took := l.Seen.Sub(stopped)
		t.Logf("stream %s: taken over by %s %v after SIGTERM (the worker exited after %v)", s, l.Worker, took.Round(time.Millisecond), exited.Round(time.Millisecond))
		if took > 2*time.Second {
			t.Errorf("stream %s taken over %v after SIGTERM, want within 2s", s, took)
		}
	}
	for _, s := range moved {
		f.awaitStderr(victim, "released "+s)
	}
	survivors := slices.DeleteFunc(slices.Clone(threeWorkers), func(m string) bool { return m == victim })
	awaitPicks(t, cl, fourStreams, survivors)
	w.halt()
	events := history(t, cl, "/streams/", 1)
	f.awaitHandled(events)
	for e, by := range handledCounts(f.snapshot()) {
		if len(by) > 1 {
			t.Errorf("event %v handled by %v, want once: a graceful handoff redelivers nothing", e, by)
		}
	}
	for _, id := range survivors {
		f.terminate(id)
	}
	checkMonotonic(t, cl, fourStreams)
}

// TestPausedOwner pauses the owner of a stream (SIGSTOP) for longer than
// its lease, lets another worker take over and commit, then resumes it
// (SIGCONT).
//
// What is guaranteed, and checked here:
//   - Fenced writes: the paused worker's next Save is refused by etcd (its
//     owner key went with its lease), it reports the stream lost, and the
//     stored cursor never goes back.
//   - No new handling: before each event a worker checks that its lease
//     cannot have expired by its own clock. After the pause the check
//     fails, so the worker hands no further event to its handler. The only
//     line it may still print is that of the event whose check passed just
//     before the pause froze it (the check and the print are two steps, and
//     a pause can fall between them; nothing can make a print to stdout
//     conditional on a lease). So after SIGCONT it prints at most one line,
//     and only for the event right after the last one it printed before the
//     pause.
//
// Hence no line for an event older than the successor's committed cursor
// appears after the successor's first commit, except possibly that one
// in-flight event.
func TestPausedOwner(t *testing.T) {
	c := cluster.Start(t, 3)
	cl := c.Client(t)
	f := newFleet(t, c)
	streams := []string{"s"}
	// The paused worker saves rarely, so that it has a Save to make when
	// it resumes.
	a := f.start("a", streams, "-checkpoint-every", "1000", "-checkpoint-interval", "0")
	w := startWriter(t, cl, "/streams/", streams, 20*time.Millisecond)
	awaitPicks(t, cl, streams, []string{"a"})
	f.await("a handling", func(lines []line) bool { return len(lines) >= 5 })

	if err := a.proc.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if err := a.proc.AwaitStopped(deadline); err != nil {
		t.Fatal(err)
	}
	paused := time.Now()
	before := f.snapshot() // everything a printed before it stopped
	last := before[len(before)-1]

	// A successor that rendezvous hashing prefers, so that a does not win
	// the stream back when it rejoins.
	b := "b"
	for i := 0; hrw.Score(b, "s") < hrw.Score("a", "s"); i++ {
		b = fmt.Sprintf("b%d", i)
	}
	f.start(b, streams, "-checkpoint-every", "1")
	f.await(b+" handling", func(lines []line) bool {
		return slices.ContainsFunc(lines, func(l line) bool { return l.Worker == b })
	})
	took := time.Since(paused)
	committed := awaitCursor(t, cl, "s")
	t.Logf("%s took over %v after the pause (lease TTL %v); its first commit: %v", b, took.Round(time.Millisecond), ttl, committed)

	if err := a.proc.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	lost := f.awaitStderr("a", "lost s:")
	t.Logf("a after SIGCONT: %s", lost)
	if !strings.Contains(lost, "refused") {
		t.Errorf("a's report of the lost stream does not say its Save was refused: %s", lost)
	}
	// Let the successor go on for a while, then look at what a printed.
	n := len(f.snapshot())
	f.await("the successor going on", func(lines []line) bool { return len(lines) >= n+50 })
	w.halt()

	var afterPause []line
	for _, l := range f.snapshot() {
		if l.Worker == "a" && l.Offset > last.Offset {
			afterPause = append(afterPause, l)
		}
	}
	order := history(t, cl, "/streams/s/", 1)
	next := slices.Index(order, last.Event) + 1
	switch {
	case len(afterPause) > 1:
		t.Errorf("a printed %d lines after SIGCONT, want at most 1: %v", len(afterPause), afterPause)
	case len(afterPause) == 1 && (next >= len(order) || afterPause[0].Event != order[next]):
		t.Errorf("a printed %v after SIGCONT; the only line allowed is the event after %v", afterPause[0].Event, last.Event)
	}
	t.Logf("a printed %d lines after SIGCONT", len(afterPause))

	events := history(t, cl, "/streams/", 1)
	f.awaitHandled(events)
	checkMonotonic(t, cl, streams)
	if final := awaitCursor(t, cl, "s"); compareCursors(final, committed) < 0 {
		t.Errorf("final cursor %v is before the successor's first commit %v", final, committed)
	}
	f.terminate("a")
	f.terminate(b)
}

// awaitCursor waits until stream's cursor key exists and returns it.
func awaitCursor(t *testing.T, c *clientv3.Client, stream string) etcd.Cursor {
	t.Helper()
	end := time.Now().Add(deadline)
	for {
		resp, err := c.Get(ctxFor(t), "/resumable/cursors/"+stream)
		if err != nil {
			t.Fatalf("Get() = %v", err)
		}
		if len(resp.Kvs) > 0 {
			cur, err := cursor.JSON[etcd.Cursor]().Decode(resp.Kvs[0].Value)
			if err != nil {
				t.Fatalf("cursor: %v", err)
			}
			return cur
		}
		if time.Now().After(end) {
			t.Fatalf("no cursor for %s", stream)
		}
		time.Sleep(pollInterval)
	}
}

// TestLeaderKilled kills the etcd leader while three workers and an
// in-process stream run: the watches resume without loss — every event is
// handled by a worker, and the in-process stream delivers every event of
// its prefix exactly once, in order.
func TestLeaderKilled(t *testing.T) {
	c, cl, f, w, _ := startThree(t)
	ctx, cancel := context.WithCancel(ctxFor(t))
	defer cancel()
	var (
		got  []event
		done = make(chan error, 1)
	)
	mine := c.Client(t)
	r, err := etcd.NewResumer(mine, "/streams/s1/", cursor.NewMemory(etcd.Cursor{}))
	if err != nil {
		t.Fatalf("NewResumer() = %v", err)
	}
	go func() {
		done <- r.Run(ctx, func(_ context.Context, ev etcd.Event) error {
			got = append(got, event{Key: string(ev.Key), Rev: ev.ModRevision})
			return nil
		})
	}()
	n := len(f.snapshot())
	f.await("events flowing", func(lines []line) bool { return len(lines) >= n+40 })

	leader := c.Leader(t)
	t.Logf("killing the leader, member %d", leader)
	killed := time.Now()
	c.Kill(t, leader)
	f.await("events handled after the new leader", func(lines []line) bool {
		after := 0
		for _, l := range lines {
			if l.Seen.After(killed) {
				after++
			}
		}
		return after >= 100
	})
	w.halt()
	events := history(t, cl, "/streams/", 1)
	f.awaitHandled(events)

	var want []event
	for _, e := range events {
		if streamOf(e.Key) == "s1" {
			want = append(want, e)
		}
	}
	end := time.Now().Add(deadline)
	for r.Stats().Events < uint64(len(want)) && time.Now().Before(end) {
		time.Sleep(pollInterval)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Run() = %v, want %v", err, context.Canceled)
	}
	if !slices.Equal(want, got) {
		t.Errorf("the in-process stream got %d events, want the %d of the history in order\nfirst difference at %d", len(got), len(want), firstDiff(want, got))
	}
	t.Logf("in-process stream: %d events, %d reopens, stats %+v", len(got), r.Stats().Opens-1, r.Stats())
	for _, id := range threeWorkers {
		f.terminate(id)
	}
}

func firstDiff(a, b []event) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
