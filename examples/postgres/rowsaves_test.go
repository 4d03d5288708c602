package main

import (
	"context"
	"os"
	"path/filepath"
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

// at is the position of the rows the tests save.
var at = cdc.Cursor{LSN: 0x16B3748, Index: -1, System: "7301", Timeline: 1, Slot: "s"}

// row returns the cursor after the n-th row at at.
func row(n int) cdc.Cursor {
	c := at
	c.Row = n
	return c
}

// saveRows saves at, then rows 1 to n, as within 100ms of the file's
// write however slow the machine, each due for the rows file.
func saveRows(t *testing.T, s *rowSaves, n int) {
	t.Helper()
	ctx := context.Background()
	if err := s.Save(ctx, at); err != nil {
		t.Fatal(err)
	}
	s.at = time.Now().Add(time.Hour)
	for i := 1; i <= n; i++ {
		s.rowsAt = time.Time{}
		if err := s.Save(ctx, row(i)); err != nil {
			t.Fatal(err)
		}
	}
}

// The saves of rows at the position the file holds are kept back within
// 100ms of its last write; flush writes the last.
func TestRowSavesKeeping(t *testing.T) {
	file := &countingStore{Store: cursor.NewMemory(cdc.Cursor{})}
	s := &rowSaves{store: file}
	saveRows(t, s, 3)
	if file.saves != 1 {
		t.Errorf("file saves = %d, want 1", file.saves)
	}
	ctx := context.Background()
	if err := s.flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := file.Load(ctx); got != row(3) {
		t.Errorf("after flush the file holds %v, want %v", got, row(3))
	}
}

// A killed process's kept save is in the rows file, and the next process
// goes on from it; a rows file that is torn, behind the file, or of
// another stream, is not taken.
func TestRowSavesRowsFile(t *testing.T) {
	for _, tt := range []struct {
		name    string
		anyKept bool // a change's save kept too (a snapshot under way)
		spoil   func(t *testing.T, path string, file cursor.Store[cdc.Cursor])
		want    cdc.Cursor
	}{
		{name: "kept", want: row(3)},
		{name: "a change kept", anyKept: true, want: change},
		{
			name: "torn",
			spoil: func(t *testing.T, path string, _ cursor.Store[cdc.Cursor]) {
				f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				if _, err := f.WriteString(`"row":9}`); err != nil { // a longer cursor's tail
					t.Fatal(err)
				}
			},
			want: at,
		},
		{
			name: "behind the file",
			spoil: func(t *testing.T, _ string, file cursor.Store[cdc.Cursor]) {
				if err := file.Save(context.Background(), row(5)); err != nil {
					t.Fatal(err)
				}
			},
			want: row(5),
		},
		{
			name: "another stream",
			spoil: func(t *testing.T, _ string, file cursor.Store[cdc.Cursor]) {
				other := at
				other.Slot = "t"
				if err := file.Save(context.Background(), other); err != nil {
					t.Fatal(err)
				}
			},
			want: cdc.Cursor{LSN: at.LSN, Index: -1, System: "7301", Timeline: 1, Slot: "t"},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "state.rows")
			file := cursor.NewMemory(cdc.Cursor{})
			killed := &rowSaves{store: fileRows{file: file, path: path}, rowsf: path}
			killed.keepAny(tt.anyKept)
			saveRows(t, killed, 3)
			if tt.anyKept {
				killed.rowsAt = time.Time{}
				if err := killed.Save(context.Background(), change); err != nil {
					t.Fatal(err)
				}
			}
			killed.rows.Close() // and no flush: killed
			if tt.spoil != nil {
				tt.spoil(t, path, file)
			}
			got, err := fileRows{file: file, path: path}.Load(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("Load() = %v, want %v", got, tt.want)
			}
		})
	}
}

// change is the cursor of a change after the rows at at.
var change = cdc.Cursor{LSN: at.LSN + 0x100, Index: 0, System: "7301", Timeline: 1, Slot: "s"}
