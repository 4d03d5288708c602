package kafka

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/resumable-go/resumable/errclass"
	"github.com/resumable-go/resumable/internal/badarg"
	"github.com/resumable-go/resumable/stream"
)

// commitTimeout bounds one commit of offsets.
const commitTimeout = 10 * time.Second

// stuckAfter is how long the poll loop waits for a full partition's stream
// to read before it pauses fetching the partition.
const stuckAfter = 100 * time.Millisecond

// errRunning is returned by Run while another Run of the Group is in
// progress.
var errRunning = errors.New("kafka: Group.Run already in progress")

// Group is one member of a Kafka consumer group, on a franz-go client
// (cooperative-sticky by default). Make one with [NewGroup] and call
// [Group.Run]; a Group runs one Run at a time.
//
// Each partition assigned to the member is a stream of its own, read by a
// stream.Resumer whose cursor is the record's offset ([Extract]); the
// group's committed offsets are the Store, or the caller's ([WithStore]:
// exactly once into PostgreSQL). A partition's commit is the
// end of its contiguous prefix of handled records, never beyond one that
// is unfinished. docs/kafka.md in the repository has the rules.
type Group struct {
	brokers []string
	group   string
	topics  []string
	cfg     config
	running atomic.Bool

	stats struct {
		assigned, revoked, lost, uncommitted, pauses atomic.Uint64
	}
	mu     sync.Mutex
	member *member // the Run in progress, nil when none
}

// Stats are a [Group]'s counters since it was made.
type Stats struct {
	// Assigned, Revoked and Lost count partitions assigned to the member,
	// revoked from it (drained and committed), and lost (a session expired:
	// stopped at once, nothing more committed).
	Assigned, Revoked, Lost uint64
	// Uncommitted counts the offsets of records handled but never
	// committed because their partition was lost: records the partition's
	// next owner handles again.
	Uncommitted uint64
	// Pauses counts the times fetching a partition paused because its
	// stream did not read its fetched records ([WithFetchBuffer]).
	Pauses uint64
}

// NewGroup returns a member of the consumer group group, consuming topics
// from the cluster whose seed brokers are brokers (HOST:PORT). It
// connects to nothing: [Group.Run] does. It returns an error matching
// stream.ErrInvalidOption, naming the argument, for no broker, an empty
// group, no topic or a bad option.
func NewGroup(brokers []string, group string, topics []string, opts ...Option) (*Group, error) {
	cfg := newConfig(opts)
	if len(brokers) == 0 || slices.Contains(brokers, "") {
		cfg.fail("NewGroup", "brokers", quoted(brokers), "want at least one, none empty")
	}
	if group == "" {
		cfg.fail("NewGroup", "group", group, "must not be empty")
	}
	if len(topics) == 0 || slices.Contains(topics, "") {
		cfg.fail("NewGroup", "topics", quoted(topics), "want at least one, none empty")
	}
	if len(cfg.errs) > 0 {
		return nil, errors.Join(cfg.errs...)
	}
	return &Group{brokers: slices.Clone(brokers), group: group, topics: slices.Clone(topics), cfg: cfg}, nil
}

// Stats returns a snapshot of the Group's counters. It is safe for
// concurrent use.
func (g *Group) Stats() Stats {
	return Stats{Assigned: g.stats.assigned.Load(), Revoked: g.stats.revoked.Load(),
		Lost: g.stats.lost.Load(), Uncommitted: g.stats.uncommitted.Load(), Pauses: g.stats.pauses.Load()}
}

// PartitionStats describes a partition assigned to the member, for a
// gauge or an operator.
type PartitionStats struct {
	Topic     string
	Partition int32
	// HighWatermark is the partition's end offset at its last fetch; -1
	// before the first.
	HighWatermark int64
	// Handled is the end of the handled prefix (the offset to commit); -1
	// while nothing was handled since the assignment. Committed is the
	// group's committed offset: the one found at the assignment, then the
	// last this member committed; -1 while there is none.
	Handled, Committed int64
	// Lag is HighWatermark − Handled (Committed while nothing was
	// handled): records not handled yet; -1 while either is unknown.
	Lag int64
	// Queued counts records fetched and not read by the partition's
	// stream (exactly while at most the fetch buffer is queued; to within
	// 64 above it, where reads are counted in batches); InFlight those
	// read and not committed (stream.Stats).
	Queued, InFlight int
}

// Partitions describes the partitions assigned to the member, sorted by
// topic and partition; none when Run is not running. It is safe for
// concurrent use.
func (g *Group) Partitions() []PartitionStats {
	g.mu.Lock()
	m := g.member
	g.mu.Unlock()
	if m == nil {
		return nil
	}
	m.mu.Lock()
	parts := make([]*partition, 0, len(m.parts))
	for _, p := range m.parts {
		parts = append(parts, p)
	}
	m.mu.Unlock()
	out := make([]PartitionStats, 0, len(parts))
	for _, p := range parts {
		out = append(out, p.stats())
	}
	slices.SortFunc(out, func(a, b PartitionStats) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return out
}

// Run joins the group and hands every record of the partitions assigned to
// the member to handle, until ctx ends or a partition's stream ends; then
// it drains and commits every partition, leaves the group and returns.
//
// Each assigned partition gets its own stream.Resumer, made with
// stream.WithOrderKey([Key]) and stream.WithCursorOrder, then opts: pass
// stream.WithConcurrency for handlers in parallel (records of one key
// never overlap and keep offset order), stream.WithHandlerRetry,
// stream.WithDeadLetter (with [DeadLetter] for a dead-letter topic), hooks
// (the Resumers are stream.Resumer[*kgo.Record, int64]: cursors are
// offsets). handle is called from as many goroutines as there are
// partitions times the concurrency.
//
// A revoked partition stops reading, waits for its records in flight
// ([WithDrainTimeout]), commits and only then is released; a lost one
// stops at once and commits nothing more. The handlers' context is not
// ctx: when ctx ends, the records in flight finish (within the drain
// timeout) and are committed before Run returns.
//
// Run returns ctx's error when ctx ended; nil when a handler returned
// stream.ErrStop; otherwise what ended a partition's Resumer (a handler's
// error, an errclass.Expired error for offsets out of range, one matching
// stream.ErrSourceChanged for lost records or a recreated topic), joined
// with a failure of the final commit. It returns an error matching
// stream.ErrInvalidOption for a nil ctx or handle, or a bad option.
func (g *Group) Run(ctx context.Context, handle func(ctx context.Context, r *kgo.Record) error, opts ...stream.Option) error {
	if err := errors.Join(nilArg("Group.Run", "ctx", ctx == nil), nilArg("Group.Run", "handle", handle == nil)); err != nil {
		return err
	}
	return g.run(ctx, &member{handle: handle, opts: opts})
}

// RunBatch is [Group.Run] for a handler that takes a run of a partition's
// consecutive records at once (stream.Resumer.RunBatch; stream.WithBatch
// says how many): when handle returns nil the offset after the batch's
// last record is committed, when it fails nothing of the batch is. The
// slice is valid only until handle returns. Batches of different
// partitions are handled at once; stream.WithConcurrency above 1 and
// stream.WithDeadLetter make it return an error matching
// stream.ErrInvalidOption, before it joins the group.
func (g *Group) RunBatch(ctx context.Context, handle func(ctx context.Context, rs []*kgo.Record) error, opts ...stream.Option) error {
	if err := errors.Join(nilArg("Group.RunBatch", "ctx", ctx == nil), nilArg("Group.RunBatch", "handle", handle == nil)); err != nil {
		return err
	}
	return g.run(ctx, &member{batch: handle, opts: opts})
}

// run is Run and RunBatch.
func (g *Group) run(ctx context.Context, m *member) error {
	m.g, m.parts, m.saved = g, make(map[topicPartition]*partition), make(chan struct{}, 1)
	if err := m.validate(); err != nil {
		return err
	}
	if !g.running.CompareAndSwap(false, true) {
		return errRunning
	}
	defer g.running.Store(false)
	g.mu.Lock()
	g.member = m
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.member = nil
		g.mu.Unlock()
	}()

	base := context.WithoutCancel(ctx) // the partitions' handlers outlive ctx while they drain
	pollCtx, stopPoll := context.WithCancel(ctx)
	defer stopPoll()
	m.stopPoll = stopPoll
	cl, err := kgo.NewClient(m.clientOptions(base)...)
	if err != nil {
		return badarg.New("kafka: Group.Run", "WithClientOptions", err, "refused by kgo.NewClient")
	}
	committed := make(chan struct{})
	var commits sync.WaitGroup
	commits.Go(func() { m.commitEvery(cl, committed) })

	m.poll(pollCtx, cl)

	close(committed)
	commits.Wait()
	cl.Close() // leaves the group: the revoke drains and commits every partition
	m.wg.Wait()
	if m.panicked != nil {
		panic(m.panicked)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	err = m.endErr
	if !m.ended {
		err = ctx.Err()
	}
	return errors.Join(err, m.commitErr)
}

type topicPartition struct {
	topic string
	id    int32
}

// member is one Run's state.
type member struct {
	g      *Group
	handle func(context.Context, *kgo.Record) error   // Run's
	batch  func(context.Context, []*kgo.Record) error // or RunBatch's
	opts   []stream.Option

	stopPoll context.CancelFunc
	wg       sync.WaitGroup // the partitions' Resumers
	commitMu sync.Mutex     // one commit at a time: none goes backwards
	saved    chan struct{}  // a partition's saved offset moved

	mu        sync.Mutex
	parts     map[topicPartition]*partition
	ended     bool  // a partition's stream ended the Run
	endErr    error // what it ended with
	commitErr error // a failed commit of a revoked partition
	panicked  any   // a panic of a partition's Resumer, raised again by Run
}

func (m *member) clientOptions(base context.Context) []kgo.Opt {
	opts := []kgo.Opt{
		kgo.ConsumeStartOffset(kgo.NewOffset().AtStart()),
		kgo.ConsumeResetOffset(kgo.NoResetOffset().AtStart()),
		kgo.FetchMaxWait(time.Second),
		kgo.Balancers(kgo.CooperativeStickyBalancer()),
	}
	opts = append(opts, m.g.cfg.client...)
	return append(opts,
		kgo.AdjustFetchOffsetsFn(m.startAt),
		kgo.SeedBrokers(m.g.brokers...),
		kgo.ConsumerGroup(m.g.group),
		kgo.ConsumeTopics(m.g.topics...),
		kgo.DisableAutoCommit(),
		kgo.OnPartitionsAssigned(func(_ context.Context, cl *kgo.Client, assigned map[string][]int32) {
			m.assign(base, cl, assigned)
		}),
		kgo.OnPartitionsRevoked(func(_ context.Context, cl *kgo.Client, revoked map[string][]int32) {
			m.revoke(cl, revoked)
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
			m.lose(lost)
		}),
	)
}

// validate returns the error stream.New, or RunBatch, finds in the
// options, before the member joins the group.
func (m *member) validate() error {
	r, err := m.resumer(newPartition(nil, topicPartition{}, 1, func() {}))
	if err != nil || m.batch == nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // nothing is read: only the options are checked
	if err := r.RunBatch(ctx, m.batch); errors.Is(err, stream.ErrInvalidOption) {
		return err
	}
	return nil
}

// resumer makes the Resumer of partition p.
func (m *member) resumer(p *partition) (*stream.Resumer[*kgo.Record, int64], error) {
	opts := append([]stream.Option{
		stream.WithOrderKey(Key),
		stream.WithCursorOrder(cmp.Compare[int64]),
	}, m.opts...)
	store := p.store
	if store == nil {
		store = p
	}
	return stream.New[*kgo.Record, int64](p, Extract, store, opts...)
}

// poll feeds fetched records to their partitions until ctx ends.
func (m *member) poll(ctx context.Context, cl *kgo.Client) {
	for {
		m.waitForRoom(ctx)
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil || fs.IsClientClosed() {
			return
		}
		fs.EachError(func(topic string, id int32, err error) {
			m.fetchError(topic, id, err)
		})
		fs.EachPartition(func(f kgo.FetchTopicPartition) {
			if p := m.partition(topic(f.Topic, f.Partition)); p != nil {
				p.push(f.Records, f.HighWatermark)
			}
		})
	}
}

// waitForRoom waits a little for the streams of full partitions to read,
// then pauses fetching those still full. Polling while the handlers keep
// up, and pausing only the partitions that do not, spares the refetch a
// pause costs.
func (m *member) waitForRoom(ctx context.Context) {
	m.mu.Lock()
	var full []*partition
	for _, p := range m.parts {
		if p.full() {
			full = append(full, p)
		}
	}
	m.mu.Unlock()
	for _, p := range full {
		if m.waitForPartition(ctx, p) {
			m.g.stats.pauses.Add(1)
		}
	}
}

// waitForPartition waits until p's queue is not full, or pauses fetching p
// when it stayed full for stuckAfter, and reports whether it paused.
func (m *member) waitForPartition(ctx context.Context, p *partition) bool {
	t := time.NewTimer(stuckAfter)
	defer t.Stop()
	for p.full() {
		select {
		case <-p.room: // maybe an old signal: look again
		case <-t.C:
			return p.pauseIfFull()
		case <-ctx.Done():
			return false
		}
	}
	return false
}

func topic(t string, id int32) topicPartition { return topicPartition{topic: t, id: id} }

func (m *member) partition(tp topicPartition) *partition {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.parts[tp]
}

// fetchError hands a fetch error to its partition's stream, which
// classifies it; an error of no partition of the member that means lost
// history ends the Run.
func (m *member) fetchError(t string, id int32, err error) {
	var session *kgo.ErrGroupSession
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
		errors.As(err, &session) || errors.Is(err, kgo.ErrClientClosed) {
		return // informational: a lost session reaches OnPartitionsLost
	}
	err = fetchFailure(t, id, err)
	if p := m.partition(topic(t, id)); p != nil {
		p.fail(err)
		return
	}
	if errors.Is(err, errclass.ErrExpired) {
		m.end(err)
	}
}

// fetchFailure says what a fetch error means: records lost or a topic
// recreated are stream.ErrSourceChanged, an offset out of range is
// errclass.Expired; anything else is retried by the stream's loop.
func fetchFailure(t string, id int32, err error) error {
	var loss *kgo.ErrDataLoss
	switch {
	case errors.As(err, &loss):
		return fmt.Errorf("kafka: topic %s partition %d: %v: %w", t, id, err, stream.ErrSourceChanged)
	case errors.Is(err, kerr.UnknownTopicID):
		return fmt.Errorf("kafka: topic %s partition %d: the topic's ID changed (deleted and recreated): %v: %w", t, id, err, stream.ErrSourceChanged)
	case errors.Is(err, kerr.OffsetOutOfRange):
		return errclass.CursorExpired(fmt.Errorf("kafka: topic %s partition %d: the committed offset is out of range (records deleted by retention, or a reset log): %w", t, id, err))
	}
	return fmt.Errorf("kafka: fetching topic %s partition %d: %w", t, id, err)
}

// end ends the Run with err (nil: cleanly), once.
func (m *member) end(err error) {
	m.mu.Lock()
	if !m.ended {
		m.ended, m.endErr = true, err
	}
	m.mu.Unlock()
	m.stopPoll()
}

// assign starts a Resumer per assigned partition.
func (m *member) assign(base context.Context, cl *kgo.Client, assigned map[string][]int32) {
	for t, ids := range assigned {
		for _, id := range ids {
			p := newPartition(cl, topic(t, id), m.g.cfg.fetchBuffer, m.onSave)
			if err := m.openStore(base, p); err != nil {
				m.end(err)
				return
			}
			r, err := m.resumer(p)
			if err != nil { // refused when Run started: not here
				m.end(err)
				return
			}
			ctx, cancel := context.WithCancel(base)
			p.cancel, p.r = cancel, r
			m.mu.Lock()
			m.parts[topic(t, id)] = p
			m.mu.Unlock()
			m.g.stats.assigned.Add(1)
			m.wg.Go(func() {
				defer close(p.done)
				defer cancel()
				defer m.recover()
				if m.batch != nil {
					m.finished(p, r.RunBatch(ctx, m.batch))
				} else {
					m.finished(p, r.Run(ctx, m.handle))
				}
			})
		}
	}
}

// openStore gives p the caller's Store ([WithStore]), loaded, when there
// is one. The load is bounded by the drain timeout: the assignment waits
// for it.
func (m *member) openStore(base context.Context, p *partition) error {
	if m.g.cfg.store == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(base, m.g.cfg.drainTimeout)
	defer cancel()
	s, err := m.g.cfg.store(ctx, p.topic, p.id)
	if err == nil && s == nil {
		err = errors.New("no Store (nil)")
	}
	if err != nil {
		return fmt.Errorf("kafka: opening the Store of topic %s partition %d: %w", p.topic, p.id, err)
	}
	loaded, err := s.Load(ctx)
	if err != nil {
		return fmt.Errorf("kafka: loading the Store of topic %s partition %d: %w", p.topic, p.id, err)
	}
	p.useStore(s, loaded)
	return nil
}

// startAt notes the group's committed offsets of the assigned partitions
// (for lag), and makes those whose Store ([WithStore]) holds a cursor
// start after it, whatever the group committed.
func (m *member) startAt(_ context.Context, offsets map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
	for t, ids := range offsets {
		for id, o := range ids {
			p := m.partition(topic(t, id))
			if p == nil {
				continue
			}
			if c := o.EpochOffset().Offset; c >= 0 {
				p.committedAt(c)
			}
			if at, ok := p.start(); ok {
				ids[id] = kgo.NewOffset().At(at).WithEpoch(-1)
			}
		}
	}
	return offsets, nil
}

func (m *member) recover() {
	if v := recover(); v != nil {
		m.mu.Lock()
		if m.panicked == nil {
			m.panicked = v
		}
		m.mu.Unlock()
		m.end(fmt.Errorf("kafka: a partition's stream panicked: %v", v))
	}
}

// finished handles the end of p's Resumer: after a stop of ours, the end
// of the drain; before, the end of the Run.
func (m *member) finished(p *partition, err error) {
	if p.stopped.Load() && (err == nil || errors.Is(err, context.Canceled)) {
		return
	}
	m.end(err)
}

// take removes the partitions named from the member's and returns them.
func (m *member) take(tps map[string][]int32) []*partition {
	m.mu.Lock()
	defer m.mu.Unlock()
	var parts []*partition
	for t, ids := range tps {
		for _, id := range ids {
			if p, ok := m.parts[topic(t, id)]; ok {
				delete(m.parts, topic(t, id))
				parts = append(parts, p)
			}
		}
	}
	return parts
}

// revoke stops reading the revoked partitions, lets their records in
// flight finish (until the drain timeout, then cancels them), commits what
// was handled and releases them.
func (m *member) revoke(cl *kgo.Client, revoked map[string][]int32) {
	parts := m.take(revoked)
	if len(parts) == 0 {
		return
	}
	for _, p := range parts {
		p.stop(false)
	}
	timer := time.NewTimer(m.g.cfg.drainTimeout)
	defer timer.Stop()
	for _, p := range parts {
		select {
		case <-p.done:
		case <-timer.C:
			for _, q := range parts {
				q.cancel()
			}
			<-p.done
		}
	}
	if err := m.commit(cl, parts); err != nil {
		m.mu.Lock()
		m.commitErr = errors.Join(m.commitErr, err)
		m.mu.Unlock()
	}
	for _, p := range parts {
		p.release()
	}
	m.g.stats.revoked.Add(uint64(len(parts)))
}

// lose stops the lost partitions at once, without committing.
func (m *member) lose(lost map[string][]int32) {
	parts := m.take(lost)
	for _, p := range parts {
		p.stop(true)
	}
	for _, p := range parts {
		<-p.done
		m.g.stats.uncommitted.Add(uint64(p.uncommitted()))
		p.release()
	}
	m.g.stats.lost.Add(uint64(len(parts)))
}

func (m *member) onSave() {
	select {
	case m.saved <- struct{}{}:
	default:
	}
}

// commitEvery commits the partitions' handled prefixes as they move, one
// commit at a time and at most one per commit interval (the first one
// interval after the start), until done is closed.
func (m *member) commitEvery(cl *kgo.Client, done <-chan struct{}) {
	t := time.NewTimer(m.g.cfg.commitInterval)
	defer t.Stop()
	for {
		select { // the interval since the last commit
		case <-done:
			return
		case <-t.C:
		}
		select { // a prefix that moved
		case <-done:
			return
		case <-m.saved:
		}
		m.mu.Lock()
		parts := make([]*partition, 0, len(m.parts))
		for _, p := range m.parts {
			parts = append(parts, p)
		}
		m.mu.Unlock()
		if err := m.commit(cl, parts); err != nil {
			m.onSave() // retried after the interval, or at the revoke
		}
		t.Reset(m.g.cfg.commitInterval)
	}
}

// commit commits the handled prefix of parts, synchronously.
func (m *member) commit(cl *kgo.Client, parts []*partition) error {
	m.commitMu.Lock()
	defer m.commitMu.Unlock()
	offsets := make(map[string]map[int32]kgo.EpochOffset)
	byTP := make(map[topicPartition]*partition)
	for _, p := range parts {
		off, ok := p.toCommit()
		if !ok {
			continue
		}
		if offsets[p.topic] == nil {
			offsets[p.topic] = make(map[int32]kgo.EpochOffset)
		}
		offsets[p.topic][p.id] = kgo.EpochOffset{Epoch: -1, Offset: off}
		byTP[topic(p.topic, p.id)] = p
	}
	if len(offsets) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), commitTimeout)
	defer cancel()
	var errs []error
	cl.CommitOffsetsSync(ctx, offsets, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err != nil {
			errs = append(errs, fmt.Errorf("kafka: committing offsets: %w", err))
			return
		}
		for _, t := range resp.Topics {
			for _, rp := range t.Partitions {
				p := byTP[topic(t.Topic, rp.Partition)]
				if p == nil {
					continue
				}
				if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
					errs = append(errs, fmt.Errorf("kafka: committing topic %s partition %d: %w", t.Topic, rp.Partition, err))
					continue
				}
				p.committedAt(offsets[t.Topic][rp.Partition].Offset)
			}
		}
	})
	return errors.Join(errs...)
}

// Extract is the cursor.Extractor of a partition's stream: a record's
// offset.
func Extract(r *kgo.Record) (int64, error) { return r.Offset, nil }

// Key is the default order key of a partition's stream: the record's key.
// Records without a key share the key "".
func Key(r *kgo.Record) string { return string(r.Key) }
