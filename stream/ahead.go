package stream

import (
	"context"
	"errors"
	"sync/atomic"
	"time"
)

// endBit marks the reader's index once Recv failed: the ring holds no
// value after that index, and ahead.err holds the error.
const endBit = 1 << 63

// ahead is a read-ahead ring between a reader goroutine (the producer, which
// calls Recv) and the loop (the consumer): a single-producer,
// single-consumer queue that takes no lock. The reader publishes each event
// with one atomic store, as it must before a Recv that may block; the loop
// takes the events ready in runs, with one load of the reader's index and
// one store of its own per run. Each side sleeps on a channel only when the
// ring is empty (the loop, which may sleep until n events are ready: one
// wake per batch) or full (the reader), and the other wakes it. Each side's
// hot fields sit on cache lines of their own, and each side reads the
// other's index only when its copy says the ring is empty or full.
type ahead[T any] struct {
	ring []T // a power of two long, at least limit
	// stamps, when not nil, holds when each event of the ring was read
	// (since base): a lingering batch is due linger after its first
	// event was read, not after the loop took it.
	stamps   []time.Duration
	base     time.Time
	panicVal any           // what Recv panicked with (the end is errReaderPanicked); written before endBit is published
	mask     uint64        // len(ring) - 1
	limit    uint64        // the events the ring holds at most
	wd       *watchdog     // nil, or the idle watchdog the reader records its events for
	err      error         // what ended the reads; written before endBit is published
	wake     chan struct{} // holds 1
	room     chan struct{} // holds 1
	quit     chan struct{} // closed when the loop stops reading
	done     chan struct{} // closed when the reader returned
	_        [64]byte
	head     atomic.Uint64 // the next slot to take; written by the loop
	tail     uint64        // the loop's copy of the reader's index, without endBit
	over     bool          // the loop's copy of endBit
	_        [64]byte
	// filled is the next slot to fill, with endBit once Recv failed;
	// written by the reader.
	filled atomic.Uint64
	seen   uint64 // the reader's copy of the loop's head
	_      [64]byte
	// want, when not 0, is the index filled must reach (or endBit be
	// set) for the reader to wake the loop, which sleeps on wake.
	want      atomic.Uint64
	_         [64]byte
	readWaits atomic.Bool // the reader sleeps on room
	_         [64]byte
}

// newAhead returns a ring of size events whose reader, once started,
// records each event it receives as activity for wd (nil: none), and when
// it was read if stamped. One ring serves every connection of a Run: start
// empties it.
func newAhead[T any](size int, wd *watchdog, stamped bool) *ahead[T] {
	n := 1
	for n < size {
		n <<= 1
	}
	q := &ahead[T]{
		ring:  make([]T, n),
		mask:  uint64(n - 1),
		limit: uint64(size),
		wd:    wd,
		wake:  make(chan struct{}, 1),
		room:  make(chan struct{}, 1),
	}
	if stamped {
		q.stamps, q.base = make([]time.Duration, n), time.Now()
	}
	return q
}

// start empties the ring, starts a reader goroutine that receives from conn
// into it until Recv fails, and returns q; stop ends the reader.
func (q *ahead[T]) start(ctx context.Context, conn Conn[T]) *ahead[T] {
	clear(q.ring)
	q.head.Store(0)
	q.tail, q.over, q.err = 0, false, nil
	q.filled.Store(0)
	q.seen = 0
	q.want.Store(0)
	q.readWaits.Store(false)
	select { // a stale wake of the last connection's
	case <-q.wake:
	default:
	}
	select {
	case <-q.room:
	default:
	}
	q.quit, q.done = make(chan struct{}), make(chan struct{})
	q.panicVal = nil
	go q.read(ctx, conn)
	return q
}

// errReaderPanicked ends the reads of a reader whose Recv panicked; the
// loop raises the panic on Run's goroutine.
var errReaderPanicked = errors.New("stream: Recv panicked")

// read is the reader goroutine: it receives from conn into the ring until
// Recv fails or panics, stamping each event with the time it was read
// when the ring keeps stamps.
func (q *ahead[T]) read(ctx context.Context, conn Conn[T]) {
	defer close(q.done)
	var t uint64
	defer func() {
		if v := recover(); v != nil {
			q.panicVal = v // published by finish
			q.finish(t, errReaderPanicked)
		}
	}()
	for ; ; t++ {
		ev, err := conn.Recv(ctx)
		if err != nil {
			q.finish(t, err)
			return
		}
		q.wd.active()
		if !q.put(t, ev) {
			return
		}
	}
}

// stamp records when event t was read. The clock is read only for an
// event put into an empty ring (the loop took everything before it); any
// other inherits the stamp of the event before it, which is no later than
// its own read: a batch's linger may end early, never late, and the clock
// is read about once a batch, not per event.
func (q *ahead[T]) stamp(t uint64) {
	if t == 0 || q.head.Load() == t {
		q.stamps[t&q.mask] = time.Since(q.base)
		return
	}
	q.stamps[t&q.mask] = q.stamps[(t-1)&q.mask]
}

// firstRead returns when the oldest event in the ring was read, as time
// since the ring was made (no later than it was); the ring must keep
// stamps and hold an event.
func (q *ahead[T]) firstRead() time.Duration {
	return q.stamps[q.head.Load()&q.mask]
}

// stop ends the reader: it closes conn to unblock a Recv (the caller closes
// it again, which Close allows) and waits for the reader to return.
func (q *ahead[T]) stop(conn Conn[T]) {
	close(q.quit)
	_ = conn.Close()
	<-q.done
}

// put appends ev at index t, sleeping while the ring is full; it reports
// false when the loop stopped reading.
func (q *ahead[T]) put(t uint64, ev T) bool {
	for t-q.seen == q.limit {
		if q.seen = q.head.Load(); t-q.seen < q.limit {
			break
		}
		q.readWaits.Store(true)
		if q.seen = q.head.Load(); t-q.seen < q.limit {
			q.readWaits.Store(false)
			break
		}
		select {
		case <-q.room:
		case <-q.quit:
			return false
		}
	}
	q.ring[t&q.mask] = ev
	if q.stamps != nil {
		q.stamp(t)
	}
	q.publish(t + 1)
	return true
}

// finish publishes err as the end of the reads, after the t events put.
func (q *ahead[T]) finish(t uint64, err error) {
	q.err = err
	q.publish(t | endBit)
}

// publish stores the reader's index f and wakes the loop if it sleeps
// until f (an f with endBit is above any).
func (q *ahead[T]) publish(f uint64) {
	q.filled.Store(f)
	if w := q.want.Load(); w != 0 && f >= w && q.want.CompareAndSwap(w, 0) {
		select {
		case q.wake <- struct{}{}:
		default:
		}
	}
}

// load refreshes the loop's copy of the reader's index.
func (q *ahead[T]) load() {
	f := q.filled.Load()
	q.tail, q.over = f&^endBit, f&endBit != 0
}

// run returns the events that wait in the ring, oldest first, up to the
// ring's wrap, loading the reader's index only when the loop's copy says
// none waits. They stay in the ring until release; after an empty run,
// ended says whether the reads ended.
func (q *ahead[T]) run() []T {
	h := q.head.Load()
	if q.tail == h {
		q.load()
	}
	i := h & q.mask
	return q.ring[i : i+min(q.tail-h, q.mask+1-i)]
}

// ended reports whether the reads ended and every event before the end
// was taken, and returns the error that ended them.
func (q *ahead[T]) ended() (bool, error) {
	if q.over && q.tail == q.head.Load() {
		return true, q.err
	}
	return false, nil
}

// release removes the oldest n events of the last run, with one store the
// reader sees.
func (q *ahead[T]) release(n int) {
	h := q.head.Load()
	i := h & q.mask
	clear(q.ring[i : i+uint64(n)]) // the ring keeps no event alive
	q.head.Store(h + uint64(n))
	if q.readWaits.Load() && q.readWaits.CompareAndSwap(true, false) {
		select {
		case q.room <- struct{}{}:
		default:
		}
	}
}

// waitForN returns a channel that is ready once n events (at most the
// ring's limit), or the end of the reads, may be in the ring, or nil when
// they are already: the loop selects on it beside its other channels and
// looks again after (a wake may be stale). The reader wakes the loop once,
// not at each event.
func (q *ahead[T]) waitForN(n int) <-chan struct{} {
	if q.has(n) {
		return nil
	}
	q.want.Store(q.head.Load() + uint64(n))
	if q.has(n) {
		q.want.Store(0)
		return nil
	}
	return q.wake
}

// has reports whether n events, or the end, wait in the ring.
func (q *ahead[T]) has(n int) bool {
	q.load()
	return q.over || q.tail-q.head.Load() >= uint64(n)
}
