package stream

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// window runs the step under WithConcurrency. Events take slots of a ring
// in stream order: seq head is the oldest not committed, tail the next to
// fill. A slot becomes ready when its key is free, and a ready slot starts
// when fewer than n tries run; the committed cursor advances over done
// slots from head, so it never passes an unfinished event. The loop's
// goroutine owns every field but a slot's try results (see slot) and
// halted, which the handler goroutines read.
type window[T, C any] struct {
	slots        []slot[T, C]
	keys         keyTable[T] // nil: any events may overlap
	head         uint64
	tail         uint64
	ready        []int32    // a min-heap, by seq, of the slots whose key is free
	n            int        // handler goroutines
	work         chan int32 // slot indexes to the handler goroutines; holds n
	done         chan int32 // slot indexes back; holds n
	running      int        // sent on work, not back
	halted       atomic.Bool
	stopAt       uint64 // an ErrStop event's seq + 1 (0: none): start and commit nothing after it
	err          error  // the failure that ends Run
	panicked     bool
	panicVal     any
	saves        chan C       // the saver's next cursor to save; holds 1
	saveErrs     chan error   // the saver's result; holds 1
	saving       bool         // a save is in flight
	savingC      C            // its cursor
	savingN      int          // the commits it covers
	replayed     int          // a resync's replayed events finished since its start
	replayParked int          // of which parked
	inFlight     atomic.Int64 // for Stats
	q            *ahead[T]    // the read-ahead ring, made at the first connection
	wg           sync.WaitGroup
}

// startWindow starts the handler goroutines; stop ends them.
func (r *Resumer[T, C]) startWindow(ctx context.Context, handle handler[T]) *window[T, C] {
	w := &window[T, C]{
		slots:    make([]slot[T, C], r.window),
		ready:    make([]int32, 0, r.window),
		n:        r.handlers,
		work:     make(chan int32, r.handlers),
		done:     make(chan int32, r.handlers),
		saves:    make(chan C, 1),
		saveErrs: make(chan error, 1),
	}
	if r.keys != nil {
		w.keys = r.keys(r.window)
	}
	w.wg.Add(r.handlers + 1)
	for range r.handlers {
		go r.handlerLoop(ctx, w, handle)
	}
	go func() { // the saver: one Store.Save at a time, off the loop
		defer w.wg.Done()
		for c := range w.saves {
			w.saveErrs <- r.store.Save(ctx, c)
		}
	}()
	return w
}

// held reports whether reading must wait: the window is full, or a save is
// in flight while the commits since the last save reached the cadence plus
// a window (so a crash redelivers at most two windows and the cadence).
func (r *Resumer[T, C]) held(w *window[T, C]) bool {
	return w.full() || (w.saving && r.st.unsaved >= max(r.everyN, 1)+len(w.slots))
}

// startSave hands the committed cursor to the saver when the cadence asked
// for a save and none is in flight: group commit, so that the Store's
// latency does not bound the events handled per second.
func (r *Resumer[T, C]) startSave(w *window[T, C]) {
	if !r.st.saveDue || w.saving || r.st.saveFailed {
		return
	}
	r.st.saveDue = false
	if r.st.unsaved == 0 {
		return
	}
	w.saving, w.savingC, w.savingN = true, r.cur(), r.st.unsaved
	w.saves <- w.savingC
}

// saveDone finishes the saver's save that returned err; it returns the
// error that ends the connection, if any.
func (r *Resumer[T, C]) saveDone(ctx context.Context, w *window[T, C], err error) error {
	w.saving = false
	if err != nil && ctx.Err() != nil {
		return ctx.Err() // shutdown: no failure to count; the final save follows
	}
	r.mu.Lock()
	r.countSave(err)
	r.mu.Unlock()
	if r.hooks.OnSave != nil {
		r.hooks.OnSave(SaveEvent[C]{Cursor: w.savingC, Err: err})
	}
	if err != nil {
		r.st.saveFailed = true
		return fmt.Errorf("stream: saving cursor %s to the Store: %w", text(w.savingC), err)
	}
	r.st.unsaved -= w.savingN
	if r.interval > 0 {
		r.st.lastSave = time.Now()
	}
	return nil
}

// handlerLoop is one handler goroutine: it runs tries, and starts none once
// the window halted. A panic is caught and raised again on Run's goroutine.
func (r *Resumer[T, C]) handlerLoop(ctx context.Context, w *window[T, C], handle handler[T]) {
	defer w.wg.Done()
	for i := range w.work {
		s := &w.slots[i]
		s.started = false
		if !w.halted.Load() {
			func() {
				defer func() {
					if v := recover(); v != nil {
						s.panicked, s.panicVal = true, v
					}
				}()
				r.try(ctx, handle, s)
			}()
		}
		w.done <- i
	}
}

// stop ends the handler goroutines once none is running, and the saver
// once no save is in flight.
func (w *window[T, C]) stop() {
	close(w.work)
	close(w.saves)
	w.wg.Wait()
}

func (w *window[T, C]) inflight() int { return int(w.tail - w.head) }
func (w *window[T, C]) full() bool    { return w.inflight() == len(w.slots) }
func (w *window[T, C]) empty() bool   { return w.head == w.tail }

// settled reports whether nothing more will finish: no try runs, and every
// slot left is done or will never start.
func (w *window[T, C]) settled() bool {
	return w.running == 0 && (w.halted.Load() || w.stopAt != 0 || w.empty())
}

// halt starts nothing more: a failure, a panic or the end of ctx.
func (w *window[T, C]) halt(err error) {
	if w.err == nil {
		w.err = err
	}
	w.halted.Store(true)
}

// add puts a taken event in the next slot; it becomes ready when its key is
// free.
func (w *window[T, C]) add(ev T, c C, kind eventKind, moves bool) {
	i := int32(w.tail % uint64(len(w.slots)))
	w.slots[i] = slot[T, C]{ev: ev, c: c, seq: w.tail, kind: kind, moves: moves}
	w.tail++
	w.inFlight.Store(int64(w.inflight()))
	if kind == progress {
		w.slots[i].state = done
		return
	}
	if w.keys == nil || w.keys.take(ev, i) {
		w.push(i)
	}
}

// push makes slot i ready and starts what may start: the oldest ready
// events first.
func (w *window[T, C]) push(i int32) {
	h := append(w.ready, i)
	for j := len(h) - 1; j > 0; {
		up := (j - 1) / 2
		if w.slots[h[up]].seq <= w.slots[h[j]].seq {
			break
		}
		h[up], h[j] = h[j], h[up]
		j = up
	}
	w.ready = h
	w.startReady()
}

// pop removes the oldest ready slot.
func (w *window[T, C]) pop() int32 {
	h := w.ready
	top, last := h[0], len(h)-1
	h[0] = h[last]
	h = h[:last]
	for j := 0; ; {
		m, l, r := j, 2*j+1, 2*j+2
		if l < len(h) && w.slots[h[l]].seq < w.slots[h[m]].seq {
			m = l
		}
		if r < len(h) && w.slots[h[r]].seq < w.slots[h[m]].seq {
			m = r
		}
		if m == j {
			break
		}
		h[m], h[j] = h[j], h[m]
		j = m
	}
	w.ready = h
	return top
}

// startReady sends ready slots to the handler goroutines, oldest first,
// while fewer than n run, unless a failure or a stop before them says no
// more may start.
func (w *window[T, C]) startReady() {
	for len(w.ready) > 0 && w.running < w.n && !w.halted.Load() {
		if w.stopAt != 0 && w.slots[w.ready[0]].seq >= w.stopAt {
			return
		}
		w.send(w.pop())
	}
}

func (w *window[T, C]) send(i int32) {
	w.slots[i].state = running
	w.running++
	w.work <- i
}

// finish takes slot i back from its handler goroutine and applies the one
// decision on its try.
func (r *Resumer[T, C]) finish(ctx context.Context, w *window[T, C], i int32) {
	s := &w.slots[i]
	w.running--
	switch {
	case s.panicked:
		if !w.panicked {
			w.panicked, w.panicVal = true, s.panicVal
		}
		w.halt(nil)
		s.state = queued
		return
	case !s.started: // halted before it started
		s.state = queued
		return
	}
	a, err := r.after(ctx, s)
	switch a {
	case retry:
		if w.halted.Load() {
			s.state = queued
			return
		}
		w.send(i) // it keeps its key and its place
		return
	case park:
		s.state = parking
		w.startReady() // its handler is free; its key is released once it is parked
		return
	case fail:
		s.state = queued
		w.halt(err)
		return
	case stop:
		if w.stopAt == 0 || s.seq+1 < w.stopAt {
			w.stopAt = s.seq + 1
		}
	}
	s.state = done
	w.release(i)
}

// release frees slot i's key for the next event queued on it.
func (w *window[T, C]) release(i int32) {
	if w.keys != nil {
		if next := w.keys.give(i); next >= 0 {
			w.push(next)
			return
		}
	}
	w.startReady()
}

// advance commits the done slots at the head of the window, in order, up to
// the first unfinished one (and no further than a stopping event), parking
// a spent event when it heads the window. It reports how many cursors it
// committed, and a failed save.
func (r *Resumer[T, C]) advance(ctx context.Context, w *window[T, C]) (commits int, err error) {
	for !w.empty() && (w.stopAt == 0 || w.head < w.stopAt) {
		i := int32(w.head % uint64(len(w.slots)))
		s := &w.slots[i]
		if s.state == parking && !w.halted.Load() {
			if perr := r.parkSlot(ctx, s); perr != nil {
				w.halt(perr)
				break
			}
			s.state = done
			switch s.kind {
			case handled:
				s.kind = parked
			case replayed:
				w.replayParked++
			}
			w.release(i)
		}
		if s.state != done {
			break
		}
		w.head++
		if s.kind == replayed {
			w.replayed++
		} else {
			serr := r.commit(ctx, s.c, s.kind, s.moves)
			commits++
			if serr != nil && err == nil {
				err = serr
			}
		}
		*s = slot[T, C]{} // let the event go
	}
	w.inFlight.Store(int64(w.inflight()))
	return commits, err
}

// reset empties the window after Run's end was decided.
func (w *window[T, C]) reset() {
	clear(w.slots)
	w.head, w.tail, w.ready = 0, 0, w.ready[:0]
	w.inFlight.Store(0)
	w.halted.Store(false)
	w.stopAt, w.err = 0, nil
	w.panicked, w.panicVal = false, nil
	if w.keys != nil {
		w.keys.clear()
	}
}

// await waits, during a replay, for one try to finish or for ctx to end
// (which halts the window), then advances over what finished: replayed
// slots commit no cursor, so nothing is saved.
func (r *Resumer[T, C]) await(ctx context.Context, w *window[T, C], ctxDone <-chan struct{}) {
	select {
	case i := <-w.done:
		r.guard.wd.active()
		r.finish(ctx, w, i)
	case <-ctxDone:
		w.halt(ctx.Err())
	}
	_, _ = r.advance(ctx, w)
}

// finishReady takes back every try that finished meanwhile, without
// waiting.
func (r *Resumer[T, C]) finishReady(ctx context.Context, w *window[T, C]) {
	for {
		select {
		case i := <-w.done:
			r.finish(ctx, w, i)
		default:
			return
		}
	}
}

// drainWindow waits until the window settled after a halt or a stop.
func (r *Resumer[T, C]) drainWindow(ctx context.Context, w *window[T, C]) {
	for w.running > 0 {
		r.finish(ctx, w, <-w.done)
	}
}

// keyTable serialises events with equal keys (see [WithOrderKey]): take
// reads the event's key, once, and reports whether the event in slot i may
// run now, or queues it behind its key; give releases slot i's key and
// returns the next slot queued on it, or -1.
type keyTable[T any] interface {
	take(ev T, i int32) bool
	give(i int32) int32
	clear()
}

// keys is a keyTable: per key, the slot that holds it and the last queued;
// per slot, its key and the slot queued after it.
type keys[T any, K comparable] struct {
	key   func(T) K
	held  map[K]keyQueue
	of    []K
	after []int32
}

type keyQueue struct{ head, tail int32 }

// newKeys returns a keyTable for a window of the given size.
func newKeys[T any, K comparable](key func(T) K, window int) keyTable[T] {
	return &keys[T, K]{key: key, held: make(map[K]keyQueue), of: make([]K, window), after: make([]int32, window)}
}

func (k *keys[T, K]) take(ev T, i int32) bool {
	id := k.key(ev)
	k.of[i] = id
	k.after[i] = -1
	q, ok := k.held[id]
	if !ok {
		k.held[id] = keyQueue{head: i, tail: i}
		return true
	}
	k.after[q.tail] = i
	q.tail = i
	k.held[id] = q
	return false
}

func (k *keys[T, K]) give(i int32) int32 {
	id := k.of[i]
	q := k.held[id]
	if q.tail == i {
		delete(k.held, id)
		return -1
	}
	q.head = k.after[i]
	k.held[id] = q
	return q.head
}

func (k *keys[T, K]) clear() {
	clear(k.held)
	clear(k.of)
}

// readWindow is drain's loop under WithConcurrency: a reader goroutine
// receives events while the loop takes them into the window and commits
// the contiguous prefix of finished ones. Reading pauses while the window
// is full. When the connection ends cleanly after reading, the events in
// flight stay in their handlers while the loop opens the next connection
// after the last event read (see resumeAt); any other end settles the
// window first. So no event is handed over twice in one Run.
func (r *Resumer[T, C]) readWindow(ctx context.Context, conn Conn[T], w *window[T, C]) outcome {
	if w.q == nil {
		w.q = newAhead[T](len(w.slots), nil)
	}
	q := w.q.start(ctx, conn)
	defer q.stop(conn)
	return r.windowLoop(ctx, q, w, nil)
}

// settle waits until the window's events read before o ended a try have
// finished and committed, and the save in flight returned; a handler's
// failure, panic or stop then ends Run. It is a no-op without a window, or
// with nothing left in it.
func (r *Resumer[T, C]) settle(ctx context.Context, o outcome) outcome {
	w := r.win.Load()
	if w == nil || (w.empty() && !w.saving) {
		return o
	}
	return r.windowLoop(ctx, nil, w, &o)
}

// windowLoop runs the window: it takes events from q (nil: nothing more to
// read) until the connection ends, and returns once the window settled, or
// at once after a clean end that read events and left nothing failed.
// end, when not nil, is how the try already ended.
func (r *Resumer[T, C]) windowLoop(ctx context.Context, q *ahead[T], w *window[T, C], end *outcome) outcome {
	o := outcome{opened: true}
	stopReading := func(e outcome) {
		if end == nil {
			end = &e
		}
	}
	ctxDone := ctx.Done()
	last := r.resumeAt()
	paused := false
	commits := 0
	for {
		for end == nil && !r.held(w) && q.ready() {
			rv := q.take()
			if rv.err != nil {
				stopReading(r.connEnded(ctx, o, rv.err))
				break
			}
			r.guard.wd.active()
			c, kind, moves, err := r.take(rv.ev, last)
			switch {
			case err != nil:
				w.halt(err)
				stopReading(o.final(err))
				continue
			case kind == skipped:
				r.skip()
				continue
			}
			last = c
			o.read++
			w.add(rv.ev, c, kind, moves)
		}
		n, err := r.advance(ctx, w)
		commits += n
		r.startSave(w)
		switch {
		case err != nil && end == nil:
			// The events read are still handled; the loop classifies
			// the failure once they were, and saves again after.
			stopReading(r.saveEnded(ctx, o, err))
		case w.halted.Load():
			stopReading(o.final(w.err))
		case w.stopAt != 0: // finish what runs before the stopping event
			stopReading(o.final(nil))
		}
		if end != nil && end.end == cleanEnd && end.read > 0 && !w.halted.Load() && w.stopAt == 0 {
			break // pipelined: the next connection opens while these run
		}
		if end != nil && w.settled() {
			if w.saving { // the try's end waits for the save in flight
				if err := r.saveDone(ctx, w, <-w.saveErrs); err != nil && end.end != finalEnd {
					*end = r.saveEnded(ctx, *end, err)
				}
			}
			break // nothing left to run
		}
		if full := end == nil && r.held(w); full != paused {
			paused = full
			r.guard.pause(full)
		}
		var wake <-chan struct{}
		if end == nil && !r.held(w) {
			if wake = q.waitFor(); wake == nil {
				continue // read meanwhile
			}
		}
		select {
		case <-wake:
		case i := <-w.done:
			r.guard.wd.active()
			r.finish(ctx, w, i)
			r.finishReady(ctx, w)
		case err := <-w.saveErrs:
			if err := r.saveDone(ctx, w, err); err != nil {
				stopReading(r.saveEnded(ctx, o, err))
			}
		case <-ctxDone:
			ctxDone = nil
			w.halt(ctx.Err())
			stopReading(o.final(ctx.Err()))
		}
	}
	if paused {
		r.guard.pause(false)
	}
	e := *end
	e.commits += commits
	return r.windowEnd(ctx, e, w)
}

// resumeAt is the cursor the next Open asks for: the committed one, or,
// while a window holds events read before a clean end, the last event read.
func (r *Resumer[T, C]) resumeAt() C {
	if w := r.win.Load(); w != nil && !w.empty() {
		return w.slots[(w.tail-1)%uint64(len(w.slots))].c
	}
	return r.cur()
}

// windowEnd finishes a connection or a replay under WithConcurrency: a
// handler's panic is raised again here, on Run's goroutine; a handler
// failure, a stop or ctx's end ends Run; the window is emptied when Run
// ends.
func (r *Resumer[T, C]) windowEnd(ctx context.Context, e outcome, w *window[T, C]) outcome {
	if w.panicked {
		v := w.panicVal
		w.reset()
		panic(v)
	}
	switch {
	case w.err != nil && ctx.Err() != nil:
		e = e.final(ctx.Err())
	case w.err != nil:
		e = e.final(w.err)
	case e.end == finalEnd && e.err != nil: // an extractor failure: it stands
	case w.stopAt != 0:
		e = e.final(nil)
		if w.head < w.stopAt { // ctx ended before the stopping event committed
			e.err = ctx.Err()
		}
	case !w.empty() && ctx.Err() != nil: // the stream ended, ctx before its events did
		e = e.final(ctx.Err())
	}
	if e.end == finalEnd {
		w.reset()
	}
	return e
}

// replayed hands a resync's event to the window, waiting while it is full;
// it returns the first handler failure (or ErrStop).
func (r *Resumer[T, C]) replayed(ctx context.Context, w *window[T, C], ev T) error {
	for w.full() && !w.halted.Load() && w.stopAt == 0 {
		r.await(ctx, w, ctx.Done())
	}
	if err := r.replayErr(ctx, w); err != nil {
		return err
	}
	var zero C
	w.add(ev, zero, replayed, false)
	return nil
}

// settleReplay waits for every replayed event still in the window and
// returns the first handler failure (or ErrStop).
func (r *Resumer[T, C]) settleReplay(ctx context.Context, w *window[T, C]) error {
	ctxDone := ctx.Done()
	for !w.settled() {
		if ctx.Err() != nil { // halted: wait for the running tries alone
			w.halt(ctx.Err())
			ctxDone = nil
		}
		r.await(ctx, w, ctxDone)
	}
	return r.replayErr(ctx, w)
}

// replayErr is the replay's failure so far: a panic is raised again, a stop
// matches ErrStop; the window is settled and emptied for either.
func (r *Resumer[T, C]) replayErr(ctx context.Context, w *window[T, C]) error {
	if !w.halted.Load() && w.stopAt == 0 {
		return nil
	}
	r.drainWindow(ctx, w)
	e := r.windowEnd(ctx, outcome{}, w)
	if e.end == finalEnd && e.err == nil {
		return ErrStop
	}
	return e.err
}
