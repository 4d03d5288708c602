package redis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/resumable-go/resumable/errclass"
	"github.com/resumable-go/resumable/stream"
)

// info is what XINFO STREAM told about a stream.
type info struct {
	exists     bool
	length     int64
	added      int64  // entries-added: entries ever added
	last       string // last-generated-id
	maxDeleted string // max-deleted-entry-id (XDEL; trimming does not set it)
	first      string // the first entry's ID, "" when empty
	// edges is the size of the first and last entries (IDs, fields and
	// values, in bytes): what XINFO STREAM's reply carries beside the
	// counters.
	edges int64
}

// readInfo turns XINFO STREAM's reply into an info; a missing key is no
// error.
func readInfo(key string, cmd *goredis.XInfoStreamCmd) (info, error) {
	v, err := cmd.Result()
	switch {
	case noKey(err):
		return info{}, nil
	case err != nil:
		return info{}, classify(fmt.Sprintf("XINFO STREAM %s", key), err)
	}
	return info{exists: true, length: v.Length, added: v.EntriesAdded, last: v.LastGeneratedID,
		maxDeleted: v.MaxDeletedEntryID, first: v.FirstEntry.ID, edges: size(v.FirstEntry) + size(v.LastEntry)}, nil
}

// size returns the bytes of m's ID, fields and values.
func size(m goredis.XMessage) int64 {
	n := len(m.ID)
	for k, v := range m.Values {
		n += len(k)
		if s, ok := v.(string); ok {
			n += len(s)
		}
	}
	return int64(n)
}

// infoScript replies to XINFO STREAM with only what an info holds, as one
// string: "length entries-added last-generated-id max-deleted-entry-id
// first-entry-id edges" (max-deleted-entry-id and first-entry-id empty
// where Redis before 7 lacks the field or the stream is empty;
// entries-added 0 where it lacks it; edges the bytes of the first and last
// entries); nil for a missing key, Redis's error for a key of another type.
// go-redis would parse XINFO STREAM's whole reply, the first and last
// entries with their fields included. Redis's Lua holds integers as
// doubles: counters past 2^53 would lose their last digits.
var infoScript = goredis.NewScript(`local t = redis.pcall('XINFO', 'STREAM', KEYS[1])
if t['err'] then
  if string.find(t['err'], 'no such key', 1, true) then return false end
  return t
end
local v = {}
for i = 1, #t, 2 do v[t[i]] = t[i + 1] end
local function size(e)
  if not e then return 0 end
  local n = #e[1]
  for _, s in ipairs(e[2]) do n = n + #s end
  return n
end
local first = ''
if v['first-entry'] then first = v['first-entry'][1] end
return string.format('%d %d %s %s %s %d', v['length'], v['entries-added'] or 0, v['last-generated-id'], v['max-deleted-entry-id'] or '',
  first, size(v['first-entry']) + size(v['last-entry']))`)

// An infoVia says how a stream's info is read: by infoScript (EVALSHA, or
// EVAL when the server's script cache lacks it), or by XINFO STREAM, which
// costs the server less but sends the first and last entries whole: where
// they are small (a Source's choice, read by read), or where scripts are
// refused (an ACL without EVAL, a server without scripting).
type infoVia int32

const (
	viaEvalSha infoVia = iota
	viaEval
	viaXInfo
)

// infoCmd is a read of a stream's info, queued in a pipeline.
type infoCmd struct {
	key    string
	via    infoVia
	script *goredis.Cmd
	xinfo  *goredis.XInfoStreamCmd
}

// queueInfo queues the read of key's info via via.
func queueInfo(ctx context.Context, p goredis.Pipeliner, key string, via infoVia) infoCmd {
	c := infoCmd{key: key, via: via}
	keys := []string{key}
	switch via {
	case viaEvalSha:
		c.script = infoScript.EvalSha(ctx, p, keys)
	case viaEval:
		c.script = infoScript.Eval(ctx, p, keys)
	default:
		c.xinfo = p.XInfoStream(ctx, key)
	}
	return c
}

// result returns the info read, or, when the server refused the way it
// was read, the way to read it again (the pipeline is run again with it;
// the commands in it must be idempotent): EVAL when the script was not
// in the cache (EVAL loads it), XINFO STREAM when scripts are refused.
func (c infoCmd) result() (in info, again infoVia, retry bool, err error) {
	if c.xinfo != nil {
		in, err = readInfo(c.key, c.xinfo)
		return in, 0, false, err
	}
	s, err := c.script.Text()
	switch {
	case err == nil:
	case errors.Is(err, goredis.Nil):
		return info{}, 0, false, nil
	case c.via == viaEvalSha && goredis.HasErrorPrefix(err, "NOSCRIPT"):
		return info{}, viaEval, true, nil
	case goredis.HasErrorPrefix(err, "NOPERM"), goredis.HasErrorPrefix(err, "unknown command"):
		return info{}, viaXInfo, true, nil
	default:
		return info{}, 0, false, classify("XINFO STREAM "+c.key+" (script)", err)
	}
	in, ok := parseInfo(s)
	if !ok {
		return info{}, 0, false, fmt.Errorf("redis: XINFO STREAM %s (script): reply %q: want length, entries-added, three IDs and a size", c.key, s)
	}
	return in, 0, false, nil
}

// parseInfo reads infoScript's reply.
func parseInfo(s string) (info, bool) {
	f := [6]string{}
	for i := range 5 {
		var ok bool
		if f[i], s, ok = strings.Cut(s, " "); !ok {
			return info{}, false
		}
	}
	f[5] = s
	length, err1 := strconv.ParseInt(f[0], 10, 64)
	added, err2 := strconv.ParseInt(f[1], 10, 64)
	edges, err3 := strconv.ParseInt(f[5], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return info{}, false
	}
	return info{exists: true, length: length, added: added, last: f[2], maxDeleted: f[3], first: f[4], edges: edges}, true
}

// history is what a Source or a Group saw of a stream during its life.
// Redis streams carry no identity of their own, so a stream deleted and
// added to again is told apart by its counters: in one stream's life
// entries-added, last-generated-id, max-deleted-entry-id and the first
// entry's ID never go back, and the first entry changes only when entries
// are removed (entries-added minus the length grows).
type history struct {
	key        string
	seen       bool
	added      int64
	last       string
	maxDeleted string
	first      string
	length     int64
}

// check reports an error matching stream.ErrSourceChanged when the
// stream, seen before, is missing or went back; otherwise it records in.
func (h *history) check(in info) error {
	if !in.exists {
		if h.seen {
			return fmt.Errorf("redis: stream %q: was there (entries-added %d, last-generated-id %s), now missing: %w", h.key, h.added, h.last, stream.ErrSourceChanged)
		}
		return nil
	}
	if h.seen && (in.added < h.added || Compare(in.last, h.last) < 0) {
		return fmt.Errorf("redis: stream %q: entries-added and last-generated-id were %d and %s, now %d and %s (deleted and added to again): %w",
			h.key, h.added, h.last, in.added, in.last, stream.ErrSourceChanged)
	}
	if h.seen && (Compare(in.maxDeleted, h.maxDeleted) < 0 || h.length > 0 && in.length > 0 && Compare(in.first, h.first) < 0) {
		return fmt.Errorf("redis: stream %q: max-deleted-entry-id and first entry were %s and %s, now %s and %s (deleted and added to again): %w",
			h.key, h.maxDeleted, h.first, in.maxDeleted, in.first, stream.ErrSourceChanged)
	}
	if h.seen && h.length > 0 && in.added-in.length == h.added-h.length && in.first != h.first {
		return fmt.Errorf("redis: stream %q: no entry was removed (%d removed before and now), yet the first entry was %s and is now %q (deleted and added to again): %w",
			h.key, in.added-in.length, h.first, in.first, stream.ErrSourceChanged)
	}
	h.seen, h.added, h.last, h.maxDeleted, h.first, h.length = true, in.added, in.last, in.maxDeleted, in.first, in.length
	return nil
}

// gap reports whether entries after pos were removed before they were
// read. ord is the number of entries the stream had added up to and
// including pos (0: unknown); with it a stream trimmed exactly up to pos
// loses nothing. Without it, or when entries were deleted (XDEL) among
// those present, any stream whose first entry is after pos is taken as
// trimmed past pos: Redis does not tell how many entries lay between.
func gap(in info, pos string, ord int64) bool {
	if pos == "" || !in.exists {
		return false
	}
	if in.length == 0 {
		if ord > 0 {
			return in.added > ord
		}
		return Compare(in.last, pos) > 0
	}
	if Compare(in.first, pos) <= 0 {
		return false
	}
	if ord > 0 && Compare(in.maxDeleted, in.first) < 0 {
		return in.added-in.length+1 > ord+1
	}
	return true
}

// trimmed is the Expired error for entries after pos that were trimmed.
func trimmed(key, who, pos string, in info) error {
	return errclass.CursorExpired(fmt.Errorf("redis: stream %q: entries after %s (%s) were removed before they were read: the first entry is now %q (length %d, entries-added %d)",
		key, pos, who, in.first, in.length, in.added))
}
