package redis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/resumable-go/resumable/errclass"
	"github.com/resumable-go/resumable/stream"
)

// closeTimeout bounds the acknowledgements a closing connection sends.
const closeTimeout = 5 * time.Second

// Group is a [stream.Source] of one consumer of a Redis consumer group
// (XREADGROUP). Make one with [NewGroup] and run it with [NewGroupResumer];
// it serves one Resumer at a time and starts no goroutine.
//
// Each connection hands out this consumer's pending entries first (those
// a previous run read and did not acknowledge), then entries idle in other
// consumers' pending lists for longer than [WithClaimIdle] (XAUTOCLAIM,
// again every half of that time), then new entries. The group is the
// Store: an entry is acknowledged (XACK) once the stream committed it (under
// stream.WithConcurrency, the contiguous prefix), with the next read or at
// once when none is under way; nothing is acknowledged before.
//
// The group is created (at the stream's start, with the stream when it is
// missing) only by the first Open of a Group's life; after that a missing
// or recreated stream, group or consumer is stream.ErrSourceChanged, and
// entries removed before they were read or acknowledged are
// errclass.Expired. docs/redis.md in the repository has the details.
type Group struct {
	rdb                  goredis.UniversalClient
	key, group, consumer string
	cfg                  config

	mu        sync.Mutex
	hist      history
	opened    bool       // an Open succeeded: the group is never created again
	member    bool       // this consumer read from the group (it exists there)
	newest    string     // the newest ID read with ">"
	groupLast string     // the group's last-delivered-id, as last seen
	groupRead int64      // the group's entries-read, as last seen (0: unknown)
	unacked   []string   // IDs handed out by the current connection, not committed
	toAck     []string   // committed, not yet acknowledged
	blocking  bool       // a blocking read is under way: commits are acknowledged at once
	conn      *groupConn // the open connection, nil when none
	lost      []string   // pending entries found removed, acknowledged after a resync
	gapAt     string     // the group position reported as trimmed past
	gapOK     string     // the position a resync accepted
	resynced  bool       // a resync completed since the last Open
	lastClaim time.Time
	size      int64 // how many entries the next read asks for

	tmu   sync.Mutex
	tries map[string]int64 // deliveries counted by Handler beyond the read's
}

var _ stream.Source[Entry, string] = (*Group)(nil)

// NewGroup returns the consumer consumer of the group group on the stream
// key of rdb (a *Client, *ClusterClient or *Ring of go-redis v9). Give
// each process its own consumer name, and the same name again after a
// restart, so that it gets its pending entries back. It returns an error
// matching stream.ErrInvalidOption for a nil client, an empty name or a bad
// option.
func NewGroup(rdb goredis.UniversalClient, key, group, consumer string, opts ...Option) (*Group, error) {
	cfg := newConfig(opts)
	if rdb == nil || key == "" || group == "" || consumer == "" {
		cfg.fail("NewGroup: nil client or empty stream, group or consumer name")
	}
	if len(cfg.errs) > 0 {
		return nil, errors.Join(cfg.errs...)
	}
	return &Group{rdb: rdb, key: key, group: group, consumer: consumer, cfg: cfg,
		hist: history{key: key}, tries: make(map[string]int64), size: cfg.count}, nil
}

// NewGroupResumer returns a [stream.Resumer] over g: [Extract], the group
// as the Store (Load has nothing to load, Save acknowledges), and handler
// retries in place up to the delivery limit (stream.WithHandlerRetry with
// [WithMaxDeliveries] attempts and backoff.Default). opts come after
// these. Run it with a handler wrapped by [Group.Handler]; add
// stream.WithDeadLetter to park poison entries. A resync hook
// (stream.WithResync) is called for entries trimmed before they were read
// or acknowledged; the cursor it returns is not used.
func NewGroupResumer(g *Group, opts ...stream.Option) (*stream.Resumer[Entry, string], error) {
	if g == nil {
		return nil, fmt.Errorf("%w: redis: NewGroupResumer: nil Group", stream.ErrInvalidOption)
	}
	base := []stream.Option{
		stream.WithHandlerRetry(int(g.cfg.maxDeliveries), nil),
		stream.WithHooks(stream.Hooks[string]{OnResync: g.onResync}),
	}
	return stream.New[Entry, string](g, Extract, groupStore{g}, append(base, opts...)...)
}

// Handler wraps h to enforce the delivery limit: an entry delivered more
// often than [WithMaxDeliveries] is not handed to h, and a failure of h
// at the limit is returned marked errclass.Permanent and matching
// [ErrPoison], so the stream parks the entry (stream.WithDeadLetter) and
// acknowledges it. Each failure below the limit is recorded in the
// group's delivery count (XCLAIM RETRYCOUNT), so that a restart goes on
// counting. The returned function is safe for concurrent use.
func (g *Group) Handler(h func(ctx context.Context, e Entry) error) func(context.Context, Entry) error {
	return func(ctx context.Context, e Entry) error {
		d := g.deliveries(e)
		limit := g.cfg.maxDeliveries
		if d > limit {
			g.forget(e.ID)
			return errclass.Permanent(fmt.Errorf("redis: entry %s delivered %d times, over the limit %d: %w", e.ID, d, limit, ErrPoison))
		}
		err := h(ctx, e)
		switch {
		case err == nil || errors.Is(err, stream.ErrStop):
			g.forget(e.ID)
			return err
		case ctx.Err() != nil:
			return err
		case d >= limit:
			g.forget(e.ID)
			return errclass.Permanent(fmt.Errorf("redis: entry %s failed at delivery %d, the limit: %w: %w", e.ID, d, ErrPoison, err))
		}
		g.tmu.Lock()
		g.tries[e.ID] = d + 1
		g.tmu.Unlock()
		// Best effort: a lost count costs one more delivery after a
		// restart. The retry will take a while: acknowledge what was
		// committed before it now rather than after.
		cmd, _ := newOnce(ctx, "XCLAIM", g.key, g.group, g.consumer, 0, e.ID, "RETRYCOUNT", d+1, "JUSTID")
		_ = g.rdb.Process(ctx, cmd)
		_ = g.flush(ctx)
		return err
	}
}

func (g *Group) deliveries(e Entry) int64 {
	g.tmu.Lock()
	defer g.tmu.Unlock()
	return max(e.Deliveries, g.tries[e.ID], 1)
}

func (g *Group) forget(id string) {
	g.tmu.Lock()
	delete(g.tries, id)
	g.tmu.Unlock()
}

// Pending returns how many entries each consumer of the group holds
// unacknowledged (XPENDING), for a gauge or an operator.
func (g *Group) Pending(ctx context.Context) (map[string]int64, error) {
	p, err := g.rdb.XPending(ctx, g.key, g.group).Result()
	if err != nil {
		return nil, g.classify("XPENDING", err)
	}
	if p.Consumers == nil {
		return map[string]int64{}, nil
	}
	return p.Consumers, nil
}

// classify is classify, with NOGROUP as stream.ErrSourceChanged: the
// group existed when it was opened.
func (g *Group) classify(op string, err error) error {
	if noGroup(err) {
		return fmt.Errorf("redis: %s: stream %q or group %q: was there, now missing (%v): %w", op, g.key, g.group, err, stream.ErrSourceChanged)
	}
	return classify(op+" "+g.key, err)
}

func (g *Group) onResync(stream.ResyncEvent[string]) {
	g.mu.Lock()
	g.resynced = true
	g.mu.Unlock()
}

// Open checks the stream and the group, creating them on the first Open
// of g's life when they are missing, and returns a connection that starts
// with this consumer's pending entries. after is not used: the group holds
// the position.
func (g *Group) Open(ctx context.Context, _ string) (stream.Conn[Entry], error) {
	g.mu.Lock()
	resynced, lost := g.resynced, g.lost
	if resynced {
		g.resynced, g.gapOK = false, g.gapAt
	}
	g.mu.Unlock()
	if resynced && len(lost) > 0 {
		if err := g.rdb.XAck(ctx, g.key, g.group, lost...).Err(); err != nil {
			return nil, g.classify("XACK", err)
		}
		g.mu.Lock()
		g.lost = nil
		g.mu.Unlock()
	}
	in, gi, err := g.probe(ctx, nil)
	if err != nil {
		return nil, err
	}
	g.mu.Lock()
	create := !g.opened && (!in.exists || !gi.exists)
	g.mu.Unlock()
	if create {
		err := g.rdb.XGroupCreateMkStream(ctx, g.key, g.group, "0").Err()
		if err != nil && !goredis.HasErrorPrefix(err, "BUSYGROUP") {
			return nil, classify("XGROUP CREATE "+g.key, err)
		}
		if in, gi, err = g.probe(ctx, nil); err != nil {
			return nil, err
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.check(in, gi); err != nil {
		return nil, err
	}
	g.opened = true
	g.unacked = g.unacked[:0]
	c := &groupConn{g: g, buf: make([]Entry, 0, g.cfg.count), after: "0", block: newBlocker(g.rdb)}
	g.conn = c
	return c, nil
}

// groupInfo is what XINFO GROUPS and XINFO CONSUMERS told about the group.
type groupInfo struct {
	exists bool
	last   string // last-delivered-id
	read   int64  // entries-read; 0: unknown
	member bool   // the consumer is in the group
}

// probeCmds are the commands of a probe, queued in a pipeline.
type probeCmds struct {
	stream    *goredis.XInfoStreamCmd
	groups    *goredis.XInfoGroupsCmd
	consumers *goredis.XInfoConsumersCmd
}

func (g *Group) queueProbe(ctx context.Context, p goredis.Pipeliner) probeCmds {
	return probeCmds{
		stream:    p.XInfoStream(ctx, g.key),
		groups:    p.XInfoGroups(ctx, g.key),
		consumers: p.XInfoConsumers(ctx, g.key, g.group),
	}
}

// probe reads the stream's and the group's state in one round trip, with
// more queued after them.
func (g *Group) probe(ctx context.Context, more func(goredis.Pipeliner)) (info, groupInfo, error) {
	var cmds probeCmds
	_, _ = g.rdb.Pipelined(ctx, func(p goredis.Pipeliner) error {
		cmds = g.queueProbe(ctx, p)
		if more != nil {
			more(p)
		}
		return nil
	})
	return g.readProbe(cmds)
}

func (g *Group) readProbe(cmds probeCmds) (info, groupInfo, error) {
	in, err := readInfo(g.key, cmds.stream)
	if err != nil || !in.exists {
		return in, groupInfo{}, err
	}
	groups, err := cmds.groups.Result()
	if err != nil {
		return in, groupInfo{}, classify("XINFO GROUPS "+g.key, err)
	}
	var gi groupInfo
	for _, x := range groups {
		if x.Name == g.group {
			gi = groupInfo{exists: true, last: x.LastDeliveredID, read: x.EntriesRead}
		}
	}
	if !gi.exists {
		return in, gi, nil
	}
	consumers, err := cmds.consumers.Result()
	if err != nil {
		return in, gi, g.classify("XINFO CONSUMERS", err)
	}
	for _, x := range consumers {
		gi.member = gi.member || x.Name == g.consumer
	}
	return in, gi, nil
}

// checkMember reports an error matching stream.ErrSourceChanged when this
// consumer, which read from the group before, is not in it.
func (g *Group) checkMember(cmd *goredis.XInfoConsumersCmd) error {
	consumers, err := cmd.Result()
	if err != nil {
		return g.classify("XINFO CONSUMERS", err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.member {
		return nil
	}
	for _, x := range consumers {
		if x.Name == g.consumer {
			return nil
		}
	}
	return fmt.Errorf("redis: consumer %q of group %q: was there, now missing (the group was recreated, or the consumer deleted): %w", g.consumer, g.group, stream.ErrSourceChanged)
}

// check compares the stream and the group with what g saw of them, and
// records them; g.mu is held.
func (g *Group) check(in info, gi groupInfo) error {
	if err := g.hist.check(in); err != nil {
		return err
	}
	switch {
	case !in.exists:
		return fmt.Errorf("redis: stream %q: missing after the group %q was created: %w", g.key, g.group, stream.ErrSourceChanged)
	case !gi.exists:
		return fmt.Errorf("redis: group %q of stream %q: was there, now missing: %w", g.group, g.key, stream.ErrSourceChanged)
	case g.member && !gi.member:
		return fmt.Errorf("redis: consumer %q of group %q: was there, now missing (the group was recreated, or the consumer deleted): %w", g.consumer, g.group, stream.ErrSourceChanged)
	case CompareIDs(gi.last, g.groupLast) < 0:
		return fmt.Errorf("redis: group %q: last-delivered-id was %s, now %s (recreated or set back): %w", g.group, g.groupLast, gi.last, stream.ErrSourceChanged)
	case gi.read > 0 && gi.read < g.groupRead:
		return fmt.Errorf("redis: group %q: entries-read was %d, now %d (recreated or set back): %w", g.group, g.groupRead, gi.read, stream.ErrSourceChanged)
	}
	g.groupLast, g.groupRead = gi.last, max(gi.read, g.groupRead)
	if gi.read > 0 && (in.length == 0 || CompareIDs(in.maxDeleted, in.first) < 0) && gi.last != g.gapOK && gap(in, gi.last, gi.read) {
		g.gapAt = gi.last
		return trimmed(g.key, "the group's last-delivered-id", gi.last, in)
	}
	return nil
}

// takeAcks returns the committed IDs to acknowledge and forgets them.
func (g *Group) takeAcks() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	ids := g.toAck
	g.toAck = nil
	return ids
}

// giveBack returns IDs whose acknowledgement failed.
func (g *Group) giveBack(ids []string) {
	g.mu.Lock()
	g.toAck = append(ids, g.toAck...)
	g.mu.Unlock()
}

// flush acknowledges the committed IDs now.
func (g *Group) flush(ctx context.Context) error {
	ids := g.takeAcks()
	if len(ids) == 0 {
		return nil
	}
	if err := g.rdb.XAck(ctx, g.key, g.group, ids...).Err(); err != nil {
		g.giveBack(ids)
		g.mu.Lock()
		closed := g.conn == nil
		g.mu.Unlock()
		if closed && ctx.Err() != nil {
			// A flush that ended with its context (a read or a Save of a
			// stopping stream) may have held these while the closing
			// connection's flush found none: acknowledge them now.
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
			defer cancel()
			return g.flush(fctx)
		}
		return g.classify("XACK", err)
	}
	return nil
}

// commit marks the entries handed out up to the one with ID id as
// committed, and acknowledges them at once when no read will carry them
// soon: a blocking read is under way, the connection is closed, or a
// batch of them waits.
func (g *Group) commit(ctx context.Context, id string) error {
	g.mu.Lock()
	if i := slices.Index(g.unacked, id); i >= 0 {
		g.toAck = append(g.toAck, g.unacked[:i+1]...)
		g.unacked = g.unacked[:copy(g.unacked, g.unacked[i+1:])]
	}
	now := g.blocking || g.conn == nil || int64(len(g.toAck)) >= g.cfg.count
	g.mu.Unlock()
	if now {
		return g.flush(ctx)
	}
	return nil
}

// groupStore is the Store of a group's Resumer: the group keeps the
// position, so Load has nothing to load; Save acknowledges.
type groupStore struct{ g *Group }

func (s groupStore) Load(context.Context) (string, error)     { return "", nil }
func (s groupStore) Save(ctx context.Context, c string) error { return s.g.commit(ctx, c) }

// Phases of a connection.
const (
	phasePending = iota // this consumer's pending entries
	phaseClaim          // entries idle in other consumers' lists
	phaseNew            // new entries
)

// groupConn is one connection of a Group.
type groupConn struct {
	g         *Group
	buf       []Entry
	next      int
	phase     int
	after     string    // phasePending: the last pending ID read
	claimFrom string    // phaseClaim: where XAUTOCLAIM goes on
	probed    time.Time // phaseNew: when the stream and the group were last checked
	idle      bool      // phaseNew: the last read found nothing, unchecked

	block *blocker // the blocking reads

	mu     sync.Mutex
	closed bool
}

// Recv returns the next entry, reading a batch when none is left.
func (c *groupConn) Recv(ctx context.Context) (Entry, error) {
	g := c.g
	for {
		if c.next < len(c.buf) {
			e := c.buf[c.next]
			c.buf[c.next] = Entry{}
			c.next++
			g.mu.Lock()
			g.unacked = append(g.unacked, e.ID)
			g.mu.Unlock()
			return e, nil
		}
		if c.isClosed() {
			return Entry{}, errClosed
		}
		if err := ctx.Err(); err != nil {
			return Entry{}, err
		}
		c.buf, c.next = c.buf[:0], 0
		var err error
		switch c.phase {
		case phasePending:
			err = c.readPending(ctx)
		case phaseClaim:
			err = c.claim(ctx)
		default:
			err = c.readNew(ctx)
		}
		if err != nil {
			g.doubt()
			return Entry{}, err
		}
	}
}

// readSize returns how many entries the next read asks for.
func (g *Group) readSize() int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.size
}

// doubt makes the next reads small after a failed one: its reply may have
// been too large to arrive within the client's read timeout. One entry a
// read, then twice as many after each full read, up to [WithCount].
func (g *Group) doubt() {
	g.mu.Lock()
	g.size = 1
	g.mu.Unlock()
}

// grow doubles the read size after a full read of n entries.
func (g *Group) grow(n int) {
	g.mu.Lock()
	if int64(n) >= g.size {
		g.size = min(2*g.size, g.cfg.count)
	}
	g.mu.Unlock()
}

func (c *groupConn) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// pipeline runs queue in one round trip, with the acknowledgements that
// wait queued first; they are given back when the round trip fails.
func (c *groupConn) pipeline(ctx context.Context, queue func(goredis.Pipeliner)) {
	g := c.g
	ids := g.takeAcks()
	var ack *goredis.IntCmd
	// Not cancelled with ctx: the acknowledgements must go out even when
	// the stream is stopping (the read does not block).
	pctx := context.WithoutCancel(ctx)
	_, _ = g.rdb.Pipelined(pctx, func(p goredis.Pipeliner) error {
		if len(ids) > 0 {
			ack = p.XAck(pctx, g.key, g.group, ids...)
		}
		queue(p)
		return nil
	})
	if ack != nil && ack.Err() != nil {
		g.giveBack(ids)
		if c.isClosed() {
			// Close may have flushed before they came back.
			fctx, cancel := context.WithTimeout(pctx, closeTimeout)
			defer cancel()
			_ = g.flush(fctx)
		}
	}
}

// readPending reads a batch of this consumer's pending entries, with their
// delivery counts.
func (c *groupConn) readPending(ctx context.Context) error {
	g := c.g
	var pend *goredis.XPendingExtCmd
	start := "(" + c.after
	if c.after == "0" {
		start = "-"
	}
	size := g.readSize()
	readCmd, read := newReadGroup(ctx, g.rdb, &goredis.XReadGroupArgs{Group: g.group, Consumer: g.consumer, Streams: []string{g.key, c.after}, Count: size, Block: -1})
	c.pipeline(ctx, func(p goredis.Pipeliner) {
		_ = p.Process(ctx, readCmd)
		pend = p.XPendingExt(ctx, &goredis.XPendingExtArgs{Stream: g.key, Group: g.group, Start: start, End: "+", Count: size, Consumer: g.consumer})
	})
	msgs, err := messages(read)
	if err != nil {
		return g.classify("XREADGROUP", err)
	}
	g.grow(len(msgs))
	g.mu.Lock()
	g.member = true
	g.mu.Unlock()
	if len(msgs) == 0 {
		c.phase = phaseClaim
		if g.cfg.claimIdle == 0 {
			c.phase = phaseNew
		}
		return nil
	}
	counts, err := pend.Result()
	if err != nil {
		return g.classify("XPENDING", err)
	}
	var lost []string
	for _, m := range msgs {
		if m.Values == nil {
			lost = append(lost, m.ID)
			continue
		}
		c.buf = append(c.buf, Entry{ID: m.ID, Values: m.Values, Deliveries: countOf(counts, m.ID)})
	}
	c.after = msgs[len(msgs)-1].ID
	if len(lost) > 0 {
		c.buf = c.buf[:0]
		g.mu.Lock()
		g.lost = append(g.lost, lost...)
		g.mu.Unlock()
		return errclass.CursorExpired(fmt.Errorf("redis: stream %q: entries %v, pending for consumer %q of group %q, were removed before they were acknowledged", g.key, lost, g.consumer, g.group))
	}
	return nil
}

// countOf returns the delivery count of id in an XPENDING reply (1 when
// absent).
func countOf(counts []goredis.XPendingExt, id string) int64 {
	for _, x := range counts {
		if x.ID == id {
			return x.RetryCount
		}
	}
	return 1
}

// claim claims a batch of entries idle in other consumers' pending lists.
func (c *groupConn) claim(ctx context.Context) error {
	g := c.g
	if c.claimFrom == "" {
		c.claimFrom = "0-0"
	}
	claimCmd, cmd := newAutoClaim(ctx, g.rdb, &goredis.XAutoClaimArgs{
		Stream: g.key, Group: g.group, Consumer: g.consumer, MinIdle: g.cfg.claimIdle, Start: c.claimFrom, Count: g.readSize(),
	})
	_ = g.rdb.Process(ctx, claimCmd)
	msgs, next, deleted, err := cmd.Result()
	if err != nil {
		return g.classify("XAUTOCLAIM", err)
	}
	g.grow(len(msgs))
	c.claimFrom = next
	if next == "0-0" || next == "" {
		c.phase, c.claimFrom = phaseNew, ""
		g.mu.Lock()
		g.lastClaim = time.Now()
		g.mu.Unlock()
	}
	if len(deleted) > 0 {
		return errclass.CursorExpired(fmt.Errorf("redis: stream %q: entries %v, pending in group %q, were removed before they were acknowledged (XAUTOCLAIM dropped them)", g.key, deleted, g.group))
	}
	if len(msgs) == 0 {
		return nil
	}
	g.mu.Lock()
	window := int64(len(g.unacked))
	g.mu.Unlock()
	counts, err := g.rdb.XPendingExt(ctx, &goredis.XPendingExtArgs{Stream: g.key, Group: g.group, Start: msgs[0].ID, End: msgs[len(msgs)-1].ID,
		Count: g.cfg.count + window, Consumer: g.consumer}).Result()
	if err != nil {
		return g.classify("XPENDING", err)
	}
	for _, m := range msgs {
		c.buf = append(c.buf, Entry{ID: m.ID, Values: m.Values, Deliveries: countOf(counts, m.ID)})
	}
	return nil
}

// readNew reads new entries: without blocking, then, when there were
// none, blocking for at most the block time. Every read is preceded by a
// look at the group's consumers (this one missing: the group was
// recreated), and, when the last full check is a block time old or before
// a blocking read, by a full check of the stream and the group.
func (c *groupConn) readNew(ctx context.Context) error {
	g := c.g
	args := &goredis.XReadGroupArgs{Group: g.group, Consumer: g.consumer, Streams: []string{g.key, ">"}, Count: g.readSize(), Block: -1}
	readCmd, read := newReadGroup(ctx, g.rdb, args)
	full := c.idle || time.Since(c.probed) >= g.cfg.block
	var cmds probeCmds
	var consumers *goredis.XInfoConsumersCmd
	c.pipeline(ctx, func(p goredis.Pipeliner) {
		if full {
			cmds = g.queueProbe(ctx, p)
		} else {
			consumers = p.XInfoConsumers(ctx, g.key, g.group)
		}
		_ = p.Process(ctx, readCmd)
	})
	var err error
	if full {
		c.probed = time.Now()
		var in info
		var gi groupInfo
		if in, gi, err = g.readProbe(cmds); err == nil {
			g.mu.Lock()
			err = g.check(in, gi)
			g.mu.Unlock()
		}
	} else {
		err = g.checkMember(consumers)
	}
	if err != nil {
		return err
	}
	msgs, err := messages(read)
	if err != nil {
		return g.classify("XREADGROUP", err)
	}
	c.idle = len(msgs) == 0 && !full
	if c.idle {
		return nil // check before blocking
	}
	if len(msgs) == 0 {
		g.mu.Lock()
		due := g.cfg.claimIdle > 0 && time.Since(g.lastClaim) >= g.cfg.claimIdle/2
		g.blocking = !due
		g.mu.Unlock()
		if due {
			c.phase = phaseClaim
			return nil
		}
		// Commits made while the read blocks are acknowledged at once:
		// take those that wait first.
		if err := g.flush(ctx); err != nil {
			g.mu.Lock()
			g.blocking = false
			g.mu.Unlock()
			return err
		}
		args.Block = g.cfg.block
		blockCmd, read := newReadGroup(ctx, g.rdb, args)
		c.block.read(ctx, blockCmd)
		msgs, err = messages(read)
		g.mu.Lock()
		g.blocking = false
		g.mu.Unlock()
		if err != nil {
			return g.classify("XREADGROUP", err)
		}
	}
	if len(msgs) == 0 {
		return nil
	}
	g.grow(len(msgs))
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.newest != "" && CompareIDs(msgs[0].ID, g.newest) <= 0 {
		return fmt.Errorf("redis: group %q: delivered %s as new after %s (recreated or set back): %w", g.group, msgs[0].ID, g.newest, stream.ErrSourceChanged)
	}
	g.newest = msgs[len(msgs)-1].ID
	for _, m := range msgs {
		c.buf = append(c.buf, Entry{ID: m.ID, Values: m.Values, Deliveries: 1})
	}
	return nil
}

// Close ends the connection and acknowledges the entries committed so far;
// a blocking read in progress ends at once on a *Client (CLIENT UNBLOCK),
// within the block time otherwise. It may be called more than once.
func (c *groupConn) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	c.block.close()
	g := c.g
	g.mu.Lock()
	if g.conn == c {
		g.conn = nil
	}
	g.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	return g.flush(ctx)
}
