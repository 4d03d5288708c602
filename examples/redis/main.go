// Command redis consumes a Redis stream as one consumer of a consumer
// group, with resumable's redis adapter: at-least-once, pending entries
// first after a restart, entries of dead consumers claimed, poison
// entries parked in a dead-letter file, and a stream or group that
// vanished or was recreated reported instead of silently started over.
//
// For every entry it handles, it prints exactly one line to stdout, as the
// entry is handled:
//
//	handled ID
//
// An entry whose field poison is 1 makes the handler fail every time;
// after -max-deliveries failed handler calls (across restarts and claims) it
// is appended to the dead-letter file (one JSON line, package deadletter)
// and printed as
//
//	parked ID
//
// An entry the file already holds (the process died after its record,
// before its acknowledgement) is acknowledged without a second record,
// and printed again.
//
// The group (and the stream) are created at the stream's start when they
// do not exist, but only when the program starts: a stream or group that
// disappears or is recreated while it runs (a Redis restart without
// persistence, FLUSHALL, DEL, XGROUP DESTROY) makes it exit with status 1,
// saying which on stderr. On SIGTERM or SIGINT it finishes the entries in
// hand, acknowledges them and exits with status 0.
//
// With no arguments it runs a demo that needs only redis-server (looked
// for in $RESUMABLE_REDIS_SERVER, else /usr/bin/redis-server, else on
// $PATH): it starts a throw-away server on a free port of 127.0.0.1,
// cuts consumer a off from it while its handler holds three entries,
// shows consumer b claim and handle them once they were idle for 1s, and
// an entry whose handler always fails parked in a dead-letter file after 3
// calls; it checks all that, prints what happened and exits with status 0.
// Without redis-server it prints the command that installs it and exits
// with status 2.
//
// Usage:
//
//	go run ./examples/redis                 # the demo
//	go run ./examples/redis -addr HOST:PORT -stream NAME -group NAME -consumer NAME
//	    [-claim-idle 30s] [-max-deliveries 3] [-dead-letter FILE]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/resumable-go/resumable/adapters/redis"
	"github.com/resumable-go/resumable/deadletter"
	"github.com/resumable-go/resumable/stream"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, os.Stdout, os.Stderr, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "redis:", err)
		stop()
		if errors.Is(err, errNoServer) {
			fmt.Fprintf(os.Stderr, "install it with:\n\t%s\n", installCommand)
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// errPoison is the handler's error for a poison entry.
var errPoison = errors.New("poison entry")

// run is the whole program: the demo with no arguments, else the consumer
// the flags describe, until ctx ends.
func run(ctx context.Context, stdout, stderr io.Writer, args []string) error {
	if len(args) == 0 {
		return demo(ctx, stdout, stderr)
	}
	fs := flag.NewFlagSet("redis", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "", "Redis `HOST:PORT`")
	key := fs.String("stream", "", "the stream's `NAME`")
	group := fs.String("group", "", "the consumer group's `NAME`")
	consumer := fs.String("consumer", "", "this consumer's `NAME` (the same after a restart)")
	claimIdle := fs.Duration("claim-idle", 30*time.Second, "how long an entry may sit in another consumer's pending list before it is claimed")
	maxDeliveries := fs.Int("max-deliveries", 3, "failed handler calls on an entry before it is parked")
	dlPath := fs.String("dead-letter", "", "the dead-letter `FILE` (default: the stream's name, in the working directory)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *addr == "" || *key == "" || *group == "" || *consumer == "" || fs.NArg() > 0 {
		return errors.New("usage: redis -addr HOST:PORT -stream NAME -group NAME -consumer NAME [-claim-idle DURATION] [-max-deliveries N] [-dead-letter FILE]")
	}
	if *dlPath == "" {
		*dlPath = *key
	}
	rdb := goredis.NewClient(&goredis.Options{Addr: *addr})
	defer rdb.Close()
	g, err := redis.NewGroup(rdb, *key, *group, *consumer, redis.WithClaimIdle(*claimIdle), redis.WithMaxDeliveries(*maxDeliveries))
	if err != nil {
		return err
	}
	dl, err := deadletter.Open(*dlPath, redis.Extract)
	if err != nil {
		return err
	}
	defer dl.Close()
	// The entries the file holds already: a death between an entry's
	// record and its acknowledgement hands it back to the next life,
	// which acknowledges it without a second record.
	parked := map[string]bool{}
	for rec, err := range deadletter.Read[redis.Entry, string](*dlPath) {
		if err == nil {
			parked[rec.Cursor] = true
		}
	}
	var pmu sync.Mutex
	park := func(ctx context.Context, e redis.Entry, err error) error {
		pmu.Lock()
		defer pmu.Unlock()
		if !parked[e.ID] {
			if err := dl.Park(ctx, e, err); err != nil {
				return err
			}
			parked[e.ID] = true
		}
		_, err = fmt.Fprintf(stdout, "parked %s\n", e.ID)
		return err
	}
	r, err := redis.NewGroupResumer(g, stream.WithDeadLetter(park))
	if err != nil {
		return err
	}
	err = r.Run(ctx, g.Handler(func(_ context.Context, e redis.Entry) error {
		if e.Values["poison"] == "1" {
			return errPoison
		}
		_, err := fmt.Fprintf(stdout, "handled %s\n", e.ID)
		return err
	}))
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return nil // SIGTERM or SIGINT: the entries in hand are acknowledged
	}
	if errors.Is(err, stream.ErrSourceChanged) {
		return fmt.Errorf("the stream or the group disappeared or was recreated: %w", err)
	}
	return err
}
