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

// rowSaves is the example's Store: the file, except that a snapshot row's
// save at the position (LSN and index) the file already holds, within
// rowSaveEvery of the last write, is kept back: the next save writes it
// (or flush). The rows of a chunk (or of the first pass) share a position,
// so they cost an fsync per 100 ms, not one per row, and the server is
// told nothing the file does not hold (the position is the file's).
//
// A save kept back is also written, at most every 10 ms, to a second file
// (the rows file, state + ".rows") without an fsync: a killed process's
// writes survive it, so a restart goes on from there and prints again the
// rows of the last 10 ms, not of the last 100 ms. Load takes it only when
// it is one whole cursor at the position the file holds and further: a
// machine crash can lose it or leave it torn, never move the stream to a
// position the server was not told. Changes are saved as the stream says.
type rowSaves struct {
	file  cursor.Store[cdc.Cursor]
	rowsf string // the rows file's path; empty: none

	mu      sync.Mutex
	written cdc.Cursor // what the file holds
	at      time.Time  // when it was written
	kept    cdc.Cursor // a save not written yet, when keeping
	keeping bool
	rows    *os.File  // the rows file, once opened
	rowsAt  time.Time // when it was written last
}

// rowsCodec encodes the rows file.
var rowsCodec = cursor.JSON[cdc.Cursor]()

func (s *rowSaves) Load(ctx context.Context) (cdc.Cursor, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.keeping {
		return s.kept, nil
	}
	c, err := s.file.Load(ctx)
	if err != nil {
		return c, err
	}
	s.written = c
	if r, ok := s.readRows(); ok && samePlace(r, c) && cdc.Compare(r, c) > 0 {
		s.kept, s.keeping = r, true
		return r, nil
	}
	return c, nil
}

func (s *rowSaves) Save(ctx context.Context, c cdc.Cursor) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if c.Row > 0 && samePlace(c, s.written) && now.Sub(s.at) < rowSaveEvery {
		s.kept, s.keeping = c, true
		if now.Sub(s.rowsAt) < rowsWriteEvery {
			return nil
		}
		s.rowsAt = now
		return s.writeRows(c)
	}
	if err := s.file.Save(ctx, c); err != nil {
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

// readRows returns the cursor the rows file holds, when it holds one whole.
func (s *rowSaves) readRows() (cdc.Cursor, bool) {
	if s.rowsf == "" {
		return cdc.Cursor{}, false
	}
	data, err := os.ReadFile(s.rowsf)
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
	if err := s.file.Save(ctx, s.kept); err != nil {
		return err
	}
	s.written, s.at, s.keeping = s.kept, time.Now(), false
	return nil
}
