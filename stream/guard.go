package stream

import (
	"context"
	"sync"
	"time"
)

// watchdogTicks is how many looks the idle watchdog takes per idle timeout.
const watchdogTicks = 4

// connGuard holds the current Conn so that another goroutine can close it:
// the context watcher when Run's context ends, and the idle watchdog (wd,
// nil without WithIdleTimeout) when the connection has been quiet for the
// idle timeout.
type connGuard[T any] struct {
	mu        sync.Mutex
	conn      Conn[T]
	cancelled bool // Run's context ended: refuse new Conns
	wd        *watchdog
}

// watchdog is the idle watchdog: one timer that ticks every idle/4 while a
// Conn is set, and compares the count of committed cursors with the one it
// saw at the previous tick; once the count has not moved for the idle
// timeout, it closes the Conn. The per-event path pays nothing for it: the
// count is the one the loop already publishes under the stats lock, and the
// clock is read per tick, not per event. Its fields are guarded by the
// connGuard's mu.
type watchdog struct {
	idle  time.Duration
	count func() uint64  // cursors committed so far (reads the stats)
	ticks sync.WaitGroup // armed timer callbacks not yet returned
	timer *time.Timer
	seen  uint64    // count at the last tick
	since time.Time // when seen last changed
	fired bool      // the watchdog closed the Conn
}

// watch closes the current Conn, and refuses later ones, when ctx ends. The
// returned stop must be called before Run returns; the watcher has ended
// when it returns.
func (g *connGuard[T]) watch(ctx context.Context) (stop func()) {
	closed := make(chan struct{})
	stopWatch := context.AfterFunc(ctx, func() {
		defer close(closed)
		g.mu.Lock()
		c := g.conn
		g.cancelled = true
		g.mu.Unlock()
		if c != nil {
			_ = c.Close()
		}
	})
	return func() {
		if !stopWatch() {
			<-closed
		}
	}
}

// reset prepares the guard for a new run.
func (g *connGuard[T]) reset() {
	g.mu.Lock()
	g.conn, g.cancelled = nil, false
	g.mu.Unlock()
}

// set makes c the current Conn and arms the watchdog; it reports false when
// the run was cancelled (the caller then closes c itself).
func (g *connGuard[T]) set(c Conn[T]) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cancelled {
		return false
	}
	g.conn = c
	if wd := g.wd; wd != nil {
		wd.seen, wd.since, wd.fired = wd.count(), time.Now(), false
		g.arm()
	}
	return true
}

// arm schedules the watchdog's next tick; g.mu is held.
func (g *connGuard[T]) arm() {
	wd := g.wd
	wd.ticks.Add(1)
	if wd.timer == nil {
		wd.timer = time.AfterFunc(wd.idle/watchdogTicks, g.tick)
	} else if wd.timer.Reset(wd.idle / watchdogTicks) {
		wd.ticks.Done() // a pending tick was moved, not added
	}
}

// release forgets the current Conn and disarms the watchdog. It reports
// whether the watchdog closed the Conn, and the count of commits it had
// seen then.
func (g *connGuard[T]) release() (fired bool, seen uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.conn = nil
	wd := g.wd
	if wd == nil {
		return false, 0
	}
	if wd.timer != nil && wd.timer.Stop() {
		wd.ticks.Done() // the pending tick will not run
	}
	return wd.fired, wd.seen
}

// wait returns once no watchdog tick is running: call it before Run
// returns, after release.
func (g *connGuard[T]) wait() {
	if g.wd != nil {
		g.wd.ticks.Wait()
	}
}

// tick is the watchdog's timer callback.
func (g *connGuard[T]) tick() {
	wd := g.wd
	defer wd.ticks.Done()
	g.mu.Lock()
	c := g.conn
	if c == nil || wd.fired {
		g.mu.Unlock()
		return
	}
	now := time.Now()
	if n := wd.count(); n != wd.seen {
		wd.seen, wd.since = n, now
	}
	if now.Sub(wd.since) < wd.idle {
		g.arm()
		g.mu.Unlock()
		return
	}
	wd.fired = true
	g.mu.Unlock()
	_ = c.Close()
}
