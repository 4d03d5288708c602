package main

import (
	"context"
	"sync"
	"time"

	"github.com/resumable-go/resumable/adapters/postgres/cdc"
	"github.com/resumable-go/resumable/cursor"
)

// rowSaveEvery is how often the saves of a run of snapshot rows at one
// position reach the file.
const rowSaveEvery = 100 * time.Millisecond

// rowSaves is the example's Store: the file, except that, while keeping
// (see keepRows), a snapshot row's save at the position (LSN and index) the
// file already holds, within rowSaveEvery of the last write, is only kept:
// the next save writes it (or flush). The rows of a backfill's chunk share
// a position, so they cost an fsync per 100 ms, not one per row, and the
// server is told nothing the file does not hold (the position is the
// file's). A kill prints again the rows of the last 100 ms at most. While
// a snapshot is under way the stream itself saves every 100 ms, and every
// save is written: keeping as well would double what a kill prints again.
// Changes are saved as the stream says (after every one by default).
type rowSaves struct {
	file cursor.Store[cdc.Cursor]

	mu      sync.Mutex
	written cdc.Cursor // what the file holds
	at      time.Time  // when it was written
	kept    cdc.Cursor // a save not written yet, when keeping
	keeping bool
	keep    bool // keep rows' saves back (set by keepRows)
}

// keepRows says whether saves of snapshot rows are kept back; a save kept
// already is kept until the next save or flush.
func (s *rowSaves) keepRows(keep bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keep = keep
}

func (s *rowSaves) Load(ctx context.Context) (cdc.Cursor, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.keeping {
		return s.kept, nil
	}
	c, err := s.file.Load(ctx)
	if err == nil {
		s.written = c
	}
	return c, err
}

func (s *rowSaves) Save(ctx context.Context, c cdc.Cursor) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if s.keep && c.Row > 0 && c.LSN == s.written.LSN && c.Index == s.written.Index && now.Sub(s.at) < rowSaveEvery {
		s.kept, s.keeping = c, true
		return nil
	}
	if err := s.file.Save(ctx, c); err != nil {
		return err
	}
	s.written, s.at, s.keeping = c, now, false
	return nil
}

// flush writes a save kept back, if any.
func (s *rowSaves) flush(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.keeping {
		return nil
	}
	if err := s.file.Save(ctx, s.kept); err != nil {
		return err
	}
	s.written, s.at, s.keeping = s.kept, time.Now(), false
	return nil
}
