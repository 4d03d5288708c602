package cursor_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/resumable-go/resumable/cursor"
)

// TestNewFileLongName checks that NewFile refuses a file name that leaves
// no room for the name of its temporary file (".NAME.*.tmp"), and that
// every name it accepts can be saved to.
func TestNewFileLongName(t *testing.T) {
	dir := t.TempDir()
	refused := 0
	for n := 200; n <= 256; n++ {
		path := filepath.Join(dir, strings.Repeat("c", n))
		f, err := cursor.NewFile(path, int64(0), cursor.Int64())
		if err != nil {
			refused++
			checkNameTooLong(t, err, path)
			continue
		}
		mustSave(t, f, int64(n))
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
	}
	if refused == 0 {
		t.Errorf("NewFile() accepted names of 200 to 256 bytes, want the longest refused")
	}
}

// TestNewFileLinkToLongName checks that NewFile refuses a symbolic link
// whose target's name leaves no room for the name of its temporary file.
func TestNewFileLinkToLongName(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, strings.Repeat("c", 250))
	writeFile(t, target, "1\n")
	link := filepath.Join(dir, "cursor")
	symlink(t, target, link)
	_, err := cursor.NewFile(link, int64(0), cursor.Int64())
	checkNameTooLong(t, err, link)
}

// checkNameTooLong checks that err is NewFile's error for a name too long.
func checkNameTooLong(t *testing.T, err error, path string) {
	t.Helper()
	if err == nil {
		t.Fatalf("NewFile(%q) = nil error, want one for a name too long", path)
	}
	if diff := cmp.Diff(fileErr{Op: "new", Path: path, Permanent: true}, fileErrOf(t, err)); diff != "" {
		t.Errorf("NewFile(%q) error %v mismatch (-want +got):\n%s", path, err, diff)
	}
	if !errors.Is(err, syscall.ENAMETOOLONG) {
		t.Errorf("NewFile(%q) = %v, want an error matching ENAMETOOLONG", path, err)
	}
}
