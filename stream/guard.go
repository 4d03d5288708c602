package stream

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// watchdogTicks is how many looks the idle watchdog takes per idle timeout.
const watchdogTicks = 4

// connGuard holds the current Conn so that another goroutine can close it:
// the context watcher when Run's context ends, and the idle watchdog (wd,
// nil without WithIdleTimeout) when the connection has been quiet for the
// idle timeout. A panic in a Close it makes is kept and raised again on
// Run's goroutine ([connGuard.rethrow]).
type connGuard[T any] struct {
	mu        sync.Mutex
	conn      Conn[T]
	cancelled bool        // Run's context ended: refuse new Conns
	panicked  atomic.Bool // a Close made here panicked with panicVal (set under mu)
	panicVal  any
	wd        *watchdog
}

// watchdog is the idle watchdog: one timer that ticks every idle/4 while a
// Conn is set, and compares the activity count with the one it saw at the
// previous tick; once the count has not moved for the idle timeout, it
// closes the Conn. The count is what the loop already publishes (cursors
// committed, events skipped) plus, under WithConcurrency and RunBatch, the
// events received (and under WithConcurrency finished): activity; so Run's
// serial path pays nothing per event, and the clock is read per tick. Its fields other than activity are
// guarded by the connGuard's mu.
type watchdog struct {
	idle     time.Duration
	count    func() uint64 // what the loop publishes: reads the stats under their lock
	activity atomic.Uint64
	ticks    sync.WaitGroup // armed timer callbacks not yet returned
	timer    *time.Timer
	seen     uint64      // activity at the last tick
	since    time.Time   // when seen last changed
	paused   bool        // the loop is not reading on purpose (a full window)
	fired    bool        // the watchdog closed the Conn
	busy     atomic.Bool // a handler runs on Run's goroutine (one handler, RunBatch)
	busyFire bool        // busy when the watchdog fired
}

// handling records, for the watchdog (wd may be nil), that Run's goroutine
// enters (on) or leaves a handler call: a connection closed while a handler
// held its event is no stall.
func (wd *watchdog) handling(on bool) {
	if wd != nil {
		wd.busy.Store(on)
	}
}

// active records activity for the watchdog, if there is one (wd may be
// nil), under WithConcurrency and RunBatch. It is not a method of the generic connGuard
// so that it inlines.
func (wd *watchdog) active() {
	if wd != nil {
		wd.activity.Add(1)
	}
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
			g.close(c)
		}
	})
	return func() {
		if !stopWatch() {
			<-closed
		}
	}
}

// close closes c on a goroutine other than Run's, keeping a panic for
// rethrow.
func (g *connGuard[T]) close(c Conn[T]) {
	defer func() {
		if v := recover(); v != nil {
			g.mu.Lock()
			if !g.panicked.Load() {
				g.panicVal = v
				g.panicked.Store(true)
			}
			g.mu.Unlock()
		}
	}()
	_ = c.Close()
}

// rethrow raises on Run's goroutine the panic of a Close made by the
// watcher or the watchdog, if any.
func (g *connGuard[T]) rethrow() {
	if !g.panicked.Load() { // the common case takes no lock
		return
	}
	g.mu.Lock()
	v := g.panicVal
	g.panicked.Store(false)
	g.panicVal = nil
	g.mu.Unlock()
	panic(v)
}

// drop closes the current Conn, if any, from a goroutine other than Run's:
// the committer ends a connection whose save failed.
func (g *connGuard[T]) drop() {
	g.mu.Lock()
	c := g.conn
	g.mu.Unlock()
	if c != nil {
		g.close(c)
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
		wd.seen, wd.since, wd.fired, wd.paused, wd.busyFire = wd.total(), time.Now(), false, false, false
		g.arm()
	}
	return true
}

// pause stops (on) or restarts (off) the idle clock while the loop holds
// off reading on purpose: a full window is no stall.
func (g *connGuard[T]) pause(on bool) {
	if g.wd == nil {
		return
	}
	g.mu.Lock()
	g.wd.paused = on
	g.wd.since = time.Now()
	g.mu.Unlock()
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
// whether the watchdog closed the Conn, and the activity it had seen then.
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

// activeSince reports whether there was activity after the watchdog saw
// seen, or, with the handler on Run's goroutine, whether it ran when the
// watchdog fired (what it committed after the close, a lingering batch's
// among it, is no activity of the connection).
func (g *connGuard[T]) activeSince(seen uint64, inline bool) bool {
	switch {
	case g.wd == nil:
		return false
	case inline:
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.wd.busyFire
	}
	return g.wd.total() != seen
}

// total is the activity count the watchdog compares.
func (wd *watchdog) total() uint64 { return wd.count() + wd.activity.Load() }

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
	if n := wd.total(); n != wd.seen || wd.paused {
		wd.seen, wd.since = n, now
	}
	if now.Sub(wd.since) < wd.idle {
		g.arm()
		g.mu.Unlock()
		return
	}
	wd.fired = true
	wd.busyFire = wd.busy.Load()
	g.mu.Unlock()
	g.close(c)
}
