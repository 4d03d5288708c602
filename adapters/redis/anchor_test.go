package redis_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	goredis "github.com/redis/go-redis/v9"

	"github.com/resumable-go/resumable/adapters/redis"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/stream"
)

// TestSourceAnchoredReads: through a backlog, a read after an entry the
// Source read asks for that entry too instead of looking at the stream's
// identity: the first read (of one entry), 20 reads of 5 entries, and only
// the first look (Open's) and the first read's (no entry read yet) reach
// XINFO STREAM.
func TestSourceAnchoredReads(t *testing.T) {
	_, rdb := server(t)
	ids := add(t, rdb, "s", 0, 100)
	src, _ := redis.NewSource(rdb, "s", redis.WithCount(5), redis.WithBlock(time.Minute)) // the full look's clock does not run out
	r, _ := redis.NewResumer(src, cursor.NewMemory(""))
	if diff := cmp.Diff(ids, runUntil(t, r, ids[len(ids)-1])); diff != "" {
		t.Errorf("handled (-want +got):\n%s", diff)
	}
	stats := commandStats(t, rdb)
	if looks, reads := stats["xinfo|stream"].calls, stats["xread"].calls; looks != 2 || reads != 21 {
		t.Errorf("XINFO STREAM %d times (the script's included), XREAD %d: want 2 looks (Open, the first read) and 21 reads", looks, reads)
	}
}

// TestSourceReadsInStrides: a connection's first read hands over one
// entry, so that each read after it, anchored on the entry before, starts
// at the entry a plain reader at the same COUNT starts at (1-1, 1-6,
// 1-11, ...): Redis walks a node of the stream from its first entry to
// find a read's first, and a plain reader in strides of the node's size
// never walks.
func TestSourceReadsInStrides(t *testing.T) {
	srv, rdb := server(t)
	var ids []string
	for i := range 20 {
		id := fmt.Sprintf("1-%d", i+1)
		if err := rdb.XAdd(t.Context(), &goredis.XAddArgs{Stream: "s", ID: id, Values: []string{"n", "v"}}).Err(); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	mon := startMonitor(t, srv.Addr)
	src, _ := redis.NewSource(rdb, "s", redis.WithCount(5), redis.WithBlock(time.Minute))
	r, _ := redis.NewResumer(src, cursor.NewMemory(""))
	if diff := cmp.Diff(ids, runUntil(t, r, ids[len(ids)-1])); diff != "" {
		t.Errorf("handled (-want +got):\n%s", diff)
	}
	// COUNT, then the ID the read starts after.
	want := []string{"1 0-0", "6 1-0", "6 1-5", "6 1-10", "6 1-15"}
	if diff := cmp.Diff(want, mon.xreads(t, rdb)); diff != "" {
		t.Errorf("XREAD COUNT, after (-want +got):\n%s", diff)
	}
}

// monitor reads the commands a server runs (MONITOR, on a connection of
// its own, closed when the test ends).
type monitor struct {
	conn net.Conn
	rd   *bufio.Reader
}

// startMonitor starts a monitor of the server at addr.
func startMonitor(t *testing.T, addr string) *monitor {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	// A server that never echoes the mark fails the test, not hangs it.
	if err := conn.SetReadDeadline(time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	m := &monitor{conn: conn, rd: bufio.NewReader(conn)}
	if _, err := conn.Write([]byte("MONITOR\r\n")); err != nil {
		t.Fatal(err)
	}
	if line, err := m.rd.ReadString('\n'); err != nil || line != "+OK\r\n" {
		t.Fatalf("MONITOR: %q, %v", line, err)
	}
	return m
}

// xreads runs ECHO with a mark on rdb, and returns the XREADs the server
// ran before it, each as its COUNT and the ID after which it read.
func (m *monitor) xreads(t *testing.T, rdb *goredis.Client) []string {
	t.Helper()
	const mark = "monitor-mark"
	if err := rdb.Echo(t.Context(), mark).Err(); err != nil {
		t.Fatal(err)
	}
	var got []string
	for {
		line, err := m.rd.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		// +1764650000.123456 [0 127.0.0.1:5555] "xread" "count" "6" "streams" "s" "1-0"
		_, cmd, _ := strings.Cut(strings.TrimSpace(line), "] ")
		args := strings.Fields(strings.ReplaceAll(cmd, `"`, ""))
		switch {
		case len(args) == 2 && args[0] == "echo" && args[1] == mark:
			return got
		case len(args) >= 6 && args[0] == "xread" && args[1] == "count":
			got = append(got, args[2]+" "+args[len(args)-1])
		}
	}
}

// TestSourceAnchorChanged: the entry a reader stands on is there again, in
// a stream replaced in one MULTI, with other fields and values (explicit
// IDs): ErrSourceChanged before the new stream's next entry is handed over.
// The same entry with the same fields and values would pass for the
// stream read so far: a copy, as far as the anchor can tell.
func TestSourceAnchorChanged(t *testing.T) {
	_, rdb := server(t)
	for _, id := range []string{"1-1", "1-2", "1-3", "1-4"} {
		if err := rdb.XAdd(t.Context(), &goredis.XAddArgs{Stream: "s", ID: id, Values: []string{"n", id}}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	src, _ := redis.NewSource(rdb, "s", redis.WithCount(1))
	r, _ := redis.NewResumer(src, cursor.NewMemory(""))
	ctx, cancel := context.WithTimeout(t.Context(), guard)
	defer cancel()
	var got []string
	err := r.Run(ctx, func(_ context.Context, e redis.Entry) error {
		if got = append(got, e.ID); e.ID == "1-2" {
			multi(t, rdb, func(p goredis.Pipeliner) {
				p.Del(context.Background(), "s")
				for _, id := range []string{"1-2", "1-3", "1-4", "1-5", "1-6"} {
					p.XAdd(context.Background(), &goredis.XAddArgs{Stream: "s", ID: id, Values: []string{"n", "new " + id}})
				}
			})
		}
		return nil
	})
	if !errors.Is(err, stream.ErrSourceChanged) || !strings.Contains(err.Error(), "other fields and values") {
		t.Fatalf("Run() = %v, want ErrSourceChanged for the entry 1-2 changed", err)
	}
	if diff := cmp.Diff([]string{"1-1", "1-2"}, got); diff != "" {
		t.Errorf("handled (-want +got):\n%s", diff)
	}
}

// TestSourceLargeEntryNotAnchor: a read after an entry larger than 4 KiB
// does not ask for it again (it would travel with every read): it comes
// with the full look instead.
func TestSourceLargeEntryNotAnchor(t *testing.T) {
	_, rdb := server(t)
	var ids []string
	for range 4 {
		id, err := rdb.XAdd(t.Context(), &goredis.XAddArgs{Stream: "s", Values: []string{"n", strings.Repeat("x", 8<<10)}}).Result()
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	src, _ := redis.NewSource(rdb, "s", redis.WithCount(1), redis.WithBlock(time.Minute))
	r, _ := redis.NewResumer(src, cursor.NewMemory(""))
	runUntil(t, r, ids[len(ids)-1])
	stats := commandStats(t, rdb)
	if looks, reads := stats["xinfo|stream"].calls, stats["xread"].calls; looks != 5 || reads != 4 {
		t.Errorf("XINFO STREAM %d times (the script's included), XREAD %d: want a look with each of the 4 reads, and Open's", looks, reads)
	}
}
