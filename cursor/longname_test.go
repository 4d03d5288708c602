package cursor_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

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
			checkFileError(t, fmt.Sprintf("NewFile(name of %d bytes)", n), err,
				fileErr{Op: "new", Path: path, Permanent: true, Cause: syscall.ENAMETOOLONG})
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
	checkFileError(t, "NewFile()", err, fileErr{Op: "new", Path: link, Permanent: true, Cause: syscall.ENAMETOOLONG})
}
