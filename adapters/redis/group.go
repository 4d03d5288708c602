package redis

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/resumable-go/resumable/backoff"
	"github.com/resumable-go/resumable/errclass"
	"github.com/resumable-go/resumable/internal/badarg"
	"github.com/resumable-go/resumable/stream"
)

// closeTimeout bounds the acknowledgements a closing connection sends.
const closeTimeout = time.Second

// Group is a [stream.Source] of one consumer of a Redis consumer group
// (XREADGROUP). Make one with [NewGroup] and run it with [NewGroupResumer];
// it serves one Resumer at a time. With claims on, each connection runs
// one goroutine, ended by its Close, that keeps the entries it holds from
// others' claims.
//
// Each connection hands out this consumer's pending entries first (those
// a previous run read and did not acknowledge), then entries idle in other
// consumers' pending lists for longer than [WithClaimIdle] (XAUTOCLAIM,
// again every half of that time, whatever the backlog), then new entries.
// The reads that move the group (XREADGROUP with ">", XAUTOCLAIM) are
// never retried by go-redis: after a failed one, the next connection
// reads this consumer's pending list first, and reads ask for one entry,
// then twice as many after each full read, up to [WithCount]. The group is the
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
	opened    bool                // an Open succeeded: the group is never created again
	member    bool                // this consumer read from the group (it exists there)
	newest    string              // the newest ID read with ">"
	groupLast string              // the group's last-delivered-id, as last seen
	groupRead int64               // the group's entries-read, as last seen (0: unknown)
	holders   []string            // the consumers with pending entries, as last seen
	unacked   []string            // IDs handed out by the current connection, not committed
	held      map[string]struct{} // IDs read by the current connection, not acknowledged
	toAck     []string            // committed, not yet acknowledged
	blocking  bool                // a blocking read is under way: commits are acknowledged at once
	conn      *groupConn          // the open connection, nil when none
	lost      []string            // pending entries found removed, acknowledged after a resync
	gapAt     string              // the group position reported as trimmed past
	gapOK     string              // the position a resync accepted
	resynced  bool                // a resync completed since the last Open
	lastClaim time.Time
	size      int64           // how many entries the next read asks for
	parking   map[string]bool // entries handed back as poison: the commit that covers one is acknowledged at once

	tmu   sync.Mutex
	tries map[string]int64 // handler calls made on an entry in this life, when one failed
	again map[string]bool  // entries read again (pending or claimed): every call is recorded
}

var _ stream.Source[Entry, string] = (*Group)(nil)

// NewGroup returns the consumer consumer of the group group on the stream
// key of rdb (a *Client, *ClusterClient or *Ring of go-redis v9). Give
// each process its own consumer name, and the same name again after a
// restart, so that it gets its pending entries back. Every argument is
// checked at once: a nil client, an empty key, group or consumer and a bad
// option each add an error matching stream.ErrInvalidOption that names the
// argument, all joined.
func NewGroup(rdb goredis.UniversalClient, key, group, consumer string, opts ...Option) (*Group, error) {
	var errs []error
	if isNil(rdb) {
		errs = append(errs, badarg.New("redis: NewGroup", "rdb", rdb, "required"))
	}
	for _, a := range []struct{ arg, value string }{{"key", key}, {"group", group}, {"consumer", consumer}} {
		if a.value == "" {
			errs = append(errs, badarg.New("redis: NewGroup", a.arg, a.value, "must not be empty"))
		}
	}
	cfg := newConfig(opts)
	if errs = append(errs, cfg.errs...); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return &Group{rdb: rdb, key: key, group: group, consumer: consumer, cfg: cfg,
		hist: history{key: key}, tries: make(map[string]int64), again: make(map[string]bool), size: cfg.count}, nil
}

// NewGroupResumer returns a [stream.Resumer] over g, the Group's
// counterpart of [NewResumer]. It sets these defaults, which opts, coming
// after them, may change:
//   - [Extract] as the extractor, and the group as the Store (Load has
//     nothing to load, Save acknowledges);
//   - handler retries in place without a limit of their own, 10ms apart
//     and doubling up to 1s (stream.WithHandlerRetry): the delivery limit
//     is [WithMaxDeliveries], which [Group.Handler] enforces;
//   - a resync hook (stream.WithHooks, added to the caller's): a resync
//     (stream.WithResync) is called for entries trimmed before they were
//     read or acknowledged; the cursor it returns is not used.
//
// Run it with a handler wrapped by [Group.Handler] (without it, a failing
// entry is retried forever); add stream.WithDeadLetter to park poison
// entries. A nil g is an error matching stream.ErrInvalidOption; opts are
// checked by stream.New.
func NewGroupResumer(g *Group, opts ...stream.Option) (*stream.Resumer[Entry, string], error) {
	if g == nil {
		return nil, badarg.New("redis: NewGroupResumer", "g", g, "required")
	}
	base := []stream.Option{
		stream.WithHandlerRetry(math.MaxInt32, groupRetry),
		stream.WithHooks(stream.Hooks[string]{OnResync: g.onResync}),
	}
	return stream.New[Entry, string](g, Extract, groupStore{g}, append(base, opts...)...)
}

// groupRetry is the wait between a group's handler calls on one entry.
var groupRetry = backoff.Exponential(backoff.WithInitialInterval(10*time.Millisecond), backoff.WithMaxInterval(time.Second), backoff.WithMultiplier(2))

// Handler wraps h to enforce the delivery limit: each entry is handed to
// h at most [WithMaxDeliveries] times, then the error is returned marked
// errclass.Permanent and matching [ErrPoison], so the stream parks the
// entry (stream.WithDeadLetter) and acknowledges it. A failure counts
// unless its error is marked errclass.RetryAfter (a transient failure,
// not the entry's: retried in place for as long as it lasts) or is ctx's
// end. Calls are recorded in the group before they start (XCLAIM
// RETRYCOUNT: the delivery count is one plus the calls recorded), so that
// a restart or another consumer goes on counting, and a process that dies
// in a call counts it; only an entry's first call after a fresh read is
// not recorded (a death in it costs one call more). The returned function
// is safe for concurrent use.
func (g *Group) Handler(h func(ctx context.Context, e Entry) error) func(context.Context, Entry) error {
	return func(ctx context.Context, e Entry) error {
		n, record := g.attempt(e)
		limit := g.cfg.maxDeliveries
		if n > limit {
			g.forget(e.ID)
			g.parked(e.ID)
			return errclass.Permanent(fmt.Errorf("redis: entry %s: %d handler calls recorded, the limit is %d: %w", e.ID, n-1, limit, ErrPoison))
		}
		if record {
			// Best effort: a lost record costs one call more.
			cmd, _ := newOnce(ctx, "XCLAIM", g.key, g.group, g.consumer, 0, e.ID, "RETRYCOUNT", n+1, "JUSTID")
			_ = g.rdb.Process(ctx, cmd)
		}
		err := h(ctx, e)
		switch {
		case err == nil || errors.Is(err, stream.ErrStop):
			g.forget(e.ID)
			return err
		case ctx.Err() != nil:
			return err
		case errclass.Markers().Classify(err).Action == errclass.Retry:
			g.failed(e.ID, n-1) // transient: this call does not count
			return err
		case errclass.Markers().Classify(err).Action != errclass.Unknown:
			g.forget(e.ID)
			return err
		case n >= limit:
			g.forget(e.ID)
			g.parked(e.ID)
			return errclass.Permanent(fmt.Errorf("redis: entry %s failed in handler call %d, the limit: %w: %w", e.ID, n, ErrPoison, err))
		}
		g.failed(e.ID, n)
		// The retry will take a while: acknowledge what was committed
		// before it now rather than after.
		_ = g.flush(ctx)
		return err
	}
}

// attempt returns the number of the handler call about to start on e, and
// whether it is to be recorded first: every call but the first after e was
// read as new.
func (g *Group) attempt(e Entry) (n int64, record bool) {
	g.tmu.Lock()
	defer g.tmu.Unlock()
	if done, ok := g.tries[e.ID]; ok {
		return done + 1, true
	}
	return max(e.Deliveries, 1), g.again[e.ID]
}

// parked notes that the entry id goes to the dead letter: the commit that
// covers it, after its park, is acknowledged at once, not with the next
// read, so that a death between the two does not park it again.
func (g *Group) parked(id string) {
	g.mu.Lock()
	if g.parking == nil {
		g.parking = make(map[string]bool)
	}
	g.parking[id] = true
	g.mu.Unlock()
}

// failed records that n calls on id were made.
func (g *Group) failed(id string, n int64) {
	g.tmu.Lock()
	g.tries[id] = n
	g.tmu.Unlock()
}

func (g *Group) forget(id string) {
	g.tmu.Lock()
	delete(g.tries, id)
	delete(g.again, id)
	g.tmu.Unlock()
}

// redelivered notes entries read again (pending or claimed): their first
// call is recorded too.
func (g *Group) redelivered(ids []string) {
	g.tmu.Lock()
	for _, id := range ids {
		g.again[id] = true
	}
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
	block := newBlocker(g.rdb)
	var c stream.Conn[Entry]
	var err error
	block.run(ctx, func(ctx context.Context) error { // ctx's end cuts the lane
		if err = g.takeName(ctx, block); err == nil {
			c, err = g.open(ctx, block)
		}
		return err
	})
	if err != nil {
		block.close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	return c, nil
}

// open is Open once the consumer's name is taken.
func (g *Group) open(ctx context.Context, block *blocker) (stream.Conn[Entry], error) {
	in, gi, err := g.probe(ctx, block.via(), nil)
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
		if in, gi, err = g.probe(ctx, block.via(), nil); err != nil {
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
	clear(g.parking) // of the last connection: its entries are no longer handed out
	g.held = make(map[string]struct{})
	c := &groupConn{g: g, buf: make([]Entry, 0, g.cfg.count), after: "0", block: block, rd: block.via(), stop: make(chan struct{})}
	g.conn = c
	if g.cfg.claimIdle > 0 {
		c.keeper.Go(c.keep)
	}
	return c, nil
}

// nameWait bounds how long Open waits for a connection of this consumer
// name to go, as one just closed by this process does.
const nameWait = time.Second

// takeName names the connection of block after the consumer (CLIENT
// SETNAME, on a *Client), and fails with [ErrConsumerInUse] when another
// connection of the server bears that name for longer than nameWait: a
// live process runs the same consumer. A server that refuses CLIENT LIST
// is not checked.
func (g *Group) takeName(ctx context.Context, block *blocker) error {
	sum := sha256.Sum256([]byte(g.key + "\x00" + g.group + "\x00" + g.consumer))
	name := "resumable-" + hex.EncodeToString(sum[:12])
	id, err := block.named(ctx, name)
	if err != nil || id == 0 {
		return classify("CLIENT SETNAME", err)
	}
	end := time.Now().Add(nameWait)
	for {
		list, err := g.rdb.ClientList(ctx).Result()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return nil // not allowed to look (ACL): not checked
		}
		other := clientNamed(list, name, id)
		if other == "" {
			return nil
		}
		if time.Now().After(end) {
			return errclass.Permanent(fmt.Errorf("redis: consumer %q of group %q on stream %q: %w (%s)", g.consumer, g.group, g.key, ErrConsumerInUse, other))
		}
		t := time.NewTimer(20 * time.Millisecond) // polling the server's list, bounded by nameWait
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// clientNamed returns the address of a client of CLIENT LIST's reply named
// name, other than the client id; "" when none.
func clientNamed(list, name string, id int64) string {
	self := "id=" + strconv.FormatInt(id, 10) + " "
	for _, line := range strings.Split(list, "\n") {
		if strings.Contains(line, " name="+name+" ") && !strings.HasPrefix(line, self) {
			for _, f := range strings.Fields(line) {
				if strings.HasPrefix(f, "addr=") {
					return f
				}
			}
			return "a client"
		}
	}
	return ""
}

// groupInfo is what XINFO GROUPS and XINFO CONSUMERS told about the group.
type groupInfo struct {
	exists bool
	last   string // last-delivered-id
	read   int64  // entries-read; 0: unknown
	member bool   // the consumer is in the group
	// names are the group's consumers; holders those with pending entries.
	names, holders []string
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
func (g *Group) probe(ctx context.Context, rd goredis.Cmdable, more func(goredis.Pipeliner)) (info, groupInfo, error) {
	var cmds probeCmds
	_, _ = rd.Pipelined(ctx, func(p goredis.Pipeliner) error {
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
	gi.read1(g.consumer, consumers)
	return in, gi, nil
}

// checkMember reports an error matching stream.ErrSourceChanged when this
// consumer, which read from the group before, is not in it.
func (g *Group) checkMember(cmd *goredis.XInfoConsumersCmd) error {
	consumers, err := cmd.Result()
	if err != nil {
		return g.classify("XINFO CONSUMERS", err)
	}
	var gi groupInfo
	gi.read1(g.consumer, consumers)
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.checkConsumers(gi)
}

// read1 records XINFO CONSUMERS's reply.
func (gi *groupInfo) read1(me string, consumers []goredis.XInfoConsumer) {
	for _, x := range consumers {
		gi.member = gi.member || x.Name == me
		gi.names = append(gi.names, x.Name)
		if x.Pending > 0 {
			gi.holders = append(gi.holders, x.Name)
		}
	}
}

// checkConsumers reports an error matching stream.ErrSourceChanged when
// this consumer, which read from the group before, is not in it, or a
// consumer that held pending entries is gone (the group was recreated, or
// the consumer deleted: its entries vanished unhandled); otherwise it
// records who holds entries. g.mu is held.
func (g *Group) checkConsumers(gi groupInfo) error {
	if g.member && !gi.member {
		return fmt.Errorf("redis: consumer %q of group %q: was there, now missing (the group was recreated, or the consumer deleted): %w", g.consumer, g.group, stream.ErrSourceChanged)
	}
	for _, name := range g.holders {
		if !slices.Contains(gi.names, name) {
			return fmt.Errorf("redis: consumer %q of group %q: held pending entries, now missing with them (the group was recreated, or the consumer deleted): %w", name, g.group, stream.ErrSourceChanged)
		}
	}
	g.holders = gi.holders
	return nil
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
	case Compare(gi.last, g.groupLast) < 0:
		return fmt.Errorf("redis: group %q: last-delivered-id was %s, now %s (recreated or set back): %w", g.group, g.groupLast, gi.last, stream.ErrSourceChanged)
	case gi.read > 0 && gi.read < g.groupRead:
		return fmt.Errorf("redis: group %q: entries-read was %d, now %d (recreated or set back): %w", g.group, g.groupRead, gi.read, stream.ErrSourceChanged)
	}
	if err := g.checkConsumers(gi); err != nil {
		return err
	}
	g.groupLast, g.groupRead = gi.last, max(gi.read, g.groupRead)
	if gi.read > 0 && (in.length == 0 || Compare(in.maxDeleted, in.first) < 0) && gi.last != g.gapOK && gap(in, gi.last, gi.read) {
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
	g.release(ids)
	return nil
}

// flushOn acknowledges the committed IDs now through rd, giving them back
// when that fails.
func (g *Group) flushOn(ctx context.Context, rd goredis.Cmdable) error {
	ids := g.takeAcks()
	if len(ids) == 0 {
		return nil
	}
	if err := rd.XAck(ctx, g.key, g.group, ids...).Err(); err != nil {
		g.giveBack(ids)
		return g.classify("XACK", err)
	}
	g.release(ids)
	return nil
}

// release forgets acknowledged IDs from those held.
func (g *Group) release(ids []string) {
	g.mu.Lock()
	for _, id := range ids {
		delete(g.held, id)
	}
	g.mu.Unlock()
}

// commit marks the entries handed out up to the one with ID id as
// committed, and acknowledges them at once when no read will carry them
// soon: a blocking read is under way, the connection is closed, two
// batches of them wait (one would make every batch of a busy stream pay a
// round trip of its own), or they include an entry just parked.
func (g *Group) commit(ctx context.Context, id string) error {
	g.mu.Lock()
	parked := false
	if i := slices.Index(g.unacked, id); i >= 0 {
		if len(g.parking) > 0 {
			for _, x := range g.unacked[:i+1] {
				if g.parking[x] {
					parked = true
					delete(g.parking, x)
				}
			}
		}
		g.toAck = append(g.toAck, g.unacked[:i+1]...)
		g.unacked = g.unacked[:copy(g.unacked, g.unacked[i+1:])]
	}
	now := g.blocking || g.conn == nil || parked || int64(len(g.toAck)) >= 2*g.cfg.count
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

	block *blocker                // the blocking reads
	rd    goredis.UniversalClient // the reads' client: block's lane on a *Client

	stop   chan struct{}  // closed by Close: keep ends
	keeper sync.WaitGroup // keep

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
		// On a *Client the reads go through the connection's lane, whose
		// sockets ctx's end closes: a stop never waits for a server that
		// does not answer.
		c.block.run(ctx, func(ctx context.Context) error {
			switch c.phase {
			case phasePending:
				err = c.readPending(ctx)
			case phaseClaim:
				err = c.claim(ctx)
			default:
				err = c.readNew(ctx)
			}
			return err
		})
		if err != nil {
			g.doubt()
			if ctx.Err() != nil {
				return Entry{}, ctx.Err()
			}
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
	_, _ = c.rd.Pipelined(pctx, func(p goredis.Pipeliner) error {
		if len(ids) > 0 {
			ack = p.XAck(pctx, g.key, g.group, ids...)
		}
		queue(p)
		return nil
	})
	if ack != nil && ack.Err() == nil {
		g.release(ids)
	}
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

// readPending reads a page of this consumer's pending entries: XPENDING
// for their IDs and delivery counts, XRANGE for their fields. Unlike
// XREADGROUP with an ID, neither changes a delivery count: an entry only
// read again never counts toward the delivery limit.
func (c *groupConn) readPending(ctx context.Context) error {
	g := c.g
	start := "(" + c.after
	if c.after == "0" {
		start = "-"
	}
	var pend *goredis.XPendingExtCmd
	c.pipeline(ctx, func(p goredis.Pipeliner) {
		pend = p.XPendingExt(ctx, &goredis.XPendingExtArgs{Stream: g.key, Group: g.group, Start: start, End: "+", Count: g.readSize(), Consumer: g.consumer})
	})
	list, err := pend.Result()
	if err != nil {
		return g.classify("XPENDING", err)
	}
	if len(list) == 0 {
		c.phase = phaseClaim
		if g.cfg.claimIdle == 0 {
			c.phase = phaseNew
		}
		return nil
	}
	g.grow(len(list))
	g.mu.Lock()
	g.member = true
	g.mu.Unlock()
	c.after = list[len(list)-1].ID
	return c.fetch(ctx, list, "pending for consumer "+strconv.Quote(g.consumer)+" of group "+strconv.Quote(g.group))
}

// fetch reads the fields of the pending entries list (XRANGE each, in one
// round trip) into the buffer, with their delivery counts. Entries removed
// from the stream are errclass.Expired, and acknowledged after a resync.
func (c *groupConn) fetch(ctx context.Context, list []goredis.XPendingExt, where string) error {
	g := c.g
	cmds := make([]*goredis.XMessageSliceCmd, len(list))
	_, _ = c.rd.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i, x := range list {
			cmds[i] = p.XRange(ctx, g.key, x.ID, x.ID)
		}
		return nil
	})
	var lost, ids []string
	for i, x := range list {
		msgs, err := cmds[i].Result()
		if err != nil {
			c.buf = c.buf[:0]
			return g.classify("XRANGE", err)
		}
		if len(msgs) == 0 {
			lost = append(lost, x.ID)
			continue
		}
		ids = append(ids, x.ID)
		c.buf = append(c.buf, Entry{ID: x.ID, Values: msgs[0].Values, Deliveries: max(x.RetryCount, 1)})
	}
	if len(lost) > 0 {
		c.buf = c.buf[:0]
		g.mu.Lock()
		g.lost = append(g.lost, lost...)
		g.mu.Unlock()
		return errclass.CursorExpired(fmt.Errorf("redis: stream %q: entries %v, %s, were removed before they were acknowledged", g.key, lost, where))
	}
	g.redelivered(ids)
	c.hold(ids)
	return nil
}

// claim claims a page of entries idle for longer than the claim idle time
// in other consumers' pending lists (XAUTOCLAIM ... JUSTID, which leaves
// their delivery counts alone), and reads them as this consumer's own.
func (c *groupConn) claim(ctx context.Context) error {
	g := c.g
	if c.claimFrom == "" {
		c.claimFrom = "0-0"
	}
	claimCmd, cmd := newOnce(ctx, "XAUTOCLAIM", g.key, g.group, g.consumer, g.cfg.claimIdle.Milliseconds(), c.claimFrom, "COUNT", g.readSize(), "JUSTID")
	_ = c.rd.Process(ctx, claimCmd)
	next, ids, deleted, err := autoClaimReply(cmd)
	if err != nil {
		return g.classify("XAUTOCLAIM", err)
	}
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
	if len(ids) == 0 {
		return nil
	}
	g.grow(len(ids))
	g.mu.Lock()
	g.member = true
	window := int64(len(g.held))
	g.mu.Unlock()
	all, err := c.rd.XPendingExt(ctx, &goredis.XPendingExtArgs{Stream: g.key, Group: g.group, Start: ids[0], End: ids[len(ids)-1],
		Count: int64(len(ids)) + window, Consumer: g.consumer}).Result()
	if err != nil {
		return g.classify("XPENDING", err)
	}
	list := make([]goredis.XPendingExt, 0, len(ids))
	for _, x := range all {
		if slices.Contains(ids, x.ID) {
			list = append(list, x)
		}
	}
	return c.fetch(ctx, list, "claimed in group "+strconv.Quote(g.group))
}

// autoClaimReply splits the reply of XAUTOCLAIM ... JUSTID.
func autoClaimReply(cmd *goredis.Cmd) (next string, ids, deleted []string, err error) {
	v, err := cmd.Slice()
	if err != nil {
		return "", nil, nil, err
	}
	if len(v) < 2 {
		return "", nil, nil, fmt.Errorf("XAUTOCLAIM replied %d elements, want 2 or 3", len(v))
	}
	next, _ = v[0].(string)
	ids = replyStrings(v[1])
	if len(v) > 2 {
		deleted = replyStrings(v[2])
	}
	return next, ids, deleted, nil
}

// replyStrings returns the strings of a reply's array.
func replyStrings(v any) []string {
	a, _ := v.([]any)
	out := make([]string, 0, len(a))
	for _, x := range a {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// readNew reads new entries: without blocking, then, when there were
// none, blocking for at most the block time. Every read is preceded by a
// look at the group's consumers (this one missing: the group was
// recreated), and, when the last full check is a block time old or before
// a blocking read, by a full check of the stream and the group.
func (c *groupConn) readNew(ctx context.Context) error {
	g := c.g
	g.mu.Lock()
	due := g.cfg.claimIdle > 0 && time.Since(g.lastClaim) >= g.cfg.claimIdle/2
	g.mu.Unlock()
	if due { // claims run on their own clock, whatever the backlog
		c.phase = phaseClaim
		return nil
	}
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
	g.mu.Lock()
	g.member = true // XREADGROUP made the consumer
	g.mu.Unlock()
	c.idle = len(msgs) == 0 && !full
	if c.idle {
		return nil // check before blocking
	}
	if len(msgs) == 0 {
		g.mu.Lock()
		g.blocking = true
		g.mu.Unlock()
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
		if len(msgs) > 0 {
			// The stream or the group may have been replaced while the
			// read blocked (Redis then serves it from the new one): check
			// them again before handing over what it returned.
			in, gi, err := g.probe(ctx, c.rd, nil)
			if err == nil {
				g.mu.Lock()
				err = g.check(in, gi)
				g.mu.Unlock()
			}
			if err != nil {
				return err
			}
		}
	}
	if len(msgs) == 0 {
		return nil
	}
	g.grow(len(msgs))
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.newest != "" && Compare(msgs[0].ID, g.newest) <= 0 {
		return fmt.Errorf("redis: group %q: delivered %s as new after %s (recreated or set back): %w", g.group, msgs[0].ID, g.newest, stream.ErrSourceChanged)
	}
	g.newest = msgs[len(msgs)-1].ID
	for _, m := range msgs {
		c.buf = append(c.buf, Entry{ID: m.ID, Values: m.Values, Deliveries: 1})
		g.held[m.ID] = struct{}{}
	}
	return nil
}

// hold notes IDs read by the connection, kept from others' claims until
// they are acknowledged.
func (c *groupConn) hold(ids []string) {
	g := c.g
	g.mu.Lock()
	for _, id := range ids {
		g.held[id] = struct{}{}
	}
	g.mu.Unlock()
}

// keep claims the entries the connection holds (read, in a handler, or
// committed and not yet acknowledged) to this consumer again every third
// of the claim idle time, with XCLAIM ... JUSTID, which resets their idle
// time and nothing else: so the claim idle time bounds only a dead
// consumer's entries, however long a handler call or the window's queue.
func (c *groupConn) keep() {
	g := c.g
	every := max(g.cfg.claimIdle/3, 10*time.Millisecond)
	t := time.NewTicker(every)
	defer t.Stop()
	var ids []string
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
		}
		ids = ids[:0]
		g.mu.Lock()
		for id := range g.held {
			ids = append(ids, id)
		}
		g.mu.Unlock()
		if len(ids) == 0 {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), every)
		args := append([]any{"XCLAIM", g.key, g.group, g.consumer, 0}, make([]any, 0, len(ids)+1)...)
		for _, id := range ids {
			args = append(args, id)
		}
		cmd, _ := newOnce(ctx, append(args, "JUSTID")...)
		_ = g.rdb.Process(ctx, cmd) // best effort: the next tick tries again
		cancel()
	}
}

// Close ends the connection and acknowledges the entries committed so far,
// trying for at most a second (what it could not acknowledge is delivered
// again, pending first, by the next connection); a read in progress ends
// at once on a *Client, within the block time otherwise. It may be called
// more than once.
func (c *groupConn) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	close(c.stop)
	c.block.cut() // a read in flight ends
	c.keeper.Wait()
	g := c.g
	g.mu.Lock()
	if g.conn == c {
		g.conn = nil
	}
	g.mu.Unlock()
	defer c.block.close()
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	var err error
	c.block.run(ctx, func(ctx context.Context) error {
		err = g.flushOn(ctx, c.rd)
		// A read that Recv began as the connection closed cuts the lane's
		// sockets when ctx ends (blocker.run), perhaps under this flush:
		// go-redis drops the socket that failed, and the next try dials.
		for try := 0; try < laneSize && errors.Is(err, net.ErrClosed) && ctx.Err() == nil; try++ {
			err = g.flushOn(ctx, c.rd)
		}
		return err
	})
	return err
}
