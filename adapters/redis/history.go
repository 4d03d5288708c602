package redis

import (
	"fmt"

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
		maxDeleted: v.MaxDeletedEntryID, first: v.FirstEntry.ID}, nil
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
