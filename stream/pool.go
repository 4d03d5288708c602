package stream

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/resumable-go/resumable/internal/errwalk"
)

// pool runs the handler on n goroutines under WithConcurrency. The loop's
// goroutine owns every field but the slots' results, which a handler
// goroutine writes between receiving the slot's index on work and sending
// it back on done.
//
// Events take slots of a ring (the window) in stream order: seq head is the
// oldest not committed, tail the next to fill. A slot is dispatched when
// its key is free; the committed cursor advances over done slots from head,
// so it never passes an unfinished event.
type pool[T, C any] struct {
	slots     []slot[T, C]
	keys      keyTable[T] // nil: any events may overlap
	head      uint64
	tail      uint64
	work      chan int32 // slot indexes to the handler goroutines; never blocks (window capacity)
	done      chan int32 // slot indexes back; never blocks
	running   int        // dispatched, not back
	halted    bool       // a failure: dispatch nothing more
	stopAt    uint64     // an ErrStop event's seq + 1 (0: none): dispatch and commit nothing after it
	err       error      // the first handler failure, or a panic (panicked)
	panicked  bool
	panicVal  any
	replayed  int          // a resync's replayed events finished since its start
	published atomic.Int64 // inFlight, for Stats
	wg        sync.WaitGroup
}

// slot is one event in the window.
type slot[T, C any] struct {
	ev    T
	c     C
	seq   uint64
	kind  eventKind
	moves bool // committing it moves the stream
	state slotState
	// Written by the handler goroutine.
	err      error
	panicked bool
	panicVal any
}

type slotState uint8

const (
	queued  slotState = iota // waits for its key
	running                  // in a handler
	done                     // finished (or needs no handler)
)

// startPool starts the handler goroutines; stop ends them.
func (r *Resumer[T, C]) startPool(ctx context.Context, handle handler[T]) *pool[T, C] {
	p := &pool[T, C]{
		slots: make([]slot[T, C], r.window),
		work:  make(chan int32, r.window),
		done:  make(chan int32, r.window),
	}
	if r.keys != nil {
		p.keys = r.keys(r.window)
	}
	p.wg.Add(r.handlers)
	for range r.handlers {
		go r.handlerLoop(ctx, p, handle)
	}
	return p
}

// handlerLoop is one handler goroutine. A panic in the handler is caught
// and raised again on Run's goroutine once the others finished.
func (r *Resumer[T, C]) handlerLoop(ctx context.Context, p *pool[T, C], handle handler[T]) {
	defer p.wg.Done()
	for i := range p.work {
		s := &p.slots[i]
		func() {
			defer func() {
				if v := recover(); v != nil {
					s.panicked, s.panicVal = true, v
				}
			}()
			s.err = r.handleEvent(ctx, handle, s.ev, s.c)
		}()
		p.done <- i
	}
}

// stop ends the handler goroutines once none is running.
func (p *pool[T, C]) stop() {
	close(p.work)
	p.wg.Wait()
}

// inFlight is how many events are read but not committed.
func (p *pool[T, C]) inFlight() int { return int(p.tail - p.head) }

func (p *pool[T, C]) full() bool { return p.inFlight() == len(p.slots) }

// add puts an event in the next slot and dispatches it when it may run.
func (p *pool[T, C]) add(ev T, c C, kind eventKind, moves bool) {
	i := int32(p.tail % uint64(len(p.slots)))
	var zero C
	p.slots[i] = slot[T, C]{ev: ev, c: c, seq: p.tail, kind: kind, moves: moves}
	if kind == replayed {
		p.slots[i].c = zero
	}
	p.tail++
	p.published.Store(int64(p.inFlight()))
	if kind == progress {
		p.slots[i].state = done
		return
	}
	if p.keys == nil || p.keys.take(ev, i) {
		p.dispatch(i)
	}
}

// dispatch hands slot i to a handler goroutine, unless a failure or a stop
// before it says no more may run.
func (p *pool[T, C]) dispatch(i int32) {
	s := &p.slots[i]
	if p.halted || (p.stopAt != 0 && s.seq >= p.stopAt) {
		return
	}
	s.state = running
	p.running++
	p.work <- i
}

// finish records slot i back from its handler: its key goes to the next
// event waiting for it, and a failure or a stop is noted.
func (p *pool[T, C]) finish(i int32) {
	s := &p.slots[i]
	s.state = done
	p.running--
	switch {
	case s.panicked:
		if !p.panicked {
			p.panicked, p.panicVal = true, s.panicVal
		}
		p.halted = true
	case s.err != nil && errwalk.Is(s.err, ErrStop):
		if p.stopAt == 0 || s.seq+1 < p.stopAt {
			p.stopAt = s.seq + 1
		}
	case s.err != nil:
		if p.err == nil {
			p.err = s.err
		}
		p.halted = true
	}
	if p.keys != nil {
		if next := p.keys.give(s.ev, i); next >= 0 {
			p.dispatch(next)
		}
	}
}

// settled reports whether nothing more will finish: no handler runs, and
// every slot left is done or will never be dispatched.
func (p *pool[T, C]) settled() bool {
	return p.running == 0 && (p.halted || p.stopAt != 0 || p.head == p.tail)
}

// stopped reports whether the event that asked to stop was committed.
func (p *pool[T, C]) stopped() bool { return p.stopAt != 0 && p.head >= p.stopAt }

// reset empties the window after a run ended on a failure or a stop.
func (p *pool[T, C]) reset() {
	clear(p.slots)
	p.head, p.tail = 0, 0
	p.published.Store(0)
	p.halted, p.stopAt, p.err = false, 0, nil
	p.panicked, p.panicVal = false, nil
	if p.keys != nil {
		p.keys.clear()
	}
}

// advance commits the done slots at the head of the window, in order, up to
// the first unfinished or failed one (and no further than a stopping
// event). It reports how many cursors it committed, and a failed save.
func (r *Resumer[T, C]) advance(ctx context.Context, p *pool[T, C]) (commits int, err error) {
	for p.head < p.tail && (p.stopAt == 0 || p.head < p.stopAt) {
		s := &p.slots[p.head%uint64(len(p.slots))]
		if s.state != done || s.panicked || (s.err != nil && !errwalk.Is(s.err, ErrStop)) {
			break
		}
		p.head++
		if s.kind == replayed {
			p.replayed++
			continue
		}
		serr := r.commit(ctx, s.c, s.kind, s.moves)
		commits++
		if serr != nil && err == nil {
			err = serr
		}
		var zero slot[T, C]
		*s = zero // let the event go
	}
	p.published.Store(int64(p.inFlight()))
	return commits, err
}

// received is what the reader goroutine passes on: an event or the error
// that ended the connection.
type received[T any] struct {
	ev  T
	err error
}

// readPool is drain's loop under WithConcurrency: a reader goroutine
// receives events while the loop dispatches them to the handler goroutines
// and commits the contiguous prefix of finished ones. Reading pauses while
// the window is full. When the connection ends, the loop waits for the
// events already read before it reports the end, so the reopen starts after
// the last event read and no event is handed over twice in one Run.
func (r *Resumer[T, C]) readPool(ctx context.Context, conn Conn[T], p *pool[T, C]) outcome {
	o := outcome{opened: true}
	in := make(chan received[T])
	quit := make(chan struct{})
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		for {
			ev, err := conn.Recv(ctx)
			select {
			case in <- received[T]{ev: ev, err: err}:
			case <-quit:
				return
			}
			if err != nil {
				return
			}
		}
	}()
	defer func() {
		close(quit)
		_ = conn.Close() // unblock a Recv; drain closes it again, which Close allows
		<-readerDone
	}()

	var end *outcome // how the connection ended, once reading stopped
	stopReading := func(e outcome) {
		if end == nil {
			end = &e
		}
	}
	ctxDone := ctx.Done()
	last := r.cur()
	paused := false
	for end == nil || !p.settled() {
		var recv <-chan received[T]
		if end == nil && !p.full() {
			recv = in
		}
		if full := end == nil && p.full(); full != paused {
			paused = full
			r.guard.pause(full)
		}
		select {
		case rv := <-recv:
			if rv.err != nil {
				stopReading(r.connEnded(ctx, o, rv.err))
				continue
			}
			r.guard.wd.active()
			c, kind, moves, err := r.cursorOf(rv.ev, last)
			switch {
			case err != nil:
				p.halted = true
				stopReading(o.final(err))
				continue
			case kind == skipped:
				r.skip()
				continue
			}
			last = c
			p.add(rv.ev, c, kind, moves)
		case i := <-p.done:
			r.guard.wd.active()
			p.finish(i)
		case <-ctxDone:
			ctxDone = nil
			p.halted = true
			stopReading(o.final(ctx.Err()))
		}
		n, err := r.advance(ctx, p)
		o.commits += n
		switch {
		case err != nil && end == nil:
			p.halted = true
			e := o
			e.end, e.err = saveFailed, err
			stopReading(e)
		case p.panicked || p.err != nil:
			p.halted = true
			stopReading(o.final(p.err))
		case p.stopAt != 0: // finish what runs before the stopping event
			stopReading(o.final(nil))
		}
	}
	if paused {
		r.guard.pause(false)
	}
	e := *end
	e.commits = o.commits
	return r.poolEnd(e, p)
}

// poolEnd finishes a connection or a replay under WithConcurrency: a
// handler's panic is raised again here, on Run's goroutine; a handler
// failure or a stop ends Run; the window is emptied when Run ends.
func (r *Resumer[T, C]) poolEnd(e outcome, p *pool[T, C]) outcome {
	if p.panicked {
		v := p.panicVal
		p.reset()
		panic(v)
	}
	switch {
	case e.end == finalEnd && e.err != nil: // ctx's end, an extractor failure: it stands
	case p.err != nil:
		e = e.final(p.err)
	case p.stopped():
		e = e.final(nil)
	}
	if e.end == finalEnd {
		p.reset()
	}
	return e
}

// replayPool hands a resync's event to the handler pool, waiting while the
// window is full; it returns the first handler failure (or ErrStop).
func (r *Resumer[T, C]) replayPool(ctx context.Context, p *pool[T, C], ev T) error {
	for p.full() && !p.halted {
		if err := r.awaitPool(ctx, p); err != nil {
			return err
		}
	}
	if err := r.poolErr(p); err != nil {
		return err
	}
	var zero C
	p.add(ev, zero, replayed, false)
	return nil
}

// settlePool waits for every replayed event still in the pool and returns
// the first handler failure (or ErrStop).
func (r *Resumer[T, C]) settlePool(ctx context.Context, p *pool[T, C]) error {
	for !p.settled() {
		if err := r.awaitPool(ctx, p); err != nil {
			return err
		}
	}
	return r.poolErr(p)
}

// awaitPool waits for one handler to finish (or ctx to end) and advances
// the window.
func (r *Resumer[T, C]) awaitPool(ctx context.Context, p *pool[T, C]) error {
	select {
	case i := <-p.done:
		p.finish(i)
	case <-ctx.Done():
		p.halted = true
		for p.running > 0 {
			p.finish(<-p.done)
		}
		_, _ = r.advance(ctx, p) // replayed slots commit no cursor
		return ctx.Err()
	}
	_, _ = r.advance(ctx, p)
	return r.poolErr(p)
}

// poolErr is the replay's failure so far: a panic is raised again, a stop
// matches ErrStop.
func (r *Resumer[T, C]) poolErr(p *pool[T, C]) error {
	switch {
	case p.panicked:
		for p.running > 0 {
			p.finish(<-p.done)
		}
		v := p.panicVal
		p.reset()
		panic(v)
	case p.err != nil:
		for p.running > 0 {
			p.finish(<-p.done)
		}
		err := p.err
		p.reset()
		return err
	case p.stopAt != 0:
		for p.running > 0 {
			p.finish(<-p.done)
		}
		p.reset()
		return ErrStop
	}
	return nil
}

// keyTable serialises events with equal keys (see [WithOrderKey]): take
// reports whether the event in slot i may run now, or queues it behind its
// key; give releases the key of the event in slot i and returns the next
// slot queued on it, or -1.
type keyTable[T any] interface {
	take(ev T, i int32) bool
	give(ev T, i int32) int32
	clear()
}

// keys is a keyTable: per key, the slot that holds it and the last queued,
// and per slot the one queued after it.
type keys[T any, K comparable] struct {
	key   func(T) K
	held  map[K]keyQueue
	after []int32
}

type keyQueue struct{ head, tail int32 }

// newKeys returns a keyTable for a window of the given size.
func newKeys[T any, K comparable](key func(T) K, window int) keyTable[T] {
	return &keys[T, K]{key: key, held: make(map[K]keyQueue), after: make([]int32, window)}
}

func (k *keys[T, K]) take(ev T, i int32) bool {
	id := k.key(ev)
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

func (k *keys[T, K]) give(ev T, i int32) int32 {
	id := k.key(ev)
	q := k.held[id]
	if q.tail == i {
		delete(k.held, id)
		return -1
	}
	q.head = k.after[i]
	k.held[id] = q
	return q.head
}

func (k *keys[T, K]) clear() { clear(k.held) }
