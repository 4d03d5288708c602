package cursor_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/resumable-go/resumable/cursor"
)

// symlink makes link point to target, or skips the test where the system
// cannot.
func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Skipf("no symbolic links: %v", err)
	}
}

// checkLink fails the test unless link is still a symbolic link to target.
func checkLink(t *testing.T, link, target string) {
	t.Helper()
	got, err := os.Readlink(link)
	if err != nil || got != target {
		t.Errorf("Readlink(%q) = %q, %v, want %q, nil: the link was replaced", link, got, err, target)
	}
}

// TestFileDanglingLink checks that a cursor path that is a symbolic link
// to nothing (the mount point of a volume that failed to mount) is an
// error naming the link and its target, never a first run, whether the
// link dangles when NewFile is called or later.
func TestFileDanglingLink(t *testing.T) {
	t.Run("at NewFile", func(t *testing.T) {
		dir := t.TempDir()
		target := filepath.Join(dir, "volume", "cursor") // not mounted: does not exist
		link := filepath.Join(dir, "cursor")
		symlink(t, target, link)
		_, err := cursor.NewFile(link, int64(7), cursor.Int64())
		checkFileError(t, "NewFile()", err, fileErr{Op: "new", Path: link, Permanent: true, Cause: fs.ErrNotExist})
		checkMessage(t, "NewFile()", err, link, target)
	})
	t.Run("after NewFile", func(t *testing.T) {
		dir := t.TempDir()
		volume := filepath.Join(dir, "volume") // mounted at NewFile, gone at Load and Save
		if err := os.Mkdir(volume, 0o755); err != nil {
			t.Fatal(err)
		}
		target := filepath.Join(volume, "cursor")
		writeFile(t, target, "5\n")
		link := filepath.Join(dir, "cursor")
		symlink(t, target, link)
		f := mustNewFile(t, link, int64(7), cursor.Int64())
		if err := os.RemoveAll(volume); err != nil {
			t.Fatal(err)
		}
		for range 2 { // the error stays: no Load or Save turns it into a first run
			_, err := f.Load(context.Background())
			checkFileError(t, "Load()", err, fileErr{Op: "load", Path: link, Permanent: true, Cause: fs.ErrNotExist})
			checkMessage(t, "Load()", err, link, target)
			err = f.Save(context.Background(), 8)
			checkFileError(t, "Save(8)", err, fileErr{Op: "save", Path: link, Permanent: true, Cause: fs.ErrNotExist})
			checkMessage(t, "Save(8)", err, link, target)
			checkLink(t, link, target)
		}
		checkNoTempFiles(t, dir)
	})
}

// TestFileSaveThroughLink checks that Save through a symbolic link
// replaces the file the link leads to, in the target's directory, and
// keeps the link.
func TestFileSaveThroughLink(t *testing.T) {
	tests := []struct {
		name   string
		target func(volume string) string // what the link holds
	}{
		{name: "absolute target", target: func(volume string) string { return filepath.Join(volume, "cursor") }},
		{name: "relative target", target: func(string) string { return filepath.Join("volume", "cursor") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			volume := filepath.Join(dir, "volume")
			if err := os.Mkdir(volume, 0o755); err != nil {
				t.Fatal(err)
			}
			file := filepath.Join(volume, "cursor")
			writeFile(t, file, "1\n")
			link := filepath.Join(dir, "cursor")
			target := tt.target(volume)
			symlink(t, target, link)

			f := mustNewFile(t, link, int64(0), cursor.Int64())
			if got := mustLoad(t, f); got != 1 {
				t.Errorf("Load() = %d, want 1", got)
			}
			mustSave(t, f, 2)
			checkLink(t, link, target)
			if got := readFile(t, file); got != "2\n" {
				t.Errorf("target contents after Save(2) = %q, want %q", got, "2\n")
			}
			if got := mustLoad(t, f); got != 2 {
				t.Errorf("Load() after Save(2) = %d, want 2", got)
			}
			checkNoTempFiles(t, dir)
			checkNoTempFiles(t, volume)

			// The link is followed anew at each Save.
			other := filepath.Join(dir, "other")
			writeFile(t, other, "9\n")
			if err := os.Remove(link); err != nil {
				t.Fatal(err)
			}
			symlink(t, other, link)
			mustSave(t, f, 3)
			checkLink(t, link, other)
			if got := readFile(t, other); got != "3\n" {
				t.Errorf("new target contents after Save(3) = %q, want %q", got, "3\n")
			}
			if got := readFile(t, file); got != "2\n" {
				t.Errorf("old target contents after Save(3) = %q, want %q", got, "2\n")
			}
		})
	}
}

// TestFileSaveThroughLinkToDevice checks that Save refuses a symbolic link
// to a device instead of renaming a file over the device.
func TestFileSaveThroughLinkToDevice(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no device files")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "cursor")
	f := mustNewFile(t, path, int64(0), cursor.Int64())
	symlink(t, os.DevNull, path)
	err := f.Save(context.Background(), 1)
	checkFileError(t, "Save(1)", err, fileErr{Op: "save", Path: path, Permanent: true})
	checkLink(t, path, os.DevNull)
	if fi, err := os.Stat(os.DevNull); err != nil || fi.Mode()&fs.ModeDevice == 0 {
		t.Errorf("Stat(%s) = %v, %v, want a device", os.DevNull, fi, err)
	}
}

// TestFileLinkLoop checks that a symbolic link loop is a permanent error,
// at NewFile and when it appears later.
func TestFileLinkLoop(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cursor")
	loop := filepath.Join(dir, "loop")
	symlink(t, loop, path)
	symlink(t, path, loop)
	_, err := cursor.NewFile(path, int64(0), cursor.Int64())
	checkFileError(t, "NewFile()", err, fileErr{Op: "new", Path: path, Permanent: true})

	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	f := mustNewFile(t, path, int64(0), cursor.Int64())
	symlink(t, loop, path)
	_, err = f.Load(context.Background())
	checkFileError(t, "Load()", err, fileErr{Op: "load", Path: path, Permanent: true})
	err = f.Save(context.Background(), 1)
	checkFileError(t, "Save(1)", err, fileErr{Op: "save", Path: path, Permanent: true})
	checkLink(t, path, loop)
}
