package redis

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/errclass"
	"github.com/resumable-go/resumable/internal/badarg"
	"github.com/resumable-go/resumable/stream"
)

// errClosed is what Recv returns on a Conn that was closed.
var errClosed = errors.New("redis: connection closed")

// Source is a [stream.Source] of one Redis stream's entries for a single
// reader (XREAD): the cursor is the ID of the last entry handled, kept in
// any cursor.Store. Make one with [NewSource]; it serves one Resumer at a
// time and starts no goroutine.
//
// A read after an entry the Source read asks for that entry too (the
// anchor: XREAD from the ID just before it, one command); found with the
// fields and values it had, it shows that the stream is the one read so
// far. Otherwise, at least once a block time, and for a blocking read
// that returned entries (after it, before they are handed over), the
// read comes with the full look at the stream's identity (XINFO STREAM
// while the stream's first and last entries are small, 4 KiB together;
// otherwise a Lua script that calls it and returns only the fields the
// check needs, unless scripts are refused).
// A read fails with an error matching stream.ErrSourceChanged when the
// stream, seen before or named by a cursor, is missing or went back
// (deleted and added to again), and with an errclass.Expired error when
// entries after the cursor were trimmed before they were read (see
// docs/redis.md).
type Source struct {
	rdb goredis.UniversalClient
	key string
	cfg config
	via atomic.Int32 // an infoVia: how the script is run, or viaXInfo where scripts are refused
	// xinfo is set while the last look at the stream's info found its first
	// and last entries within edgeLimit bytes: the next look is XINFO
	// STREAM itself, which costs the server a fifth of the script.
	xinfo     atomic.Bool
	edgeLimit int64

	mu   sync.Mutex
	hist history
	pos  string // the last entry read
	ord  int64  // entries added up to and including pos; 0: unknown
	// ordAt is the position at which ord was last known exact: counting
	// the entries read from there is exact while no entry after it was
	// deleted (max-deleted-entry-id).
	ordAt string
	// anchor is pos's entry as the Source read it: the next read asks for
	// it again and finds it unchanged (anchored). Zero when pos is no
	// entry this Source read.
	anchor anchor
	seed   maphash.Seed // of the anchors' fingerprints
	// noAnchor makes every read come with the full check (the tests of
	// the check's ways).
	noAnchor bool
	// resynced is the cursor the last resync returned: it covers what lay
	// before it, so Open does not look for a gap behind it.
	resynced string
	// doubted is set by a failed read, whose reply may have been too
	// large to arrive within the client's read timeout: connections start
	// with reads of one entry until a read of WithCount's size came back.
	doubted bool
}

var _ stream.Source[Entry, string] = (*Source)(nil)

// NewSource returns a Source over the stream key of rdb (a *Client,
// *ClusterClient or *Ring of go-redis v9). Every argument is checked at
// once: a nil client, an empty key, a bad option or an option of a Group
// (WithClaimIdle, WithMaxDeliveries) each add an error matching
// stream.ErrInvalidOption that names the argument, all joined.
func NewSource(rdb goredis.UniversalClient, key string, opts ...Option) (*Source, error) {
	var errs []error
	if isNil(rdb) {
		errs = append(errs, badarg.New("redis: NewSource", "rdb", rdb, "required"))
	}
	if key == "" {
		errs = append(errs, badarg.New("redis: NewSource", "key", key, "must not be empty"))
	}
	cfg := newConfig(opts)
	for _, o := range cfg.groupOnly {
		errs = append(errs, badarg.New("redis: NewSource", o.name, o.value, "an option of a Group, not of a Source"))
	}
	if errs = append(errs, cfg.errs...); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return &Source{rdb: rdb, key: key, cfg: cfg, hist: history{key: key}, edgeLimit: edgeLimit, seed: maphash.MakeSeed()}, nil
}

// NewResumer returns a [stream.Resumer] over src with its cursor in store
// (any cursor.Store: a file, etcd's fenced store, PostgreSQL's). It sets
// these defaults, which opts, coming after them, may change:
//   - [Extract] as the extractor and [Compare] as the cursor order
//     (stream.WithCursorOrder: a cursor that goes back fails Run);
//   - a resync hook (stream.WithHooks, added to the caller's) that tells
//     src the cursor a resync (stream.WithResync) returned: the stream
//     goes on after it, taken as covering every entry before it;
//   - saves at most every 100ms (stream.WithCheckpointInterval; a stream
//     gone quiet is saved once the interval has passed, and Run's end
//     saves): a save per entry costs an fsync with a cursor.File. After a
//     crash the entries handled since the last save are delivered again,
//     as any entry not yet saved is; stream.WithCheckpointEvery(1) with
//     stream.WithCheckpointInterval(0) saves after every entry.
//
// A fresh store (the empty cursor) reads from the stream's first entry.
// A nil src or store each add an error matching stream.ErrInvalidOption,
// joined; opts are then checked by stream.New.
func NewResumer(src *Source, store cursor.Store[string], opts ...stream.Option) (*stream.Resumer[Entry, string], error) {
	var errs []error
	if src == nil {
		errs = append(errs, badarg.New("redis: NewResumer", "src", src, "required"))
	}
	if isNil(store) {
		errs = append(errs, badarg.New("redis: NewResumer", "store", store, "required"))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	base := []stream.Option{stream.WithCursorOrder(Compare), stream.WithHooks(stream.Hooks[string]{OnResync: src.onResync}),
		stream.WithCheckpointInterval(defaultCheckpoint)}
	return stream.New(src, Extract, store, append(base, opts...)...)
}

// isNil reports whether v is nil or holds a nil pointer (a typed nil
// client or store would fail only at its first use).
func isNil(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan, reflect.Interface:
		return rv.IsNil()
	}
	return false
}

func (s *Source) onResync(ev stream.ResyncEvent[string]) {
	s.mu.Lock()
	s.resynced = ev.To
	s.mu.Unlock()
}

// Open returns a connection that delivers the entries after after (from
// the first entry when after is empty). A non-empty after that is not an
// entry ID is errclass.Permanent; a stream missing, whose
// last-generated-id is before after, or of which after is no entry and
// cannot have been removed (nothing was ever removed, or after lies among
// the entries present and none was deleted), is stream.ErrSourceChanged.
func (s *Source) Open(ctx context.Context, after string) (stream.Conn[Entry], error) {
	if after != "" && !validID(after) {
		return nil, errclass.Permanent(fmt.Errorf("redis: stream %q: cursor %q is not an entry ID", s.key, after))
	}
	var atCmd *goredis.XMessageSliceCmd
	in, err := s.withInfo(ctx, s.rdb, func(p goredis.Pipeliner) {
		if after != "" {
			atCmd = p.XRangeN(ctx, s.key, after, after, 1)
		}
	})
	if err != nil {
		return nil, err
	}
	var at []goredis.XMessage
	if atCmd != nil && in.exists {
		if at, err = atCmd.Result(); err != nil {
			return nil, classify("XRANGE "+s.key, err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if after != "" && !in.exists {
		return nil, fmt.Errorf("redis: stream %q: was there at cursor %s, now missing: %w", s.key, after, stream.ErrSourceChanged)
	}
	if in.exists && Compare(in.last, after) < 0 {
		return nil, fmt.Errorf("redis: stream %q: last-generated-id %s is before the cursor %s: %w", s.key, in.last, after, stream.ErrSourceChanged)
	}
	if in.exists && after != "" && after != s.resynced && len(at) == 0 && in.length > 0 && Compare(in.maxDeleted, after) < 0 &&
		(in.added == in.length || Compare(in.first, after) <= 0) {
		// The cursor is no entry of this stream, and was not removed
		// from it: none was (its first entry is its first ever), or it
		// would lie among the entries present and none of those was
		// deleted.
		return nil, fmt.Errorf("redis: stream %q: the cursor %s is no entry of it, and was not removed (first entry %s, entries-added %d, length %d, max-deleted-entry-id %s): %w",
			s.key, after, in.first, in.added, in.length, in.maxDeleted, stream.ErrSourceChanged)
	}
	if err := s.hist.check(in); err != nil {
		return nil, err
	}
	if after != s.pos {
		s.pos, s.ord, s.anchor = after, 0, anchor{}
	}
	s.exact(in, s.pos)
	if after != s.resynced && gap(in, s.pos, s.ord) {
		return nil, trimmed(s.key, "the cursor", after, in)
	}
	count := s.cfg.count
	if s.doubted {
		count = 1
	}
	return &sourceConn{src: s, count: count, block: newBlocker(s.rdb)}, nil
}

// The reads of a Source without WithCount grow through a backlog, up to
// these bounds.
const (
	maxCount  = 1000    // entries a read asks for at most
	readBytes = 1 << 20 // the size of a read's entries a larger COUNT keeps under
)

// sourceConn is one connection of a Source: it reads from the Source's
// position on.
type sourceConn struct {
	src    *Source
	buf    []goredis.XMessage // the last read's entries, go-redis's own
	next   int
	count  int64 // the next read's COUNT
	block  *blocker
	probed time.Time // the last full check of the stream
	mu     sync.Mutex
	closed bool
}

// anchor is an entry a Source read: its ID, and the fingerprint of its
// fields and values.
type anchor struct {
	id  string
	sum uint64
}

// Recv returns the next entry, reading a batch when none is left (fill).
func (c *sourceConn) Recv(ctx context.Context) (Entry, error) {
	for {
		if c.next < len(c.buf) {
			// Cleared as handed over, so that the GC's marks do not
			// keep walking the entries handled (holding the batch to the
			// next read cost 10% of the connection's throughput).
			m := c.buf[c.next]
			c.buf[c.next] = goredis.XMessage{}
			c.next++
			return Entry{ID: m.ID, Values: m.Values}, nil
		}
		if c.isClosed() {
			return Entry{}, errClosed
		}
		if err := ctx.Err(); err != nil {
			return Entry{}, err
		}
		var err error
		c.block.run(ctx, func(ctx context.Context) error {
			err = c.fill(ctx)
			return err
		})
		if err != nil {
			if ctx.Err() != nil {
				return Entry{}, ctx.Err()
			}
			c.src.doubt()
			return Entry{}, err
		}
	}
}

func (c *sourceConn) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// fill reads the next batch into buf: anchored when it can, otherwise (and
// once a block time) with the full check in the same round trip; when
// that finds nothing, a blocking read, checked again before what it
// returned is handed over.
func (c *sourceConn) fill(ctx context.Context) error {
	s := c.src
	s.mu.Lock()
	pos, at, ord := s.pos, s.anchor, s.ord
	s.mu.Unlock()
	from := pos
	if from == "" {
		from = "0-0"
	}
	rd := c.block.via()
	var msgs []goredis.XMessage
	var in info // the full check's, when the read made one
	ok := false
	if !s.noAnchor && time.Since(c.probed) < s.cfg.block {
		var err error
		if msgs, ok, err = c.anchored(ctx, rd, pos, at); err != nil {
			return err
		}
	}
	// Caught up, the reader learns its place before it blocks (the full
	// check: entries-added, pos being the last entry), unless it knows it.
	count := c.count // of this read
	if !ok || len(msgs) == 0 && ord == 0 {
		if c.probed.IsZero() {
			// A connection's first read hands over one entry, the
			// anchor of the next: each read then starts where a plain
			// reader's at COUNT count would (docs/redis.md: reads in
			// strides).
			count = 1
		}
		var readCmd *goredis.XStreamSliceCmd
		var err error
		in, err = s.withInfo(ctx, rd, func(p goredis.Pipeliner) {
			readCmd = p.XRead(ctx, &goredis.XReadArgs{Streams: []string{s.key, from}, Count: count, Block: -1})
		})
		if err != nil {
			return err
		}
		if err := c.check(in, pos); err != nil {
			return err
		}
		c.probed = time.Now()
		if msgs, err = messages(readCmd); err != nil {
			return classify("XREAD "+s.key, err)
		}
	}
	if len(msgs) == 0 {
		count = c.count
		p := rd.Pipeline() // made, not run: XRead carries the read timeout for BLOCK
		cmd := p.XRead(ctx, &goredis.XReadArgs{Streams: []string{s.key, from}, Count: count, Block: s.cfg.block})
		p.Discard()
		c.block.read(ctx, cmd)
		var err error
		msgs, err = messages(cmd)
		if err != nil {
			return classify("XREAD "+s.key, err)
		}
		if len(msgs) > 0 {
			// The stream may have been replaced while the read blocked:
			// check it again before handing over what it returned.
			if in, err = s.withInfo(ctx, rd, nil); err != nil {
				return err
			}
			if err := c.check(in, pos); err != nil {
				return err
			}
			c.probed = time.Now()
		}
	}
	c.buf, c.next = msgs, 0
	if count == c.count {
		c.count = s.nextRead(c.count, msgs)
	}
	if len(msgs) > 0 {
		last := msgs[len(msgs)-1]
		var sum uint64
		ok := size(last) <= anchorLimit
		if ok {
			sum, ok = fingerprint(s.seed, last)
		}
		s.mu.Lock()
		switch {
		case last.ID == in.last: // the stream's last entry: its place is entries-added
			s.ord, s.ordAt = in.added, last.ID
		case s.ord > 0:
			s.ord += int64(len(msgs))
		}
		s.pos = last.ID
		s.anchor = anchor{}
		if ok {
			s.anchor = anchor{id: last.ID, sum: sum}
		}
		s.mu.Unlock()
	}
	return nil
}

// anchored reads the entries after pos with pos's own entry first (XREAD
// from the ID just before it), in one command, when the Source read that
// entry (a is its anchor): found with the fields and values it had, it
// shows that the stream is the one read so far. ok is false when there is
// no anchor, or it is gone (trimmed, deleted, the stream replaced): the
// read is then made again with the full check. The anchor's ID with other
// fields and values is a replaced stream (entries never change in place).
func (c *sourceConn) anchored(ctx context.Context, rd goredis.Cmdable, pos string, a anchor) (msgs []goredis.XMessage, ok bool, err error) {
	s := c.src
	if pos == "" || a.id != pos {
		return nil, false, nil
	}
	from, ok := before(pos)
	if !ok {
		return nil, false, nil
	}
	msgs, err = messages(rd.XRead(ctx, &goredis.XReadArgs{Streams: []string{s.key, from}, Count: c.count + 1, Block: -1}))
	switch {
	case err != nil:
		return nil, false, classify("XREAD "+s.key, err)
	case len(msgs) == 0 || msgs[0].ID != pos:
		return nil, false, nil
	}
	if sum, ok := fingerprint(s.seed, msgs[0]); !ok || sum != a.sum {
		return nil, false, fmt.Errorf("redis: stream %q: the entry %s, read before, is there with other fields and values (deleted and added to again): %w",
			s.key, pos, stream.ErrSourceChanged)
	}
	msgs[0] = goredis.XMessage{}
	return msgs[1:], true, nil
}

// doubt makes the next connections start with reads of one entry, after
// a failed read.
func (s *Source) doubt() {
	s.mu.Lock()
	s.doubted = true
	s.mu.Unlock()
}

// nextRead returns the COUNT of the read after one that asked for count
// and returned msgs: after a failed read, twice as many after each full
// read up to WithCount's (or the default) size, which ends the doubt;
// then WithCount's, or nextCount's without it.
func (s *Source) nextRead(count int64, msgs []goredis.XMessage) int64 {
	if count < s.cfg.count {
		if int64(len(msgs)) < count {
			return count
		}
		if count = min(2*count, s.cfg.count); count == s.cfg.count {
			s.mu.Lock()
			s.doubted = false
			s.mu.Unlock()
		}
		return count
	}
	if s.cfg.countSet {
		return count
	}
	return nextCount(count, msgs)
}

// anchorLimit is the size of an entry (ID, fields and values) up to which
// a Source anchors its next read on it: each anchored read carries the
// entry again. After a larger one the read comes with the full check.
const anchorLimit = 4 << 10

// edgeLimit is the size of a stream's first and last entries together up
// to which a Source reads the stream's info with XINFO STREAM rather than
// with the script: parsing that much more costs the client about what the
// script costs the server more (docs/redis.md, Measured).
const edgeLimit = 4 << 10

// nextCount returns the COUNT of the read after one that asked for count
// and returned msgs, for a Source without WithCount: twice as many after a
// full read, up to maxCount and as many entries as fit in readBytes, when
// each is as large as the largest of 16 spread over msgs (summing them all
// cost 10% of the Source's time); the default after a short read.
func nextCount(count int64, msgs []goredis.XMessage) int64 {
	if n := int64(len(msgs)); n < count || n == 0 {
		return defaultCount
	}
	var most int64
	step := max(len(msgs)/16, 1)
	for i := len(msgs) - 1; i >= 0; i -= step {
		most = max(most, size(msgs[i]))
	}
	return max(defaultCount, min(2*count, maxCount, readBytes/max(most, 1)))
}

// withInfo reads the stream's info and runs the commands more queues
// (none when nil) after it, in one round trip through rd; when the server
// refused the script, the round trip is made again another way, so the
// commands must be idempotent. The commands' errors are left to the
// caller.
func (s *Source) withInfo(ctx context.Context, rd goredis.Cmdable, more func(goredis.Pipeliner)) (info, error) {
	for {
		via := infoVia(s.via.Load())
		if s.xinfo.Load() {
			via = viaXInfo
		}
		var cmd infoCmd
		_, _ = rd.Pipelined(ctx, func(p goredis.Pipeliner) error {
			cmd = queueInfo(ctx, p, s.key, via)
			if more != nil {
				more(p)
			}
			return nil
		})
		in, again, retry, err := cmd.result()
		if !retry {
			if cmd.via == viaEval && err == nil { // EVAL loaded the script
				s.via.CompareAndSwap(int32(viaEval), int32(viaEvalSha))
			}
			// After a failure, the script: its reply's size does not
			// depend on the entries'.
			s.xinfo.Store(err == nil && in.edges <= s.edgeLimit)
			return in, err
		}
		s.via.Store(int32(again))
	}
}

// check compares what XINFO said with the Source's history and position,
// and learns the position's ordinal when it is the stream's last entry.
func (c *sourceConn) check(in info, pos string) error {
	s := c.src
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.hist.check(in); err != nil {
		return err
	}
	s.exact(in, pos)
	if pos != s.resynced && gap(in, pos, s.ord) {
		return trimmed(s.key, "the reader's position", pos, in)
	}
	return nil
}

// exact keeps ord, pos's place among the entries ever added, exact by
// what the stream's info in says: it learns it when pos is the last entry,
// and forgets it when an entry after ordAt was deleted (entries counted
// as read no longer give it); otherwise ord is exact up to pos. s.mu is
// held.
func (s *Source) exact(in info, pos string) {
	switch {
	case in.exists && pos != "" && pos == in.last:
		s.ord, s.ordAt = in.added, pos
	case s.ord > 0 && Compare(in.maxDeleted, s.ordAt) > 0:
		s.ord = 0
	case s.ord > 0:
		s.ordAt = pos
	}
}

// messages returns the entries of a one-stream XREAD or XREADGROUP reply;
// none when it timed out.
func messages(cmd *goredis.XStreamSliceCmd) ([]goredis.XMessage, error) {
	res, err := cmd.Result()
	if errors.Is(err, goredis.Nil) {
		return nil, nil
	}
	if err != nil || len(res) == 0 {
		return nil, err
	}
	return res[0].Messages, nil
}

// Close ends the connection; a read in progress ends at once on a
// *Client, within the block time otherwise. It may be called more than
// once.
func (c *sourceConn) Close() error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.block.close()
	return nil
}
