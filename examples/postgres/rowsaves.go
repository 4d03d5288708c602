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

// rowSaves is the example's Store: the file, except that a snapshot row's
// save at the position (LSN and index) the file already holds, within
// rowSaveEvery of the last write, is only kept: the next save writes it
// (or flush). The rows of a snapshot's first pass, or of one chunk, share
// a position, so a snapshot costs an fsync per 100 ms, not one per row,
// and the server is told nothing the file does not hold (the position is
// the file's). A kill prints again the rows of the last 100 ms at most.
// Changes are saved as the stream says (after every one by default).
type rowSaves struct {
	file cursor.Store[cdc.Cursor]

	mu      sync.Mutex
	written cdc.Cursor // what the file holds
	at      time.Time  // when it was written
	kept    cdc.Cursor // a save not written yet, when keeping
	keeping bool
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
	if c.Row > 0 && c.LSN == s.written.LSN && c.Index == s.written.Index && now.Sub(s.at) < rowSaveEvery {
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
