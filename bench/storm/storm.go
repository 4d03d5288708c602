package main

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"time"

	"github.com/go-logr/logr"
	"github.com/resumable-go/resumable/internal/wait"
	"k8s.io/klog/v2"
)

// config is the experiment's settings.
type config struct {
	n       int           // watchers
	outage  time.Duration // how long the server refuses after the drop
	settle  time.Duration // quiet time between all connected and the drop
	tail    time.Duration // recorded after all reconnected
	lead    time.Duration // recorded before the drop
	bin     time.Duration // width of a bin of the time series
	limit   float64       // the shared limiter's rate, per second
	burst   int           // and its burst
	timeout time.Duration // bound on each wait (startup, reconnection, stop)
}

// result is what one variant did.
type result struct {
	v variant
	// rows is the time series, one row per bin from lead before the drop
	// to tail after all reconnected.
	rows []row
	// peakBin is the most Watch calls in one bin, peakSecond in any
	// one-second window, from the drop to the end.
	peakBin, peakSecond int
	// reconnected is the time from the drop until all watchers had a watch
	// open again; recovered from the server's coming back until then.
	reconnected, recovered time.Duration
	// calls and refused count the Watch calls from the drop to the end.
	calls, refused int
	// lag is the longest a goroutine waiting on a 10ms timer woke late,
	// from the drop to the end: how much the machine held the process
	// back, which bunches up calls that were due apart.
	lag time.Duration
}

// row is one bin of the time series.
type row struct {
	t         time.Duration // the bin's start, from the drop
	calls     int           // Watch calls in the bin
	refused   int           // of which refused
	connected int           // open watches at the bin's end
}

// errTimeout is matched by the error of a run that waited longer than
// -timeout for the watchers to connect, reconnect or stop.
var errTimeout = errors.New("storm: timed out")

// errIncomplete is matched by the error of a variant whose watchers did not
// all reconnect within the timeout (with errTimeout).
var errIncomplete = errors.New("storm: not all watchers reconnected")

// runVariant starts cfg.n watchers of v on a fresh server, waits until all
// are connected and then cfg.settle, drops every watch and refuses new ones
// for cfg.outage, waits until all watchers are connected again, records
// cfg.tail more, and stops every watcher, waiting for each to be done.
func runVariant(ctx context.Context, cfg config, v variant) (res result, err error) {
	// client-go logs every refused Watch call at Error level through the
	// context's logger: discard it.
	ctx = klog.NewContext(ctx, logr.Discard())
	goroutines := runtime.NumGoroutine()
	srv := newServer()
	start := v.fleet(cfg)
	ws := make([]watcher, 0, cfg.n)
	defer func() {
		err = errors.Join(err, stopAll(ws, cfg.timeout), awaitGoroutines(goroutines, cfg.timeout))
		if n := srv.open(); n != 0 && err == nil {
			err = fmt.Errorf("storm: %d watches still open after every watcher stopped", n)
		}
	}()
	// Cancelled before the checks above run, on every path: ends the lag
	// watcher even when the run fails half-way.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	all, _ := srv.awaitWatches(cfg.n)
	for range cfg.n {
		w, err := start(ctx, srv)
		if err != nil {
			return res, err
		}
		ws = append(ws, w)
	}
	if err := await(ctx, all, cfg.timeout); err != nil {
		return res, fmt.Errorf("storm: %s: starting %d watchers: %w", v.key, cfg.n, err)
	}
	if err := wait.Sleep(ctx, cfg.settle); err != nil {
		return res, err
	}

	lag := watchLag(ctx)
	t0 := srv.dropAll()
	all, reachedAt := srv.awaitWatches(cfg.n)
	if err := wait.Sleep(ctx, cfg.outage); err != nil {
		return res, err
	}
	back := srv.up()
	if err := await(ctx, all, cfg.timeout); err != nil {
		return res, fmt.Errorf("%w: %s: %d of %d: %w", errIncomplete, v.key, srv.open(), cfg.n, err)
	}
	done := reachedAt()
	if err := wait.Sleep(ctx, cfg.tail); err != nil {
		return res, err
	}
	end := time.Now()
	calls, ends := srv.log()
	res = measure(cfg, v, calls, ends, span{t0: t0, back: back, done: done, end: end})
	res.lag = lag()
	return res, nil
}

// lagTick is the period of the timer watchLag measures.
const lagTick = 10 * time.Millisecond

// watchLag starts measuring how late a timer of period lagTick fires; the
// returned function stops it and returns the worst lateness.
func watchLag(ctx context.Context) (stop func() time.Duration) {
	ctx, cancel := context.WithCancel(ctx)
	worst := make(chan time.Duration, 1)
	go func() {
		var w time.Duration
		t := time.NewTimer(lagTick)
		defer t.Stop()
		for last := time.Now(); ; {
			select {
			case <-ctx.Done():
				worst <- w
				return
			case <-t.C:
				w = max(w, time.Since(last)-lagTick)
				t.Reset(lagTick)
				last = time.Now()
			}
		}
	}()
	return func() time.Duration {
		cancel()
		return <-worst
	}
}

// span is the times that frame a storm.
type span struct {
	t0, back, done, end time.Time // drop, server back, all reconnected, end of recording
}

// measure turns the server's logs into a result.
func measure(cfg config, v variant, calls []call, ends []time.Time, s span) result {
	res := result{v: v, reconnected: s.done.Sub(s.t0), recovered: s.done.Sub(s.back)}
	from := s.t0.Add(-cfg.lead)
	nbins := int(s.end.Sub(from)/cfg.bin) + 1
	res.rows = make([]row, nbins)
	for i := range res.rows {
		res.rows[i].t = time.Duration(i)*cfg.bin - cfg.lead
	}
	// connected[i] counts, before the running sum, the watches opened
	// minus those ended in bin i; calls before the recording go to a
	// carry.
	carry := 0
	delta := make([]int, nbins)
	bin := func(t time.Time) int { return int(t.Sub(from) / cfg.bin) }
	var inStorm []time.Time
	for _, c := range calls {
		i := bin(c.at)
		if !c.refused {
			if c.at.Before(from) {
				carry++
			} else if i < nbins {
				delta[i]++
			}
		}
		if c.at.Before(from) || i >= nbins {
			continue
		}
		res.rows[i].calls++
		if c.refused {
			res.rows[i].refused++
		}
		if !c.at.Before(s.t0) {
			inStorm = append(inStorm, c.at)
			res.calls++
			if c.refused {
				res.refused++
			}
			res.peakBin = max(res.peakBin, res.rows[i].calls)
		}
	}
	for _, e := range ends {
		if i := bin(e); e.Before(from) {
			carry--
		} else if i < nbins {
			delta[i]--
		}
	}
	open := carry
	for i := range res.rows {
		open += delta[i]
		res.rows[i].connected = open
	}
	res.peakSecond = peakWindow(inStorm, time.Second)
	return res
}

// peakWindow returns the most times in any half-open window of width w.
func peakWindow(ts []time.Time, w time.Duration) int {
	slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
	best, lo := 0, 0
	for hi, t := range ts {
		for t.Sub(ts[lo]) >= w {
			lo++
		}
		best = max(best, hi-lo+1)
	}
	return best
}

// await waits until ch is closed, ctx ends or timeout passes.
func await(ctx context.Context, ch <-chan struct{}, timeout time.Duration) error {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return fmt.Errorf("%w after %v", errTimeout, timeout)
	}
}

// awaitGoroutines waits until no more than n goroutines run (the watchers'
// have ended), polling, or returns an error after timeout.
func awaitGoroutines(n int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for runtime.NumGoroutine() > n {
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: %d goroutines still running, %d before the watchers started", errTimeout, runtime.NumGoroutine(), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return nil
}
