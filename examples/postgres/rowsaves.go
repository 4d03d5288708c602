package main

import (
	"context"
	"os"
	"sync"
	"time"

	"github.com/resumable-go/resumable/adapters/postgres/cdc"
	"github.com/resumable-go/resumable/cursor"
)

// rowSaveEvery is how often the saves of a run of snapshot rows at one
// position reach the file.
const rowSaveEvery = 100 * time.Millisecond

// rowsWriteEvery is how often a save kept back is written to the rows
// file.
const rowsWriteEvery = 10 * time.Millisecond

// rowSaves is the example's Store, over store (the cursor file with the
// rows file beside it, see fileRows, wrapped by cdc.Source.Confirming). A
// save within rowSaveEvery of the last write to the file is kept back (the
// next save writes it, or flush), when it is a snapshot row's at the
// position the file holds (the rows of a chunk, or of a backfill, share a
// position: an fsync per 100 ms, not one per row) or, while anyWithin is
// set (a snapshot under way, whose changes the stream saves every 10 ms),
// any save. A save kept back is also written, at most every 10 ms, to the
// rows file without an fsync: a killed process's writes survive it, so a
// restart goes on from there and prints again the events of the last 10
// ms, not of the last 100 ms. Only the file's writes pass through
// Confirming: the server is told nothing the file does not hold.
type rowSaves struct {
	store cursor.Store[cdc.Cursor]
	rowsf string // the rows file's path; empty: none

	mu        sync.Mutex
	written   cdc.Cursor // what the file holds
	at        time.Time  // when it was written
	kept      cdc.Cursor // a save not written yet, when keeping
	keeping   bool
	anyWithin bool      // keep back any save within rowSaveEvery (set by keepAny)
	rows      *os.File  // the rows file, once opened
	rowsAt    time.Time // when it was written last
}

// fileRows is the cursor file and the rows file beside it. Load returns
// the rows file's cursor when it is one whole cursor of the same stream
// (system, timeline, slot) as the file's, which is not empty, and
// further: a machine crash can lose the rows file or tear it, never move
// the stream to another history.
type fileRows struct {
	file cursor.Store[cdc.Cursor]
	path string
}

func (f fileRows) Load(ctx context.Context) (cdc.Cursor, error) {
	c, err := f.file.Load(ctx)
	if err != nil || c.LSN == 0 {
		return c, err
	}
	if r, ok := readRows(f.path); ok && r.System == c.System && r.Timeline == c.Timeline && r.Slot == c.Slot && cdc.Compare(r, c) > 0 {
		return r, nil
	}
	return c, nil
}

func (f fileRows) Save(ctx context.Context, c cdc.Cursor) error { return f.file.Save(ctx, c) }

// rowsCodec encodes the rows file.
var rowsCodec = cursor.JSON[cdc.Cursor]()

// keepAny says whether any save within rowSaveEvery of the file's last
// write is kept back, or only rows' saves at its position.
func (s *rowSaves) keepAny(any bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.anyWithin = any
}

func (s *rowSaves) Load(ctx context.Context) (cdc.Cursor, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.keeping {
		return s.kept, nil
	}
	c, err := s.store.Load(ctx)
	if err == nil {
		s.written, s.at = c, time.Time{} // the next save writes the file
	}
	return c, err
}

func (s *rowSaves) Save(ctx context.Context, c cdc.Cursor) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if now.Sub(s.at) < rowSaveEvery && (s.anyWithin || c.Row > 0 && samePlace(c, s.written)) {
		s.kept, s.keeping = c, true
		if now.Sub(s.rowsAt) < rowsWriteEvery {
			return nil
		}
		s.rowsAt = now
		return s.writeRows(c)
	}
	if err := s.store.Save(ctx, c); err != nil {
		return err
	}
	s.written, s.at, s.keeping = c, now, false
	return nil
}

// samePlace reports whether a and b are at one position of one stream.
func samePlace(a, b cdc.Cursor) bool {
	return a.LSN == b.LSN && a.Index == b.Index && a.System == b.System && a.Timeline == b.Timeline && a.Slot == b.Slot
}

// writeRows writes c to the rows file, over what it held. A kill between
// the write and the truncation leaves a longer file that does not decode.
func (s *rowSaves) writeRows(c cdc.Cursor) error {
	if s.rowsf == "" {
		return nil
	}
	if s.rows == nil {
		f, err := os.OpenFile(s.rowsf, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return err
		}
		s.rows = f
	}
	data, err := rowsCodec.Encode(c)
	if err != nil {
		return err
	}
	if _, err := s.rows.WriteAt(data, 0); err != nil {
		return err
	}
	return s.rows.Truncate(int64(len(data)))
}

// readRows returns the cursor the rows file at path holds, when it holds
// one whole.
func readRows(path string) (cdc.Cursor, bool) {
	if path == "" {
		return cdc.Cursor{}, false
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return cdc.Cursor{}, false
	}
	c, err := rowsCodec.Decode(data)
	return c, err == nil
}

// flush writes a save kept back, if any, and closes the rows file.
func (s *rowSaves) flush(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rows != nil {
		_ = s.rows.Close()
		s.rows = nil
	}
	if !s.keeping {
		return nil
	}
	if err := s.store.Save(ctx, s.kept); err != nil {
		return err
	}
	s.written, s.at, s.keeping = s.kept, time.Now(), false
	return nil
}
