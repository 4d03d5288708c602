// Command etcd runs named event streams across processes with
// resumable's etcd adapter: every instance offers to run the streams it is
// given, the instances agree through etcd on one owner per stream, and each
// runs its share. The events of stream NAME are the changes of the keys
// under /streams/NAME/; its cursor lives at /resumable/cursors/NAME.
//
// For every event it handles, a worker prints exactly one line to stdout:
//
//	handled NAME KEY MOD_REVISION
//
// Ownership changes go to stderr: "owner NAME" (this worker runs it now),
// "released NAME" (handed off), "lost NAME: ERROR" (its lease ran out; the
// error says whether a Save was refused), "failed NAME: ERROR" (the run
// failed; it starts again after a delay), "resync NAME at revision N" (the
// cursor was compacted away; the keys as of N follow). On SIGTERM or SIGINT a worker
// saves each stream's cursor, gives its streams up at once (it revokes its
// lease), and exits with status 0.
//
// A worker that dies without handing off (SIGKILL, a crash, a machine lost)
// keeps its streams until its lease expires (-ttl); then the others take
// them over and redeliver at most the events handled since its last
// checkpoint (-checkpoint-every, -checkpoint-interval). A worker paused for
// longer than its lease (SIGSTOP, a long GC pause, a partition) finds, when
// it resumes, that its lease may have expired: it handles nothing more, its
// Saves are refused by etcd, and it joins again as a new member.
//
// With no flags it runs a demo in one process, needing nothing external: it
// starts an embedded single-member etcd, runs two workers over three
// streams while writing events, stops one worker halfway, and checks that
// every event was handled exactly once across the handoffs.
//
// Usage:
//
//	go run ./examples/etcd                                  # the demo
//	go run ./examples/etcd -endpoints HOST:PORT[,HOST:PORT...] -streams NAME[,NAME...] -id WORKER
//	    [-ttl 5s] [-checkpoint-every 10] [-checkpoint-interval 1s] [-v]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, os.Stdout, os.Stderr, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "etcd:", err)
		stop()
		os.Exit(1)
	}
}

// config is what the flags say.
type config struct {
	endpoints []string
	streams   []string
	id        string
	ttl       time.Duration
	every     int
	interval  time.Duration
	verbose   bool
}

// run is the whole program. It returns nil after a handoff on ctx's end.
func run(ctx context.Context, stdout, stderr io.Writer, args []string) error {
	fs := flag.NewFlagSet("etcd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	endpoints := fs.String("endpoints", "", "etcd endpoints, HOST:PORT[,HOST:PORT...] (none: run the in-process demo)")
	streams := fs.String("streams", "", "streams this worker offers to run, NAME[,NAME...]")
	id := fs.String("id", "", "this worker's name, unique among the live workers")
	ttl := fs.Duration("ttl", 5*time.Second, "lease TTL: how long a dead worker's streams wait for a successor")
	every := fs.Int("checkpoint-every", 10, "save the cursor every N events (0: by interval only)")
	interval := fs.Duration("checkpoint-interval", time.Second, "save the cursor at the first event after this long (0: by count only)")
	verbose := fs.Bool("v", false, "log the streams' reconnects and the group's decisions to stderr")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg := config{
		endpoints: splitList(*endpoints),
		streams:   splitList(*streams),
		id:        *id,
		ttl:       *ttl,
		every:     *every,
		interval:  *interval,
		verbose:   *verbose,
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if len(cfg.endpoints) == 0 {
		if len(cfg.streams) > 0 || cfg.id != "" {
			return errors.New("-streams and -id need -endpoints: the etcd cluster the workers share (or give no flags for the demo)")
		}
		fmt.Fprintln(stderr, "demo: no -endpoints given, so this starts an embedded single-member etcd; run workers against a real cluster with")
		fmt.Fprintln(stderr, "demo:   go run ./examples/etcd -endpoints HOST:PORT -streams NAME[,NAME...] -id WORKER")
		return demo(ctx, stdout, stderr)
	}
	switch {
	case len(cfg.streams) == 0:
		return errors.New("-streams is empty: name at least one stream")
	case cfg.id == "":
		return errors.New("-id is empty: name this worker")
	case cfg.every < 0 || cfg.interval < 0:
		return errors.New("-checkpoint-every and -checkpoint-interval must not be negative")
	case cfg.every == 0 && cfg.interval == 0:
		return errors.New("-checkpoint-every and -checkpoint-interval are both 0: the cursor would be saved only on handoff")
	}
	log := zap.NewNop()
	if cfg.verbose {
		zc := zap.NewDevelopmentConfig()
		zc.DisableStacktrace = true
		zc.OutputPaths, zc.ErrorOutputPaths = []string{"stderr"}, []string{"stderr"}
		l, err := zc.Build()
		if err != nil {
			return err
		}
		log = l.With(zap.String("worker", cfg.id))
		defer func() { _ = log.Sync() }()
	}
	client, err := clientv3.New(clientv3.Config{
		Endpoints:   cfg.endpoints,
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return fmt.Errorf("connecting to %s: %w", strings.Join(cfg.endpoints, ","), err)
	}
	defer client.Close()
	err = work(ctx, client, cfg, newLines(stdout, nil), newStatus(stderr, ""), log)
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return nil // handed off
	}
	return err
}

// splitList splits a comma-separated flag, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}
