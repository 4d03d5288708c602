package fsync_test

import (
	"errors"
	"io/fs"
	"path/filepath"
	"testing"

	"github.com/resumable-go/resumable/internal/fsync"
)

func TestDir(t *testing.T) {
	dir := t.TempDir()
	if err := fsync.Dir(dir); err != nil {
		t.Errorf("Dir(%q) = %v, want nil", dir, err)
	}
	missing := filepath.Join(dir, "missing")
	if err := fsync.Dir(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Dir(%q) = %v, want %v", missing, err, fs.ErrNotExist)
	}
}
