package main

import (
	"context"
	"testing"
	"time"

	"github.com/resumable-go/resumable/adapters/postgres/cdc"
	"github.com/resumable-go/resumable/cursor"
)

// countingStore counts the saves that reach it.
type countingStore struct {
	cursor.Store[cdc.Cursor]
	saves int
}

func (s *countingStore) Save(ctx context.Context, c cdc.Cursor) error {
	s.saves++
	return s.Store.Save(ctx, c)
}

// Keeping, the saves of rows at the position the file holds are kept back
// within 100ms of its last write; not keeping (a snapshot, whose saves the
// stream paces), every save is written: keeping as well would double what
// a kill prints again.
func TestRowSavesKeeping(t *testing.T) {
	for _, tt := range []struct {
		name      string
		keep      bool
		wantSaves int
	}{
		{name: "keeping", keep: true, wantSaves: 1},
		{name: "snapshot", keep: false, wantSaves: 4},
	} {
		t.Run(tt.name, func(t *testing.T) {
			file := &countingStore{Store: cursor.NewMemory(cdc.Cursor{})}
			s := &rowSaves{file: file}
			s.keepRows(tt.keep)
			ctx := context.Background()
			at := cdc.Cursor{LSN: 0x16B3748, Index: 0}
			if err := s.Save(ctx, at); err != nil {
				t.Fatal(err)
			}
			s.at = time.Now().Add(time.Hour) // the rows come within 100ms of the write, however slow the machine
			for row := 1; row <= 3; row++ {
				c := at
				c.Row = row
				if err := s.Save(ctx, c); err != nil {
					t.Fatal(err)
				}
			}
			if file.saves != tt.wantSaves {
				t.Errorf("file saves = %d, want %d", file.saves, tt.wantSaves)
			}
			if err := s.flush(ctx); err != nil {
				t.Fatal(err)
			}
			if got, _ := file.Load(ctx); got.Row != 3 {
				t.Errorf("after flush the file holds %v, want row 3", got)
			}
		})
	}
}
