package kafka

import (
	"context"
	"errors"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/stream"
)

// errConnClosed is what Recv returns on a connection that was closed.
var errConnClosed = errors.New("kafka: connection closed")

// partition is one assigned partition: the records the poll loop fetched
// for it, read by its Resumer through a conn, and the offset its Resumer
// saved (the end of the handled prefix), which the group commits.
//
// It is the partition's Source (Open) and Store (Load, Save), or, with
// [WithStore], its Source and the follower of the caller's Store
// (ownStore).
type partition struct {
	cl     *kgo.Client
	topic  string
	id     int32
	buffer int // fetching pauses at this many queued records

	mu        sync.Mutex
	queue     []*kgo.Record // fetched, not yet read; queue[head:] is live
	head      int
	ferr      error         // a fetch error, handed over once the queue is read
	next      int64         // the next offset expected from the poll loop; -1: any
	paused    bool          // fetching is paused for this partition
	stopped   bool          // revoked, lost or the end of Run: Recv ends
	lost      bool          // lost: nothing more is committed
	saved     int64         // the offset to commit (the next to read); -1: none
	committed int64         // the offset last committed; -1: none
	hw        int64         // the high watermark at the last fetch; -1: none
	loaded    int64         // the caller's Store's cursor at the assignment; -1: none
	wake      chan struct{} // a record or an end for Recv
	room      chan struct{} // the queue fell below the buffer

	onSave func()                              // tells the committer that saved moved
	store  cursor.Store[int64]                 // the Resumer's Store: p, or an ownStore
	r      *stream.Resumer[*kgo.Record, int64] // set before the partition is shared
	cancel context.CancelFunc                  // ends the Resumer's Run at once
	done   chan struct{}                       // closed when the Resumer's Run returned
}

func newPartition(cl *kgo.Client, tp topicPartition, buffer int, onSave func()) *partition {
	return &partition{cl: cl, topic: tp.topic, id: tp.id, buffer: buffer, next: -1, saved: -1, committed: -1, hw: -1, loaded: -1,
		wake: make(chan struct{}, 1), room: make(chan struct{}, 1), onSave: onSave, done: make(chan struct{})}
}

func (p *partition) signal() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// push queues records the poll loop fetched, skipping any already queued,
// and notes the partition's high watermark.
func (p *partition) push(recs []*kgo.Record, hw int64) {
	p.mu.Lock()
	defer p.signal()
	defer p.mu.Unlock()
	if p.stopped {
		return
	}
	p.hw = max(p.hw, hw)
	if p.head > 0 && p.head >= len(p.queue)/2 { // reuse the read part
		n := copy(p.queue, p.queue[p.head:])
		clear(p.queue[n:])
		p.queue, p.head = p.queue[:n], 0
	}
	for _, r := range recs {
		if r.Offset < p.next {
			continue
		}
		p.queue = append(p.queue, r)
		p.next = r.Offset + 1
	}
}

// full reports whether the queue holds the buffer or more, and fetching
// is not paused.
func (p *partition) full() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.stopped && !p.paused && len(p.queue)-p.head >= p.buffer
}

// pauseIfFull pauses fetching the partition if its queue is still full: a
// pause drops what the client fetched for it and not yet polled (fetched
// again on resume), so the poll loop first waits a little for room.
func (p *partition) pauseIfFull() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped || p.paused || len(p.queue)-p.head < p.buffer {
		return false
	}
	p.paused = true
	p.cl.PauseFetchPartitions(map[string][]int32{p.topic: {p.id}})
	return true
}

// fail hands a fetch error to the stream, after the records queued.
func (p *partition) fail(err error) {
	p.mu.Lock()
	if !p.stopped && p.ferr == nil {
		p.ferr = err
	}
	p.mu.Unlock()
	p.signal()
}

// stop makes Recv end the stream (stream.ErrEndOfStream) and drops what is
// queued; with lost, nothing more is committed and the Resumer's handlers
// are cancelled at once.
func (p *partition) stop(lost bool) {
	p.mu.Lock()
	p.stopped = true
	p.queue, p.head = nil, 0
	if lost {
		p.lost = true
	}
	p.mu.Unlock()
	p.signal()
	if lost {
		p.cancel()
	}
}

// release resumes fetching the partition if it was paused: a pause would
// outlive the assignment.
func (p *partition) release() {
	p.mu.Lock()
	paused := p.paused
	p.paused = false
	p.mu.Unlock()
	if paused {
		p.cl.ResumeFetchPartitions(map[string][]int32{p.topic: {p.id}})
	}
}

// take returns the next queued record, or the error that ends the
// connection; ok false means nothing is there yet.
func (p *partition) take() (r *kgo.Record, ok bool, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.stopped:
		return nil, true, stream.ErrEndOfStream
	case p.head < len(p.queue):
		r = p.queue[p.head]
		p.queue[p.head] = nil
		p.head++
		if p.head == len(p.queue) {
			p.queue, p.head = p.queue[:0], 0
		}
		switch queued := len(p.queue) - p.head; {
		case p.paused && queued <= p.buffer/2:
			p.paused = false
			p.cl.ResumeFetchPartitions(map[string][]int32{p.topic: {p.id}})
		case queued == p.buffer-1:
			select {
			case p.room <- struct{}{}:
			default:
			}
		}
		return r, true, nil
	case p.ferr != nil:
		err, p.ferr = p.ferr, nil
		return nil, true, err
	}
	return nil, false, nil
}

// toCommit returns the offset to commit, if it is past the committed one
// and the partition was not lost.
func (p *partition) toCommit() (int64, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.saved, !p.lost && p.saved > p.committed
}

// committedAt records a successful commit of offset.
func (p *partition) committedAt(offset int64) {
	p.mu.Lock()
	p.committed = max(p.committed, offset)
	p.mu.Unlock()
}

func (p *partition) stats() PartitionStats {
	p.mu.Lock()
	s := PartitionStats{Topic: p.topic, Partition: p.id, HighWatermark: p.hw, Handled: p.saved,
		Committed: p.committed, Lag: -1, Queued: len(p.queue) - p.head}
	p.mu.Unlock()
	at := s.Handled
	if at < 0 {
		at = s.Committed
	}
	if s.HighWatermark >= 0 && at >= 0 {
		s.Lag = max(0, s.HighWatermark-at)
	}
	if p.r != nil {
		s.InFlight = p.r.Stats().InFlight
	}
	return s
}

// uncommitted returns how many offsets were handled and not committed.
func (p *partition) uncommitted() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.saved <= p.committed || p.saved < 0 {
		return 0
	}
	return p.saved - max(p.committed, 0)
}

// Open returns a connection over the partition's queue. after is not
// used: the group's consumer keeps the position.
func (p *partition) Open(ctx context.Context, _ int64) (stream.Conn[*kgo.Record], error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return &conn{p: p, closed: make(chan struct{})}, nil
}

// RecvRespectsContext reports that Recv ends when its context ends.
func (p *partition) RecvRespectsContext() bool { return true }

// Load returns -1: the group's committed offset is where kgo starts, and
// the cursor of a record already handled is never asked for.
func (p *partition) Load(ctx context.Context) (int64, error) {
	return -1, ctx.Err()
}

// Save records that every record up to offset c was handled, for the
// committer.
func (p *partition) Save(_ context.Context, c int64) error {
	p.mu.Lock()
	moved := !p.lost && c >= 0 && c+1 > p.saved
	if moved {
		p.saved = c + 1
	}
	p.mu.Unlock()
	if moved {
		p.onSave()
	}
	return nil
}

// useStore makes s, whose cursor is loaded, the partition's Store:
// fetching starts after loaded (when not -1), and the group commits the
// offset after it until the Resumer saves another.
func (p *partition) useStore(s cursor.Store[int64], loaded int64) {
	p.store = ownStore{p: p, s: s}
	if loaded >= 0 {
		p.loaded, p.next, p.saved = loaded, loaded+1, loaded+1
	}
}

// start returns the offset fetching starts at, from the caller's Store;
// ok false when it holds none.
func (p *partition) start() (int64, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.loaded + 1, p.loaded >= 0
}

// ownStore is a partition's Store with [WithStore]: the caller's Store s,
// whose saves the partition follows for the group's commits and lag.
type ownStore struct {
	p *partition
	s cursor.Store[int64]
}

func (o ownStore) Load(ctx context.Context) (int64, error) { return o.s.Load(ctx) }

func (o ownStore) Save(ctx context.Context, c int64) error {
	if err := o.s.Save(ctx, c); err != nil {
		return err
	}
	return o.p.Save(ctx, c)
}

// CommitsInHandler passes on the answer of the caller's Store.
func (o ownStore) CommitsInHandler() bool {
	hc, ok := o.s.(cursor.HandlerCommitter)
	return ok && hc.CommitsInHandler()
}

// conn is one connection's view of a partition's queue.
type conn struct {
	p      *partition
	once   sync.Once
	closed chan struct{}
}

func (c *conn) Recv(ctx context.Context) (*kgo.Record, error) {
	for {
		if r, ok, err := c.p.take(); ok {
			return r, err
		}
		select {
		case <-c.p.wake:
		case <-c.closed:
			return nil, errConnClosed
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (c *conn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return nil
}
