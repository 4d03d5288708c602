package stream

import (
	"context"
	"sync/atomic"
)

// received is what the reader goroutine passes on: an event or the error
// that ended the connection.
type received[T any] struct {
	ev  T
	err error
}

// ahead is a read-ahead ring between a reader goroutine (the producer, which
// calls Recv) and the loop (the consumer): a single-producer,
// single-consumer queue whose steady state costs an atomic store per event
// and takes no lock; each side sleeps on a channel only when the ring is
// empty (the loop) or full (the reader), and the other wakes it.
// Each side's hot fields sit on cache lines of their own, and each side
// reads the other's index only when its copy says the ring is empty or full.
type ahead[T any] struct {
	ring      []received[T]
	wake      chan struct{} // holds 1
	room      chan struct{} // holds 1
	quit      chan struct{} // closed when the loop stops reading
	done      chan struct{} // closed when the reader returned
	_         [64]byte
	head      atomic.Uint64 // the next slot to take; written by the loop
	tail      uint64        // the loop's copy of the reader's tail
	_         [64]byte
	filled    atomic.Uint64 // the next slot to fill; written by the reader
	seen      uint64        // the reader's copy of the loop's head
	_         [64]byte
	loopWaits atomic.Bool // the loop sleeps on wake
	_         [64]byte
	readWaits atomic.Bool // the reader sleeps on room
	_         [64]byte
}

// readAhead starts a reader goroutine that receives from conn into a ring
// of size events until Recv fails; stop ends it.
func readAhead[T any](ctx context.Context, conn Conn[T], size int) *ahead[T] {
	q := &ahead[T]{
		ring: make([]received[T], size),
		wake: make(chan struct{}, 1),
		room: make(chan struct{}, 1),
		quit: make(chan struct{}),
		done: make(chan struct{}),
	}
	go func() {
		defer close(q.done)
		for {
			ev, err := conn.Recv(ctx)
			if !q.put(received[T]{ev: ev, err: err}) || err != nil {
				return
			}
		}
	}()
	return q
}

// stop ends the reader: it closes conn to unblock a Recv (the caller closes
// it again, which Close allows) and waits for the reader to return.
func (q *ahead[T]) stop(conn Conn[T]) {
	close(q.quit)
	_ = conn.Close()
	<-q.done
}

// put appends rv, sleeping while the ring is full; it reports false when
// the loop stopped reading.
func (q *ahead[T]) put(rv received[T]) bool {
	t, size := q.filled.Load(), uint64(len(q.ring))
	for t-q.seen == size {
		if q.seen = q.head.Load(); t-q.seen < size {
			break
		}
		q.readWaits.Store(true)
		if q.seen = q.head.Load(); t-q.seen < size {
			q.readWaits.Store(false)
			break
		}
		select {
		case <-q.room:
		case <-q.quit:
			return false
		}
	}
	q.ring[t%size] = rv
	q.filled.Store(t + 1)
	if q.loopWaits.Load() && q.loopWaits.CompareAndSwap(true, false) {
		select {
		case q.wake <- struct{}{}:
		default:
		}
	}
	return true
}

// ready reports whether a received value waits in the ring.
func (q *ahead[T]) ready() bool {
	if q.tail != q.head.Load() {
		return true
	}
	q.tail = q.filled.Load()
	return q.tail != q.head.Load()
}

// take removes and returns the oldest received value; ready must have
// reported true.
func (q *ahead[T]) take() received[T] {
	h := q.head.Load()
	s := &q.ring[h%uint64(len(q.ring))]
	rv := *s
	*s = received[T]{}
	q.head.Store(h + 1)
	if q.readWaits.Load() && q.readWaits.CompareAndSwap(true, false) {
		select {
		case q.room <- struct{}{}:
		default:
		}
	}
	return rv
}

// waitFor returns a channel that is ready once a value may be in the ring,
// or nil when one is already: the loop selects on it beside its other
// channels, and checks ready again after (a wake may be stale).
func (q *ahead[T]) waitFor() <-chan struct{} {
	if q.ready() {
		return nil
	}
	q.loopWaits.Store(true)
	if q.ready() {
		q.loopWaits.Store(false)
		return nil
	}
	return q.wake
}
