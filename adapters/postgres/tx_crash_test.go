package postgres_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/resumable-go/resumable/internal/testkit/pgtest"
)

// envCrashKills sets how many times the crash test kills its child; a
// handful by default.
const envCrashKills = "RESUMABLE_PG_CRASH_KILLS"

// TestZombieExactlyOnce starts two processes on the same stream, both
// having loaded the same cursor, several times: one commits, the other's
// compare-and-set fails, its transaction rolls back and its Run stops with
// ErrCursorChanged. Every event's effect exists once.
func TestZombieExactlyOnce(t *testing.T) {
	const rounds, n = 4, 200
	dsn := pgtest.NewDB(t)
	pool, _ := newPool(t, dsn)
	for round := range rounds {
		name := fmt.Sprintf("zombie%d", round)
		table := "effects_" + name
		execSQL(t, pool, "CREATE TABLE "+table+" (seq bigint NOT NULL)")
		if round%2 == 1 { // the row exists: the compare-and-set is an UPDATE
			save(t, newStore(t, pool, name), 0)
		}
		env := []string{envDSN, dsn, envStream, name, envEffects, table, envEvents, strconv.Itoa(n)}
		var codes, handled [2]int
		type proc struct {
			wait  func() int
			lines func() []string
		}
		var cmds [2]proc
		var gos [2]func()
		for i := range 2 {
			cmd, out, in := startChild(t, roleZombie, env...)
			if !out.Scan() || out.Text() != "ready" {
				t.Fatalf("round %d: child %d did not get ready: %q %v", round, i, out.Text(), out.Err())
			}
			gos[i] = func() { fmt.Fprintln(in, "go"); in.Close() }
			cmds[i] = proc{
				wait: func() int { return exitCode(t, cmd) },
				lines: func() []string {
					var l []string
					for out.Scan() {
						l = append(l, out.Text())
					}
					return l
				},
			}
		}
		gos[0]()
		gos[1]()
		for i := range 2 {
			lines := cmds[i].lines()
			codes[i] = cmds[i].wait()
			if len(lines) != 1 || !strings.HasPrefix(lines[0], "handled ") {
				t.Fatalf("round %d: child %d printed %q, want handled N", round, i, lines)
			}
			handled[i], _ = strconv.Atoi(strings.TrimPrefix(lines[0], "handled "))
		}
		if codes[0] > codes[1] {
			codes[0], codes[1] = codes[1], codes[0]
			handled[0], handled[1] = handled[1], handled[0]
		}
		if codes != [2]int{exitDone, exitChanged} || handled != [2]int{n, 0} {
			t.Errorf("round %d: exit codes %v, events handled %v; want [%d %d] and [%d 0]", round, codes, handled, exitDone, exitChanged, n)
		}
		if got, dups := effects(t, pool, table); got != want(n) || len(dups) != 0 {
			t.Errorf("round %d: effects = %s, duplicates %v; want %s", round, got, dups, want(n))
		}
	}
}

// TestCrashExactlyOnce kills a process consuming 10,000 numbered events
// with SIGKILL at random moments (inside its transactions, between them,
// during commits), then runs one to the end: every event's effect exists
// exactly once, in a table without a unique constraint.
func TestCrashExactlyOnce(t *testing.T) { crashExactlyOnce(t, roleCrash) }

// TestBatchCrashExactlyOnce is TestCrashExactlyOnce through RunBatch and
// TransactionalBatch: killed inside a batch's transaction, between batches
// or during a commit, every event's effect exists exactly once.
func TestBatchCrashExactlyOnce(t *testing.T) { crashExactlyOnce(t, roleBatch) }

// crashExactlyOnce kills a child in role at random moments, then runs one
// to the end, and checks the effects.
func crashExactlyOnce(t *testing.T, role string) {
	const n = 10000
	kills := 5
	if v := os.Getenv(envCrashKills); v != "" {
		k, err := strconv.Atoi(v)
		if err != nil || k < 0 {
			t.Fatalf("%s=%q: not a count", envCrashKills, v)
		}
		kills = k
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d, %d kills", seed, kills)
	rng := rand.New(rand.NewPCG(seed, seed))
	dsn := pgtest.NewDB(t)
	pool, _ := newPool(t, dsn)
	execSQL(t, pool, "CREATE TABLE effects (seq bigint NOT NULL)")
	env := []string{envDSN, dsn, envStream, role, envEffects, "effects", envEvents, strconv.Itoa(n)}
	span := n / (kills + 1) // a life handles up to span events: about half the feed is left for the last run
	killed, last := 0, int64(0)
	for killed < kills {
		cmd, out, in := startChild(t, role, env...)
		defer in.Close()
		target := int64(-1)
		for out.Scan() {
			seq, err := strconv.ParseInt(out.Text(), 10, 64)
			if err != nil {
				t.Fatalf("child printed %q", out.Text())
			}
			if target < 0 {
				target = seq + int64(rng.IntN(span))
			}
			last = seq
			if seq >= target {
				cmd.Process.Kill()
				break
			}
		}
		if code := exitCode(t, cmd); code != -1 {
			t.Fatalf("child %d ended with exit code %d before its kill (last event %d)", killed, code, last)
		}
		killed++
	}
	cmd, out, in := startChild(t, role, env...)
	defer in.Close()
	for out.Scan() {
	}
	if code := exitCode(t, cmd); code != exitDone {
		t.Fatalf("the last run ended with exit code %d, want %d", code, exitDone)
	}
	if got, dups := effects(t, pool, "effects"); got != want(n) || len(dups) != 0 {
		t.Errorf("effects after %d kills = %s, duplicates %v; want %s", killed, got, dups, want(n))
	}
	if got := load(t, newStore(t, pool, role)); got != n {
		t.Errorf("stored cursor = %d, want %d", got, n)
	}
}
