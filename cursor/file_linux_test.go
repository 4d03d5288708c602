package cursor_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/resumable-go/resumable/cursor"
)

// readOnlyDirEnv tells TestFileReadOnlyFileSystemChild, run by
// TestFileReadOnlyFileSystem in a child process with its own mount
// namespace, the directory to mount a file system on.
const readOnlyDirEnv = "CURSOR_READONLY_CHILD_DIR"

// TestFileReadOnlyFileSystem checks that a Save on a file system mounted
// read-only fails with a permanent error. Mounting needs a mount namespace
// of its own (root, or CAP_SYS_ADMIN), so the test runs in a child process
// in one; the mount disappears with the child.
func TestFileReadOnlyFileSystem(t *testing.T) {
	cmd := exec.CommandContext(t.Context(), os.Args[0],
		"-test.run=^TestFileReadOnlyFileSystemChild$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), readOnlyDirEnv+"="+t.TempDir())
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Skipf("no mount namespace for a read-only mount: %v", err)
	}
	if _, reason, ok := strings.Cut(string(out), "--- SKIP: TestFileReadOnlyFileSystemChild"); ok {
		t.Skipf("no read-only mount: %s", strings.TrimSpace(reason))
	}
	if err != nil || !strings.Contains(string(out), "--- PASS: TestFileReadOnlyFileSystemChild") {
		t.Fatalf("child: %v\n%s", err, out)
	}
}

// TestFileReadOnlyFileSystemChild runs in the child process of
// TestFileReadOnlyFileSystem: it saves a cursor on a tmpfs, remounts the
// tmpfs read-only and saves again.
func TestFileReadOnlyFileSystemChild(t *testing.T) {
	dir := os.Getenv(readOnlyDirEnv)
	if dir == "" {
		t.Skip("run by TestFileReadOnlyFileSystem")
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
		t.Skipf("mount tmpfs: %v", err)
	}
	path := filepath.Join(dir, "cursor")
	f := mustNewFile(t, path, int64(0), cursor.Int64())
	mustSave(t, f, 1)
	if err := syscall.Mount("", dir, "", syscall.MS_REMOUNT|syscall.MS_RDONLY, ""); err != nil {
		t.Skipf("remount tmpfs read-only: %v", err)
	}
	err := f.Save(context.Background(), 2)
	checkFileError(t, "Save(2)", err, fileErr{Op: "save", Path: path, Permanent: true, Cause: syscall.EROFS})
	// Reading still works.
	if got := mustLoad(t, mustNewFile(t, path, int64(0), cursor.Int64())); got != 1 {
		t.Errorf("Load() = %d, want 1", got)
	}
}

// TestNewFileLongPath checks that NewFile refuses a path so long that the
// path of its temporary file exceeds the limit of a path in a system call,
// PATH_MAX (4096 bytes with the final NUL).
func TestNewFileLongPath(t *testing.T) {
	dir := t.TempDir()
	for len(dir) < 4096-100 {
		dir = filepath.Join(dir, strings.Repeat("d", min(200, 4096-100-len(dir))))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Skipf("cannot make a directory of %d bytes: %v", len(dir), err)
	}
	refused := 0
	for n := 4096 - len(dir) - 30; n < 4096-len(dir); n++ {
		path := filepath.Join(dir, strings.Repeat("c", n))
		f, err := cursor.NewFile(path, int64(0), cursor.Int64())
		if err != nil {
			refused++
			checkFileError(t, fmt.Sprintf("NewFile(path of %d bytes)", len(path)), err,
				fileErr{Op: "new", Path: path, Permanent: true, Cause: syscall.ENAMETOOLONG})
			continue
		}
		mustSave(t, f, int64(n))
	}
	if refused == 0 {
		t.Errorf("NewFile() accepted paths of up to 4095 bytes, want the longest refused")
	}
}
