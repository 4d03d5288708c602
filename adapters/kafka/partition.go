package kafka

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

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
// The poll loop hands over a fetch's records at once (push: one slice, no
// copy), and the reader takes every queued fetch at once (refill): the
// per-record path (Recv, Save) takes no lock, never waits on a channel,
// allocates nothing and, while more than the buffer is queued, makes no
// atomic write: the reader counts its reads in batches (publishReads),
// and the offset to commit is read from the stream's Stats when the group
// commits, not copied at each Save.
//
// It is the partition's Source (Open) and Store (Load, Save), or, with
// [WithStore], its Source and the follower of the caller's Store
// (ownStore).
type partition struct {
	cl     *kgo.Client
	topic  string
	id     int32
	buffer int // fetching pauses at this many queued records

	// pushed and read count the records queued by the poll loop and taken
	// by the reader (but for the reader's unpublished ones): pushed − read
	// are queued. saved is, with [WithStore], the offset after the last
	// one the caller's Store saved; -1: none. stopped and paused change
	// under mu.
	pushed, read, saved atomic.Int64
	stopped             atomic.Bool // revoked, lost or the end of Run: Recv ends
	lost                atomic.Bool // lost: nothing more is committed
	paused              atomic.Bool // fetching is paused for this partition

	mu        sync.Mutex
	fetched   [][]*kgo.Record // fetches queued by the poll loop, not yet taken
	ferr      error           // a fetch error, handed over once the queue is read
	next      int64           // the next offset expected from the poll loop; -1: any
	committed int64           // the offset last committed; -1: none
	hw        int64           // the high watermark at the last fetch; -1: none
	loaded    int64           // the caller's Store's cursor at the assignment; -1: none
	wake      chan struct{}   // a record or an end for Recv
	room      chan struct{}   // the queue fell below the buffer

	// The reader's (the goroutine in Recv; one at a time): the fetch being
	// read and the fetches taken after it. They outlive a conn, so a
	// reopen loses nothing.
	cur      []*kgo.Record // cur[i:] are still to read
	i        int
	taken    [][]*kgo.Record
	at       int   // taken[at:] are still to read
	readSeen int64 // read as the reader last published it
	unread   int64 // records taken and not yet counted in read

	onSave func()                              // tells the committer that saved moved
	store  cursor.Store[int64]                 // the Resumer's Store: p, or an ownStore
	r      *stream.Resumer[*kgo.Record, int64] // set before the partition is shared
	cancel context.CancelFunc                  // ends the Resumer's Run at once
	done   chan struct{}                       // closed when the Resumer's Run returned
}

func newPartition(cl *kgo.Client, tp topicPartition, buffer int, onSave func()) *partition {
	p := &partition{cl: cl, topic: tp.topic, id: tp.id, buffer: buffer, next: -1, committed: -1, hw: -1, loaded: -1,
		wake: make(chan struct{}, 1), room: make(chan struct{}, 1), onSave: onSave, done: make(chan struct{})}
	p.saved.Store(-1)
	return p
}

func (p *partition) signal() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// push queues the records of a fetch (in offset order), skipping any
// already queued, and notes the partition's high watermark. The slice is
// queued as it is: the poll loop hands it over.
func (p *partition) push(recs []*kgo.Record, hw int64) {
	p.mu.Lock()
	defer p.signal()
	defer p.mu.Unlock()
	if p.stopped.Load() {
		return
	}
	p.hw = max(p.hw, hw)
	i := 0
	for i < len(recs) && recs[i].Offset < p.next {
		i++
	}
	if recs = recs[i:]; len(recs) == 0 {
		return
	}
	p.fetched = append(p.fetched, recs)
	p.next = recs[len(recs)-1].Offset + 1
	p.pushed.Add(int64(len(recs)))
}

// queued returns how many records were fetched and not yet read.
func (p *partition) queued() int64 { return p.pushed.Load() - p.read.Load() }

// full reports whether the queue holds the buffer or more, and fetching
// is not paused.
func (p *partition) full() bool {
	return !p.stopped.Load() && !p.paused.Load() && p.queued() >= int64(p.buffer)
}

// pauseIfFull pauses fetching the partition if its queue is still full: a
// pause drops what the client fetched for it and not yet polled (fetched
// again on resume), so the poll loop first waits a little for room.
func (p *partition) pauseIfFull() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.full() {
		return false
	}
	p.paused.Store(true)
	p.cl.PauseFetchPartitions(map[string][]int32{p.topic: {p.id}})
	return true
}

// resumeIfRoom resumes fetching the partition if it is paused and at most
// half of the buffer is queued.
func (p *partition) resumeIfRoom() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.roomLocked()
}

// roomLocked resumes fetching the partition if it is paused and at most
// half of the buffer is queued, and wakes the poll loop when less than the
// buffer is. p.mu is held: a pause (pauseIfFull) is never missed.
func (p *partition) roomLocked() {
	queued := p.queued()
	if !p.stopped.Load() && p.paused.Load() && queued <= int64(p.buffer/2) {
		p.paused.Store(false)
		p.cl.ResumeFetchPartitions(map[string][]int32{p.topic: {p.id}})
	}
	if queued < int64(p.buffer) {
		p.roomFor()
	}
}

// roomFor wakes the poll loop waiting for room (waitForPartition).
func (p *partition) roomFor() {
	select {
	case p.room <- struct{}{}:
	default:
	}
}

// fail hands a fetch error to the stream, after the records queued.
func (p *partition) fail(err error) {
	p.mu.Lock()
	if !p.stopped.Load() && p.ferr == nil {
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
	p.stopped.Store(true)
	p.fetched = nil
	if lost {
		p.lost.Store(true)
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
	paused := p.paused.Swap(false)
	p.mu.Unlock()
	if paused {
		p.cl.ResumeFetchPartitions(map[string][]int32{p.topic: {p.id}})
	}
}

// take returns the next queued record, or the error that ends the
// connection; ok false means nothing is there yet. Only the reader calls
// it.
func (p *partition) take() (r *kgo.Record, ok bool, err error) {
	if p.stopped.Load() {
		return nil, true, stream.ErrEndOfStream
	}
	if p.i == len(p.cur) {
		if ok, err := p.refill(); !ok || err != nil {
			return nil, ok, err
		}
	}
	r = p.cur[p.i]
	p.i++
	// Far above the buffer nobody waits on the count: publish it in
	// batches. Near and below it the poll loop may wait for room, or the
	// partition may be paused: publish each read.
	if p.unread++; p.unread == readBatch || p.pushed.Load()-p.readSeen-p.unread <= int64(p.buffer) {
		p.publishReads()
	}
	return r, true, nil
}

// readBatch is how many reads the reader counts at once while the queue
// holds more than the buffer.
const readBatch = 64

// publishReads counts the reader's reads in read, and wakes the poll loop
// when the queue fell below the buffer, or resumes fetching when it fell
// to half of it. Only the reader calls it.
func (p *partition) publishReads() {
	if p.unread == 0 {
		return
	}
	// read, then pushed: the poll loop waiting for room pushed before it
	// looked, so the reads after its look cross below the buffer once.
	n := p.unread
	read := p.read.Add(n)
	p.readSeen, p.unread = read, 0
	switch queued := p.pushed.Load() - read; {
	case p.paused.Load() && queued <= int64(p.buffer/2):
		p.resumeIfRoom()
	case queued < int64(p.buffer) && queued+n >= int64(p.buffer):
		p.roomFor()
	}
}

// refill makes the next fetch the reader's, taking every fetch queued
// once those taken before are read. With none queued it returns the fetch
// error, once, or ok false.
func (p *partition) refill() (ok bool, err error) {
	p.publishReads()
	for p.at < len(p.taken) {
		p.cur, p.i, p.taken[p.at] = p.taken[p.at], 0, nil
		if p.at++; len(p.cur) > 0 {
			return true, nil
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.roomLocked() // whatever the takes since the last refill saw
	if len(p.fetched) == 0 {
		err, p.ferr = p.ferr, nil
		return err != nil, err
	}
	p.taken, p.fetched, p.at = p.fetched, p.taken[:0], 1 // the spent slice takes the next fetches
	p.cur, p.i, p.taken[0] = p.taken[0], 0, nil
	return true, nil
}

// handledEnd returns the offset after the partition's handled prefix
// (the offset to commit), or -1 while nothing was handled: with the
// group's offsets as the Store, the stream's committed cursor (it is
// read here, at a commit, rather than copied at each Save); with the
// caller's Store, what that Store saved.
func (p *partition) handledEnd() int64 {
	if p.store != nil || p.r == nil {
		return p.saved.Load()
	}
	s := p.r.Stats()
	if s.Events+s.Progress == 0 { // before the first commit, Cursor is the loaded -1 or not yet loaded
		return -1
	}
	return s.Cursor + 1
}

// toCommit returns the offset to commit, if it is past the committed one
// and the partition was not lost.
func (p *partition) toCommit() (int64, bool) {
	end := p.handledEnd()
	p.mu.Lock()
	defer p.mu.Unlock()
	return end, !p.lost.Load() && end > p.committed
}

// committedAt records a successful commit of offset.
func (p *partition) committedAt(offset int64) {
	p.mu.Lock()
	p.committed = max(p.committed, offset)
	p.mu.Unlock()
}

func (p *partition) stats() PartitionStats {
	end := p.handledEnd()
	p.mu.Lock()
	s := PartitionStats{Topic: p.topic, Partition: p.id, HighWatermark: p.hw, Handled: end,
		Committed: p.committed, Lag: -1, Queued: int(max(0, p.queued()))}
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
	end := p.handledEnd()
	p.mu.Lock()
	defer p.mu.Unlock()
	if end <= p.committed || end < 0 {
		return 0
	}
	return end - max(p.committed, 0)
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

// Save tells the committer that the handled prefix moved; the offset
// itself is the stream's committed cursor, read at the commit
// (handledEnd). It takes no lock and writes no shared memory but a
// signal the committer has not taken yet: the stream saves after every
// record.
func (p *partition) Save(context.Context, int64) error {
	p.onSave()
	return nil
}

// savedTo records that the caller's Store ([WithStore]) saved offset c:
// every record up to it was handled.
func (p *partition) savedTo(c int64) {
	for {
		saved := p.saved.Load()
		if p.lost.Load() || c < 0 || c+1 <= saved {
			return
		}
		if p.saved.CompareAndSwap(saved, c+1) {
			p.onSave()
			return
		}
	}
}

// useStore makes s, whose cursor is loaded, the partition's Store:
// fetching starts after loaded (when not -1), and the group commits the
// offset after it until the Resumer saves another.
func (p *partition) useStore(s cursor.Store[int64], loaded int64) {
	p.store = ownStore{p: p, s: s}
	if loaded >= 0 {
		p.loaded, p.next = loaded, loaded+1
		p.saved.Store(loaded + 1)
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
	o.p.savedTo(c)
	return nil
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
