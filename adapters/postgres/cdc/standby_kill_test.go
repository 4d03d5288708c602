package cdc_test

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/resumable-go/resumable/adapters/postgres"
	"github.com/resumable-go/resumable/adapters/postgres/cdc"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/internal/testkit/pgtest"
	"github.com/resumable-go/resumable/stream"
)

// envRelay holds "dsn slot interval" in a relay process of
// TestStandbyKill (the test binary run again).
const envRelay = "RESUMABLE_CDC_RELAY"

// relayMain is a relay process: a Transactional relay applying inserts to
// applied, printing "ACQUIRED <unix ns>" each time it holds the slot and
// "WAITING" when it waits for it. It runs until killed.
func relayMain() int {
	f := strings.Fields(os.Getenv(envRelay))
	interval, err := time.ParseDuration(f[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	pool, err := pgxpool.New(ctx, f[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer pool.Close()
	store, err := postgres.NewStore(pool, "relay", cursor.JSON[cdc.Cursor](), cdc.Cursor{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	src, err := cdc.NewSource(f[0], f[1], "pub", cdc.WithStatusInterval(interval))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	r, err := cdc.NewResumer(src, store, stream.WithHooks(stream.Hooks[cdc.Cursor]{
		OnConnect: func(stream.ConnectEvent[cdc.Cursor]) { fmt.Printf("ACQUIRED %d\n", time.Now().UnixNano()) },
		OnDisconnect: func(e stream.DisconnectEvent[cdc.Cursor]) {
			if !e.Opened && e.Err != nil && strings.Contains(e.Err.Error(), "waiting as a standby") {
				fmt.Println("WAITING")
			}
		},
	}))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	err = r.Run(ctx, postgres.Transactional(store, cdc.Extract, applyInsert))
	fmt.Printf("STOPPED %v\n", err)
	return 1
}

// relayLine is a line a relay process printed.
type relayLine struct {
	proc int
	text string
}

// TestStandbyKill runs two relay processes on one slot and one Store while
// a writer commits inserts; the active one is SIGKILLed at random moments
// and a fresh one started as the new standby each time. Every change is
// applied exactly once; each takeover's time is reported.
// RESUMABLE_PG_SOAK=1: 10 kills over 5,000 changes; otherwise 3 over 600.
func TestStandbyKill(t *testing.T) {
	kills, changes := 3, 600
	if soak() {
		kills, changes = 10, 5000
	}
	const interval = 500 * time.Millisecond
	dsn := pgtest.NewDB(t)
	slot := replSetup(t, dsn)
	replExec(t, dsn, "CREATE TABLE applied (id int NOT NULL)")
	pool, err := pgxpool.New(pgtest.Ctx(t), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()

	lines := make(chan relayLine, 100)
	procs := map[int]*exec.Cmd{}
	start := func(n int) {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), envRelay+"="+dsn+" "+slot+" "+interval.String())
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		procs[n] = cmd
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				lines <- relayLine{n, sc.Text()}
			}
		}()
	}
	t.Cleanup(func() {
		for _, cmd := range procs {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	// next returns the next line of kind, failing t on a relay that stopped.
	next := func(kind string) relayLine {
		t.Helper()
		ctx := pgtest.Ctx(t)
		for {
			select {
			case l := <-lines:
				if strings.HasPrefix(l.text, "STOPPED") {
					t.Fatalf("relay %d stopped on its own: %s", l.proc, l.text)
				}
				if strings.HasPrefix(l.text, kind) {
					return l
				}
			case <-ctx.Done():
				t.Fatalf("waiting for %s: %v", kind, ctx.Err())
			}
		}
	}
	start(0)
	active := next("ACQUIRED").proc
	start(1)
	next("WAITING")

	written := make(chan error, 1)
	go func() { written <- writeInserts(pgtest.Ctx(t), dsn, changes) }()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 32))
	var takeovers []time.Duration
	for k := range kills {
		// A random moment of the active relay's life.
		time.Sleep(time.Duration(100+rng.IntN(900)) * time.Millisecond)
		killed := time.Now()
		if err := procs[active].Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = procs[active].Wait()
		delete(procs, active)
		start(k + 2)
		l := next("ACQUIRED")
		at, err := strconv.ParseInt(strings.Fields(l.text)[1], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		takeovers = append(takeovers, time.Unix(0, at).Sub(killed))
		active = l.proc
	}
	if err := <-written; err != nil {
		t.Fatalf("writing: %v", err)
	}
	var rows, distinct int
	replUntil(t, fmt.Sprintf("%d changes applied", changes), func() bool {
		if err := pool.QueryRow(pgtest.Ctx(t), "SELECT count(*), count(DISTINCT id) FROM applied").Scan(&rows, &distinct); err != nil {
			t.Fatal(err)
		}
		if rows != distinct {
			t.Fatalf("applied %d rows, %d distinct: a change applied twice", rows, distinct)
		}
		select {
		case l := <-lines:
			if strings.HasPrefix(l.text, "STOPPED") {
				t.Fatalf("relay %d stopped on its own: %s", l.proc, l.text)
			}
		default:
		}
		return rows >= changes
	})
	if rows != changes {
		t.Fatalf("applied %d changes, want %d", rows, changes)
	}
	t.Logf("%d kills, %d changes applied exactly once; takeovers (status interval %v): %v", kills, changes, interval, takeovers)
}

// writeInserts commits n inserts into items, 1 to 20 a transaction.
func writeInserts(ctx context.Context, dsn string, n int) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	rng := rand.New(rand.NewPCG(7, 11))
	for id := 1; id <= n; {
		size := min(1+rng.IntN(20), n-id+1)
		if _, err := conn.Exec(ctx, "INSERT INTO items (id) SELECT g FROM generate_series($1::int, $2::int) g", id, id+size-1); err != nil {
			return err
		}
		id += size
		// Spread the writes over the kills: a load generator's pace.
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}
