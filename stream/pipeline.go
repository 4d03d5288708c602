package stream

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// pipeline runs the step under WithConcurrency by itself. The supervisor
// (Run's goroutine) reads each connection and adds its events to a ring of
// slots in stream order; n handler goroutines run the tries of ready slots
// and apply the decision on each; one committer goroutine commits the
// contiguous prefix of finished slots, parks a spent event once it heads
// the ring, and saves by the committer's rules (committer.go). Neither
// needs the supervisor, so an Open that blocks, the limiter, a hook or a
// resync never holds events already read.
//
// Slot seq head is the oldest not committed, tail the next to fill. A slot
// becomes ready when its key is free, and a ready slot starts when fewer
// than n run. Fields after mu are guarded by it, except a running slot's
// try fields, which belong to its handler goroutine.
type pipeline[T, C any] struct {
	n        int
	wake     chan struct{} // wakes an idle handler; holds 1
	kick     chan struct{} // wakes the committer; holds 1
	quiet    *time.Timer   // wakes the committer for an interval save; the committer's
	room     chan struct{} // wakes the reader waiting for a free slot; holds 1
	settled  chan struct{} // wakes the supervisor waiting in settle; holds 1
	stopping chan struct{} // closed once nothing more may be read or started
	// opens is Run's context, also cancelled once the pipeline stops: the
	// supervisor's blocking calls (the limiter, Open, Recv, a resync) take
	// it, so that a handler's failure or stop ends them at once.
	opens    context.Context
	cancel   context.CancelFunc
	halted   atomic.Bool // a failure, a panic, ctx's end or stop: start nothing more
	quitting atomic.Bool // stop was called: no try starts
	// handlersDone: stop saw every handler goroutine return; the committer
	// commits once more and returns.
	handlersDone atomic.Bool
	commits      atomic.Int64 // cursors committed, for the supervisor's outcome
	handlers     sync.WaitGroup
	done         chan struct{} // closed when the committer returned

	mu           sync.Mutex
	slots        []slot[T, C]
	keys         keyTable[T] // nil: any events may overlap
	head, tail   uint64
	fresh        []int32 // ready slots as read, oldest first: a ring of freshN from freshAt
	freshAt      int
	freshN       int
	ready        []int32 // a min-heap, by seq, of the slots whose key was freed later
	running      int     // taken by a handler, not finished
	idle         int     // handlers waiting on wake
	waking       bool    // a wake is on its way to an idle handler
	stopAt       uint64  // an ErrStop event's seq + 1 (0: none): start and commit nothing after it
	err          error   // the failure that ends Run
	panicked     bool
	panicVal     any
	saveAt       uint64         // save once head+1 reaches it (a connection's end); 0: none
	saveErr      error          // a save that failed since the supervisor last looked
	readWaits    bool           // the reader sleeps on room
	settleWaits  bool           // the supervisor sleeps on settled
	closed       bool           // stopping is closed
	roomLeft     bool           // the reader's: its last add left a free slot (only adds fill the ring)
	committing   bool           // the committer commits, parks or saves
	recording    bool           // the committer took events off the ring, not recorded yet: the committed cursor lags last
	replayed     int            // a resync's replayed events finished since its start
	replayParked int            // of which parked
	recs         []commitRec[C] // the committer's; reused
	last         C              // the cursor of the last event read (not a replay's)
	call1        func()         // the supervisor's call for the committer (pipeline.call), or nil
}

// commitRec is a cursor to commit: a finished slot of the pipeline, an
// event, or a batch.
type commitRec[C any] struct {
	c        C
	kind     eventKind
	moves    bool
	inFlight int
	// handled and folded are a batch's events handed over and its
	// progress-only events (RunBatch); both 0 for one event.
	handled, folded int
}

// errCommitterPanicked is what a call to the committer returns when the
// call panicked; the panic itself reaches Run's caller.
var errCommitterPanicked = errors.New("stream: the committer panicked")

// startPipeline starts the handler goroutines and the committer; stop ends
// them.
func (r *supervisor[T, C]) startPipeline(ctx context.Context, handle handler[T]) *pipeline[T, C] {
	p := &pipeline[T, C]{
		n:        r.handlers,
		wake:     make(chan struct{}, 1),
		kick:     make(chan struct{}, 1),
		room:     make(chan struct{}, 1),
		settled:  make(chan struct{}, 1),
		stopping: make(chan struct{}),
		done:     make(chan struct{}),
		slots:    make([]slot[T, C], r.window),
		fresh:    make([]int32, r.window),
		ready:    make([]int32, 0, r.window),
		recs:     make([]commitRec[C], 0, r.window),
	}
	p.opens, p.cancel = context.WithCancel(ctx)
	if r.keys != nil {
		p.keys = r.keys(r.window)
	}
	p.handlers.Add(r.handlers)
	for range r.handlers {
		go p.handler(ctx, r, handle)
	}
	go p.committer(ctx, r)
	return p
}

// stop ends the handler goroutines once their tries returned, and the
// committer; nothing starts meanwhile.
func (p *pipeline[T, C]) stop() {
	p.quitting.Store(true)
	p.mu.Lock()
	p.halted.Store(true)
	p.stopReading()
	p.mu.Unlock()
	close(p.wake) // halted: no wake is sent any more
	p.handlers.Wait()
	p.handlersDone.Store(true)
	wake(p.kick) // the committer commits what the handlers finished, then returns
	<-p.done
	p.cancel()
}

// wake signals a channel that holds one wake, without blocking.
func wake(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

func (p *pipeline[T, C]) index(seq uint64) int32 { return int32(seq % uint64(len(p.slots))) }
func (p *pipeline[T, C]) empty() bool            { return p.head == p.tail }
func (p *pipeline[T, C]) full() bool             { return p.tail-p.head == uint64(len(p.slots)) }

// stopReading closes stopping once and cancels opens; p.mu is held.
func (p *pipeline[T, C]) stopReading() {
	if !p.closed {
		p.closed = true
		close(p.stopping)
		p.cancel()
	}
}

// halt starts nothing more and stops reading: a failure, a panic or the
// end of ctx. p.mu is held.
func (p *pipeline[T, C]) halt(err error) {
	if p.err == nil {
		p.err = err
	}
	p.halted.Store(true)
	p.stopReading()
}

// fail halts the pipeline with err from the supervisor (an extractor's
// failure).
func (p *pipeline[T, C]) fail(err error) {
	p.mu.Lock()
	p.halt(err)
	p.mu.Unlock()
	wake(p.kick) // the committer commits what finished, and wakes a settle
}

// stopped reports whether the pipeline stopped reading.
func (p *pipeline[T, C]) stopped() bool {
	select {
	case <-p.stopping:
		return true
	default:
		return false
	}
}

// waitRoom waits until the ring has a free slot, and reports false when
// reading must stop instead (the pipeline stopped, or ctx ended). The
// idle watchdog pauses meanwhile: a full window is no stall.
func (p *pipeline[T, C]) waitRoom(ctx context.Context, g *connGuard[T]) bool {
	if p.roomLeft { // the last add left room, and only adds take it: no lock
		return !p.stopped()
	}
	paused := false
	defer func() {
		if paused {
			g.pause(false)
		}
	}()
	p.mu.Lock()
	for p.full() && !p.closed {
		p.readWaits = true
		p.mu.Unlock()
		if !paused {
			paused = true
			g.pause(true)
		}
		select {
		case <-p.room:
		case <-p.stopping:
		case <-ctx.Done():
			return false
		}
		p.mu.Lock()
	}
	ok := !p.closed
	p.mu.Unlock()
	return ok
}

// add puts a taken event in the next slot; it becomes ready when its key is
// free. The ring has room (waitRoom).
func (p *pipeline[T, C]) add(ev T, c C, kind eventKind, moves bool) {
	p.mu.Lock()
	defer p.mu.Unlock() // the order key is the user's: it may panic
	i := p.index(p.tail)
	p.slots[i] = slot[T, C]{ev: ev, c: c, seq: p.tail, kind: kind, moves: moves}
	p.tail++
	p.roomLeft = !p.full()
	if kind != replayed {
		p.last = c
	}
	if kind == progress {
		p.slots[i].state = done
		wake(p.kick)
		return
	}
	if p.keys == nil || p.keys.take(ev, i) {
		p.fresh[(p.freshAt+p.freshN)%len(p.fresh)] = i // newer than every slot ready
		p.freshN++
		p.startReady()
	}
}

// push makes slot i ready, when its key was freed after it was read;
// startReady starts it. p.mu is held.
func (p *pipeline[T, C]) push(i int32) {
	h := append(p.ready, i)
	for j := len(h) - 1; j > 0; {
		up := (j - 1) / 2
		if p.slots[h[up]].seq <= p.slots[h[j]].seq {
			break
		}
		h[up], h[j] = h[j], h[up]
		j = up
	}
	p.ready = h
}

// oldest returns the oldest ready slot, or -1. p.mu is held.
func (p *pipeline[T, C]) oldest() int32 {
	switch {
	case p.freshN == 0 && len(p.ready) == 0:
		return -1
	case p.freshN == 0:
		return p.ready[0]
	}
	f := p.fresh[p.freshAt]
	if len(p.ready) > 0 && p.slots[p.ready[0]].seq < p.slots[f].seq {
		return p.ready[0]
	}
	return f
}

// pop removes the oldest ready slot, and returns it. p.mu is held.
// There is one: startable said so.
func (p *pipeline[T, C]) pop() int32 {
	if i := p.oldest(); p.freshN > 0 && i == p.fresh[p.freshAt] {
		p.freshAt = (p.freshAt + 1) % len(p.fresh)
		p.freshN--
		return i
	}
	h := p.ready
	top, last := h[0], len(h)-1
	h[0] = h[last]
	h = h[:last]
	for j := 0; ; {
		m, l, r := j, 2*j+1, 2*j+2
		if l < len(h) && p.slots[h[l]].seq < p.slots[h[m]].seq {
			m = l
		}
		if r < len(h) && p.slots[h[r]].seq < p.slots[h[m]].seq {
			m = r
		}
		if m == j {
			break
		}
		h[m], h[j] = h[j], h[m]
		j = m
	}
	p.ready = h
	return top
}

// startReady wakes an idle handler when a slot may start: one at a time,
// and each woken handler wakes the next while more may start, so that
// handlers that finish take the ready slots themselves when they keep up,
// and no event waits for a wake then. p.mu is held.
func (p *pipeline[T, C]) startReady() {
	if p.idle > 0 && !p.waking && p.startable() {
		p.waking = true
		p.wake <- struct{}{}
	}
}

// startable reports whether the oldest ready slot may start: fewer than n
// run, and no failure or stop before it says no more may start. p.mu is
// held.
func (p *pipeline[T, C]) startable() bool {
	i := p.oldest()
	return i >= 0 && p.running < p.n && !p.halted.Load() &&
		(p.stopAt == 0 || p.slots[i].seq < p.stopAt)
}

// release frees slot i's key for the next event queued on it, which
// becomes ready. p.mu is held.
func (p *pipeline[T, C]) release(i int32) {
	if p.keys != nil {
		if next := p.keys.give(i); next >= 0 {
			p.push(next)
		}
	}
}

// handler is one handler goroutine: it takes the oldest ready slot, runs
// its tries, applies the decision and wakes the committer, then takes the
// next one under the same lock; it waits for a wake only when none may
// start, and returns once the pipeline stopped.
func (p *pipeline[T, C]) handler(ctx context.Context, r *supervisor[T, C], handle handler[T]) {
	defer p.handlers.Done()
	p.mu.Lock()
	for {
		if !p.startable() {
			p.idle++
			p.mu.Unlock()
			_, ok := <-p.wake
			p.mu.Lock()
			p.idle--
			p.waking = false
			if !ok {
				p.mu.Unlock()
				return
			}
			continue
		}
		i := p.pop()
		p.slots[i].state = running
		p.running++
		p.startReady() // the next idle handler, while more may start
		p.mu.Unlock()

		s := &p.slots[i]
		a, err := p.tries(ctx, r, handle, s)
		if s.started && !s.panicked {
			r.guard.wd.active()
		}
		p.mu.Lock()
		p.finish(i, a, err)
		if p.mayAdvance(i) {
			wake(p.kick)
		}
	}
}

// mayAdvance reports whether the committer has work after slot i
// finished: not when i finished behind a head still running or queued,
// with other handlers still running and nothing waiting to settle — the
// head's own finish wakes it. p.mu is held.
func (p *pipeline[T, C]) mayAdvance(i int32) bool {
	if p.slots[i].state != done || p.running == 0 || p.settleWaits || p.halted.Load() || p.stopAt != 0 {
		return true
	}
	h := p.index(p.head)
	return h == i || p.slots[h].state == done || p.slots[h].state == parking
}

// tries runs the slot's tries until one is not to be retried. An event
// handed to a handler before a failure runs (the prefix before the failed
// event is finished and committed), but no try starts once ctx ended or the
// pipeline stopped, and no retry once it halted (s.started false). A panic
// is kept in the slot.
func (p *pipeline[T, C]) tries(ctx context.Context, r *supervisor[T, C], handle handler[T], s *slot[T, C]) (a action, err error) {
	defer func() {
		if v := recover(); v != nil {
			s.panicked, s.panicVal = true, v
		}
	}()
	for s.started = false; ctx.Err() == nil && !p.quitting.Load() && (s.tries == 0 || !p.halted.Load()); s.started = false {
		r.try(ctx, handle, s)
		if a, err = r.after(ctx, s); a != retry {
			return a, err
		}
	}
	return fail, nil
}

// finish applies the decision a on slot i's tries. p.mu is held.
func (p *pipeline[T, C]) finish(i int32, a action, err error) {
	s := &p.slots[i]
	p.running--
	switch {
	case s.panicked:
		if !p.panicked {
			p.panicked, p.panicVal = true, s.panicVal
		}
		p.halt(nil)
		s.state = queued
		return
	case !s.started: // halted before it started
		s.state = queued
		return
	}
	switch a {
	case park:
		s.state = parking // the committer parks it once it heads the ring; its key is released then
		return
	case fail:
		s.state = queued
		p.halt(err)
		return
	case stop:
		if p.stopAt == 0 || s.seq+1 < p.stopAt {
			p.stopAt = s.seq + 1
		}
		p.stopReading()
	}
	s.state = done
	p.release(i)
}

// committer is the committer's goroutine: it commits what finished each
// time a handler or the reader wakes it, and runs the supervisor's calls.
func (p *pipeline[T, C]) committer(ctx context.Context, r *supervisor[T, C]) {
	defer close(p.done)
	defer func() {
		if p.quiet != nil {
			p.quiet.Stop()
		}
	}()
	for p.commitOnce(ctx, r) {
	}
}

// commitOnce waits for a wake or a call, then commits; it reports false
// once the pipeline stopped. A panic (a Store's, a hook's, a dead
// letter's) halts the pipeline and reaches Run's caller.
func (p *pipeline[T, C]) commitOnce(ctx context.Context, r *supervisor[T, C]) (more bool) {
	defer func() {
		if v := recover(); v != nil {
			// The committer goes on (what finished is still committed),
			// unless this was stop's last commit: then nothing will wake it.
			more = !p.handlersDone.Load()
			p.mu.Lock()
			p.notePanic(v)
			p.committing, p.recording = false, false
			p.wakeSettled()
			p.mu.Unlock()
		}
	}()
	<-p.kick // one channel, not a select: the per-event path's wake
	p.mu.Lock()
	f := p.call1
	p.call1 = nil
	p.mu.Unlock()
	if f != nil {
		f()
	}
	p.advance(ctx, r)
	if p.handlersDone.Load() { // stop: commit what the last tries finished, then return
		p.advance(ctx, r)
		return false
	}
	return true
}

// wakeAfter wakes the committer after d, for the interval save of commits
// the Store lags behind; only the committer calls it.
func (p *pipeline[T, C]) wakeAfter(d time.Duration) {
	if p.quiet == nil {
		p.quiet = time.AfterFunc(d, func() { wake(p.kick) })
		return
	}
	p.quiet.Reset(d)
}

// call runs f on the committer's goroutine and returns its error: the
// supervisor's saves and commits go through the one committer. Only the
// supervisor calls it, one call at a time.
func (p *pipeline[T, C]) call(f func() error) error {
	done := make(chan error, 1)
	p.mu.Lock()
	p.call1 = func() {
		err := errCommitterPanicked
		defer func() {
			if err == errCommitterPanicked {
				// f panicked: record it before the supervisor learns of it,
				// so that its settle, which may find the pipeline settled
				// before commitOnce's recover runs, raises it; then let the
				// panic go on to that recover.
				v := recover()
				if v == nil { // runtime.Goexit, not a panic
					done <- err
					return
				}
				p.mu.Lock()
				p.notePanic(v)
				p.mu.Unlock()
				done <- err
				panic(v)
			}
			done <- err
		}()
		err = f()
	}
	p.mu.Unlock()
	wake(p.kick)
	return <-done
}

// notePanic records v, a panic of the committer, unless one was recorded
// first, and halts the pipeline. p.mu is held.
func (p *pipeline[T, C]) notePanic(v any) {
	if !p.panicked {
		p.panicked, p.panicVal = true, v
	}
	p.halt(nil)
}

// advance commits the done slots at the head of the ring, in order, up to
// the first unfinished one (and no further than a stopping event), parks a
// spent event when it heads the ring, and saves as the rules say. Every
// call of the user's code (hooks, Save, the dead letter) is made outside
// the lock.
func (p *pipeline[T, C]) advance(ctx context.Context, r *supervisor[T, C]) {
	for {
		p.mu.Lock()
		p.committing = true
		p.recs = p.recs[:0]
		for !p.empty() && (p.stopAt == 0 || p.head < p.stopAt) {
			s := &p.slots[p.index(p.head)]
			if s.state != done {
				break
			}
			p.head++
			if s.kind == replayed {
				p.replayed++
			} else {
				p.recs = append(p.recs, commitRec[C]{c: s.c, kind: s.kind, moves: s.moves, inFlight: int(p.tail - p.head)})
			}
			*s = slot[T, C]{} // let the event go
		}
		var spent *slot[T, C]
		if !p.empty() && !p.halted.Load() && (p.stopAt == 0 || p.head < p.stopAt) {
			if s := &p.slots[p.index(p.head)]; s.state == parking {
				spent = s
			}
		}
		p.recording = len(p.recs) > 0
		connEnd := p.saveAt != 0 && p.head+1 >= p.saveAt
		if connEnd {
			p.saveAt = 0
		}
		if p.readWaits && !p.full() {
			p.readWaits = false
			wake(p.room)
		}
		p.mu.Unlock()

		err := r.commitRun(ctx, p.recs, connEnd)
		p.mu.Lock()
		p.recording = false
		if err != nil {
			p.saveErr = err
		}
		p.mu.Unlock()
		if err != nil {
			r.guard.drop() // the connection ends; the supervisor classifies the failure
		} else if r.interval > 0 && r.unsaved > 0 && !r.saveFailed {
			p.wakeAfter(r.interval - time.Since(r.lastSave)) // a stream gone quiet is saved all the same
		}
		p.commits.Add(int64(len(p.recs)))
		if spent == nil || !p.parkHead(ctx, r, spent) {
			break
		}
	}
	p.mu.Lock()
	p.committing = false
	p.wakeSettled()
	p.mu.Unlock()
}

// parkHead hands the spent event at the head to the dead letter and marks
// it done; it reports whether it did.
func (p *pipeline[T, C]) parkHead(ctx context.Context, r *supervisor[T, C], s *slot[T, C]) bool {
	err := r.parkSlot(ctx, s)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		p.halt(err)
		return false
	}
	s.state = done
	switch s.kind {
	case handled:
		s.kind = parked
	case replayed:
		p.replayParked++
	}
	p.release(p.index(p.head))
	p.startReady()
	return true
}

// wakeSettled wakes a supervisor waiting in settle once the pipeline
// settled. p.mu is held.
func (p *pipeline[T, C]) wakeSettled() {
	if p.settleWaits && p.isSettled() {
		p.settleWaits = false
		wake(p.settled)
	}
}

// isSettled reports whether nothing more will finish or commit: no try
// runs, the committer is idle, and every slot left is committed, failed,
// or will never start.
// p.mu is held.
func (p *pipeline[T, C]) isSettled() bool {
	switch {
	case p.running > 0 || p.committing:
		return false
	case p.empty():
		return true
	case !p.halted.Load() && p.stopAt == 0:
		return false
	case p.stopAt != 0 && p.head >= p.stopAt:
		return true
	}
	s := p.slots[p.index(p.head)].state
	return s != done && (s != parking || p.halted.Load())
}

// waitSettled waits until the pipeline settled. When ctx ends meanwhile it
// halts the pipeline and waits for the tries that run (their handlers see
// ctx's end).
func (p *pipeline[T, C]) waitSettled(ctx context.Context) {
	ctxDone := ctx.Done()
	p.mu.Lock()
	for !p.isSettled() {
		p.settleWaits = true
		p.mu.Unlock()
		select {
		case <-p.settled:
		case <-ctxDone:
			ctxDone = nil
			p.mu.Lock()
			p.halt(ctx.Err())
			p.mu.Unlock()
			wake(p.kick)
		}
		p.mu.Lock()
	}
	p.mu.Unlock()
}

// pipeEnding is what the supervisor learns of the pipeline once it settled.
type pipeEnding struct {
	err      error
	panicked bool
	panicVal any
	stopAt   uint64
	head     uint64
	empty    bool
	saveErr  error
}

// ending returns the pipeline's state for the supervisor.
func (p *pipeline[T, C]) ending() pipeEnding {
	p.mu.Lock()
	defer p.mu.Unlock()
	return pipeEnding{err: p.err, panicked: p.panicked, panicVal: p.panicVal, stopAt: p.stopAt, head: p.head, empty: p.empty(), saveErr: p.saveErr}
}

// forgetSaveErr forgets the failed save the supervisor took over.
func (p *pipeline[T, C]) forgetSaveErr() {
	p.mu.Lock()
	p.saveErr = nil
	p.mu.Unlock()
}

// inFlight returns the events read and not committed, for Stats: none
// once the pipeline stopped.
func (p *pipeline[T, C]) inFlight() int {
	if p.handlersDone.Load() {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return int(p.tail - p.head)
}

// lastRead returns the cursor of the last event read, and whether the
// committed cursor may lag it: an event is in the ring, or the committer
// is recording what it took from the ring.
func (p *pipeline[T, C]) lastRead() (C, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.empty() && !p.recording {
		var zero C
		return zero, false
	}
	return p.last, true
}

// endConn asks the committer to save once the events read so far are
// committed (a connection ended while they run), or at once when none
// is left.
func (p *pipeline[T, C]) endConn() {
	p.mu.Lock()
	p.saveAt = p.tail + 1
	p.mu.Unlock()
	wake(p.kick)
}

// takeReplayed returns and resets the counts of a resync's replay.
func (p *pipeline[T, C]) takeReplayed() (n, parked int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n, parked = p.replayed, p.replayParked
	p.replayed, p.replayParked = 0, 0
	return n, parked
}

// readPipe is drain's loop under WithConcurrency: Run's goroutine reads
// each event and adds it to the pipeline, which handles and commits it on
// its own. Reading waits while the ring is full, so at most the window is
// read and not committed, and stops once the pipeline stopped.
func (r *supervisor[T, C]) readPipe(ctx context.Context, conn Conn[T], p *pipeline[T, C]) (o outcome) {
	o.opened = true
	start := p.commits.Load()
	defer func() { o.commits = int(p.commits.Load() - start) }()
	last := r.resumeAt()
	for p.waitRoom(ctx, &r.guard) {
		ev, err := conn.Recv(p.opens)
		if err != nil {
			return r.connEnded(ctx, o, err)
		}
		r.guard.wd.active()
		c, kind, moves, err := r.take(ev, last)
		switch {
		case err != nil:
			p.fail(err)
			return o.final(err)
		case kind == skipped:
			r.skip()
			continue
		}
		last = c
		o.read++
		p.add(ev, c, kind, moves)
	}
	return o.final(ctx.Err()) // ctx's end, or the pipeline stopped: settle says how
}

// resumeAt is the cursor the next Open asks for: the committed one, or,
// while the pipeline holds events read before a clean end, the last event
// read.
func (r *supervisor[T, C]) resumeAt() C {
	if p := r.pipe.Load(); p != nil {
		if c, ok := p.lastRead(); ok {
			return c
		}
	}
	return r.cur()
}

// settle waits until the pipeline's events read before o ended a try have
// finished and committed; a handler's failure, panic or stop then ends Run,
// and a failed save turns the try into a save failure. It is a no-op
// without a pipeline.
func (r *supervisor[T, C]) settle(ctx context.Context, o outcome) outcome {
	p := r.pipe.Load()
	if p == nil {
		return o
	}
	p.waitSettled(ctx)
	e := p.ending()
	if e.panicked { // raised on Run's goroutine; the committed cursor is saved on its way up
		panic(e.panicVal)
	}
	switch {
	case e.err != nil && ctx.Err() != nil:
		return o.final(ctx.Err())
	case e.err != nil:
		return o.final(e.err)
	case o.end == finalEnd && o.err != nil: // ctx's end or the end of the stream: it stands
		return o
	case e.stopAt != 0:
		o = o.final(nil)
		if e.head < e.stopAt { // ctx ended before the stopping event committed
			o.err = ctx.Err()
		}
		return o
	case !e.empty && ctx.Err() != nil: // the stream ended, ctx before its events did
		return o.final(ctx.Err())
	case o.end != finalEnd && e.saveErr != nil:
		p.forgetSaveErr()
		return r.saveEnded(ctx, o, e.saveErr)
	}
	return o
}

// replayed hands a resync's event to the pipeline, waiting while it is
// full; it returns the first handler failure (or ErrStop).
func (r *supervisor[T, C]) replayed(ctx context.Context, p *pipeline[T, C], ev T) error {
	if !p.waitRoom(ctx, &r.guard) {
		if err := ctx.Err(); err != nil {
			return err
		}
		return r.replayErr(ctx, p)
	}
	var zero C
	p.add(ev, zero, replayed, false)
	return nil
}

// settleReplay waits for every replayed event still in the pipeline and
// returns the first handler failure (or ErrStop).
func (r *supervisor[T, C]) settleReplay(ctx context.Context, p *pipeline[T, C]) error {
	p.waitSettled(ctx)
	return r.replayErr(ctx, p)
}

// replayErr is the replay's failure so far, once the pipeline stopped: a
// panic is raised again, a stop matches ErrStop.
func (r *supervisor[T, C]) replayErr(ctx context.Context, p *pipeline[T, C]) error {
	if !p.stopped() {
		return nil
	}
	p.waitSettled(ctx)
	e := p.ending()
	switch {
	case e.panicked:
		panic(e.panicVal)
	case e.err != nil && ctx.Err() != nil:
		return ctx.Err()
	case e.err != nil:
		return e.err
	case e.stopAt != 0 && e.head < e.stopAt && ctx.Err() != nil:
		return ctx.Err()
	case e.stopAt != 0:
		return ErrStop
	}
	return ctx.Err()
}
