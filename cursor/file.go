package cursor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/resumable-go/resumable/internal/fsync"
)

// maxFileSize bounds what a [File] store writes and reads, so that a path
// pointing at a large unrelated file fails instead of being read whole.
const maxFileSize = 1 << 20

// ErrCorrupt is matched (errors.Is) by the error that [File.Load]
// returns when the file exists but does not hold a cursor its [Codec] can
// decode: empty, truncated, garbled, or larger than 1 MiB (and by other
// stores' Load, etcd's among them, for a stored value that holds no cursor). The stream must
// not retry it, and must not start over from the initial cursor: an operator
// has to repair the file, or remove it to restart from the initial cursor.
var ErrCorrupt = errors.New("cursor: corrupt cursor file")

// errNotRegular is the cause of a fileError for a path that exists but is
// neither a regular file nor a directory (a device, a pipe, a socket).
var errNotRegular = errors.New("not a regular file")

// linkError is the cause of a fileError for a path that is a symbolic link
// whose target cannot be reached: it does not exist (Err matches
// fs.ErrNotExist), the links form a loop, or access is denied on the way.
type linkError struct {
	Target string // what the link holds, as os.Readlink returns it
	Err    error  // why the target cannot be reached
}

func (e *linkError) Error() string {
	return "symbolic link to " + e.Target + ": " + e.Err.Error()
}

func (e *linkError) Unwrap() error { return e.Err }

// linkCause returns err, the error of a call that followed path, or a
// *linkError naming the target of path when path is a symbolic link.
func linkCause(path string, err error) error {
	target, lerr := os.Readlink(path)
	if lerr != nil {
		return err
	}
	cause := err
	var pe *fs.PathError
	if errors.As(err, &pe) {
		cause = pe.Err // the path is in the fileError already
	}
	return &linkError{Target: target, Err: cause}
}

// isLinkError reports whether err is a *linkError: not a missing file.
func isLinkError(err error) bool {
	_, ok := err.(*linkError)
	return ok
}

// fileError is the error [NewFile], [File.Load] and [File.Save] return for
// a problem with the cursor file: it names the file, the operation and the
// cause, which stays reachable with errors.Is and errors.As. Op is "new",
// "load", "decode" (the file holds no cursor: it matches [ErrCorrupt]),
// "encode" (nothing was written) or "save".
type fileError struct {
	Path string // the cursor file, absolute
	Op   string // "new", "load", "decode", "encode" or "save"
	Err  error  // the cause
}

// Error returns a message that names the file, the operation (or, for a
// file that holds no cursor, the corruption) and the cause.
func (e *fileError) Error() string {
	if e.Op == "decode" {
		return "cursor: corrupt cursor file " + e.Path + ": " + e.errString()
	}
	return "cursor: " + e.Op + " " + e.Path + ": " + e.errString()
}

func (e *fileError) errString() string {
	if e.Err == nil {
		return "<nil>"
	}
	return e.Err.Error()
}

// Unwrap returns the cause.
func (e *fileError) Unwrap() error { return e.Err }

// Is reports whether target is [ErrCorrupt] and e is about a file that
// holds no cursor (Op "decode").
func (e *fileError) Is(target error) bool {
	return target == ErrCorrupt && e.Op == "decode"
}

// Permanent reports whether retrying cannot help until something outside
// the program changes: a corrupt file, an unencodable cursor, a missing or
// wrong-kind path, a link to nothing, a name too long, a denied permission,
// a read-only file system. An I/O error, a full disk or too many open files
// are not permanent. Classifiers honour it through interface{ Permanent() bool }.
func (e *fileError) Permanent() bool {
	switch e.Op {
	case "new", "decode", "encode":
		return true
	}
	for _, target := range permanentCauses {
		if errors.Is(e.Err, target) {
			return true
		}
	}
	for _, target := range platformPermanentCauses {
		if errors.Is(e.Err, target) {
			return true
		}
	}
	return false
}

// permanentCauses are the causes of a "load" or "save" fileError that
// retrying cannot fix, on every platform; platformPermanentCauses adds
// those of the platform.
var permanentCauses = []error{
	fs.ErrPermission, // EACCES, EPERM
	fs.ErrNotExist,   // the directory was removed, or a link leads nowhere
	errNotRegular,
	syscall.ENOTDIR,
	syscall.EISDIR,
	syscall.EEXIST, // os.Rename onto a directory
	syscall.ENAMETOOLONG,
}

// File is a [Store] that keeps the cursor in a file, encoded by a [Codec].
// Create one with [NewFile]. Save is atomic and durable (a temporary file,
// fsync, rename, fsync of the directory): after a crash the file holds the
// last saved cursor or the one being saved, never a torn one. A File is
// safe for concurrent use, but a path belongs to one stream in one process.
// Through a symbolic link it reads and replaces the link's target; a link
// to nothing is an error, never a first run. docs/cursor-files.md in the
// repository is the reference.
type File[C any] struct {
	path    string
	dir     string
	pattern string // os.CreateTemp pattern for the temporary file
	mode    fs.FileMode
	initial C
	codec   Codec[C]

	mu sync.Mutex // serialises Save
}

// NewFile returns a [File] store that keeps its cursor at path, encoded by
// codec: [Int64], [String], [JSON] or one of your own. Load returns initial
// until a cursor was saved there. NewFile fails, with a permanent error
// naming the path, when codec is nil or cannot encode initial, when the
// directory is missing (it creates none) or the path is not a regular file,
// or when every Save would fail (see docs/cursor-files.md in the
// repository). It does not read the file.
func NewFile[C any](path string, initial C, codec Codec[C]) (*File[C], error) {
	if path == "" {
		return nil, errors.New("cursor: NewFile: empty path")
	}
	if codec == nil {
		return nil, errors.New("cursor: NewFile: nil codec")
	}
	if tc, ok := codec.(interface{ checkType() error }); ok {
		if err := tc.checkType(); err != nil {
			return nil, err
		}
	}
	if _, err := codec.Encode(initial); err != nil {
		return nil, fmt.Errorf("cursor: NewFile: the initial cursor %#v cannot be encoded: %w", initial, err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, &fileError{Path: path, Op: "new", Err: err}
	}
	dir := filepath.Dir(abs)
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, &fileError{Path: abs, Op: "new", Err: fmt.Errorf("directory unusable: %w", err)}
	}
	if !fi.IsDir() {
		return nil, &fileError{Path: abs, Op: "new", Err: &fs.PathError{Op: "stat", Path: dir, Err: syscall.ENOTDIR}}
	}
	mode := fs.FileMode(0o644)
	if fi, err := os.Stat(abs); err == nil {
		if err := checkRegular(abs, fi); err != nil {
			return nil, &fileError{Path: abs, Op: "new", Err: err}
		}
		mode = fi.Mode().Perm()
	} else if err = linkCause(abs, err); isLinkError(err) || !errors.Is(err, fs.ErrNotExist) {
		return nil, &fileError{Path: abs, Op: "new", Err: err} // not a first run
	}
	f := &File[C]{
		path:    abs,
		dir:     dir,
		pattern: tempPattern(abs),
		mode:    mode,
		initial: initial,
		codec:   codec,
	}
	target, err := f.target()
	if err == nil {
		err = checkTempName(target)
	}
	if err != nil {
		return nil, &fileError{Path: abs, Op: "new", Err: err}
	}
	return f, nil
}

// defaultNameMax is the longest file name, in bytes, of the common file
// systems, used where the file system does not say.
const defaultNameMax = 255

// tempNameExtra is how many bytes the name of a temporary file adds to the
// name NAME of the file it replaces: ".NAME." and ".tmp" around at most 10
// random digits (os.CreateTemp's).
const tempNameExtra = len("..") + 10 + len(".tmp")

// checkTempName returns an error wrapping ENAMETOOLONG when the name or
// the path of the temporary file of a Save to path would be too long for
// the file system, so that every Save would fail.
func checkTempName(path string) error {
	if n, limit := len(filepath.Base(path))+tempNameExtra, nameMax(filepath.Dir(path)); n > limit {
		return fmt.Errorf("the temporary file name of a Save would be %d bytes long, over the file system's limit of %d: %w",
			n, limit, syscall.ENAMETOOLONG)
	}
	if n := len(path) + tempNameExtra; pathMax > 0 && n > pathMax {
		return fmt.Errorf("the temporary file path of a Save would be %d bytes long, over the limit of %d: %w",
			n, pathMax, syscall.ENAMETOOLONG)
	}
	return nil
}

// checkRegular returns an error unless fi describes a regular file.
func checkRegular(path string, fi fs.FileInfo) error {
	switch {
	case fi.IsDir():
		return &fs.PathError{Op: "stat", Path: path, Err: syscall.EISDIR}
	case !fi.Mode().IsRegular():
		return &fs.PathError{Op: "stat", Path: path, Err: errNotRegular}
	}
	return nil
}

// Load returns the cursor in the file, or the initial cursor when the file
// does not exist (but its directory does): a missing file is a first run,
// so make sure path is on the volume you mean. Any other problem is an
// error naming the file, matching [ErrCorrupt] when the file holds no
// cursor; Load never falls back to the initial cursor because of an error.
func (f *File[C]) Load(ctx context.Context) (C, error) {
	var zero C
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	data, exists, err := f.read()
	if err != nil {
		return zero, err
	}
	if !exists {
		// No cursor saved yet, unless the directory itself is gone.
		fi, derr := os.Stat(f.dir)
		if derr == nil && !fi.IsDir() {
			derr = &fs.PathError{Op: "stat", Path: f.dir, Err: syscall.ENOTDIR}
		}
		if derr != nil {
			return zero, &fileError{Path: f.path, Op: "load", Err: fmt.Errorf("directory unusable: %w", derr)}
		}
		return f.initial, nil
	}
	c, err := f.codec.Decode(data)
	if err != nil {
		return zero, &fileError{Path: f.path, Op: "decode", Err: err}
	}
	return c, nil
}

// read returns the contents of the file, whether it exists, or a
// *fileError.
func (f *File[C]) read() (data []byte, exists bool, err error) {
	fh, err := os.Open(f.path)
	if err != nil {
		err = linkCause(f.path, err)
		if !isLinkError(err) && errors.Is(err, fs.ErrNotExist) {
			return nil, false, nil
		}
		return nil, true, &fileError{Path: f.path, Op: "load", Err: err}
	}
	defer fh.Close()
	fi, err := fh.Stat()
	if err != nil {
		return nil, true, &fileError{Path: f.path, Op: "load", Err: err}
	}
	if err := checkRegular(f.path, fi); err != nil {
		return nil, true, &fileError{Path: f.path, Op: "load", Err: err}
	}
	if fi.Size() > maxFileSize {
		return nil, true, &fileError{Path: f.path, Op: "decode", Err: fmt.Errorf("%d bytes, more than a cursor file holds (%d)", fi.Size(), maxFileSize)}
	}
	data, err = io.ReadAll(io.LimitReader(fh, maxFileSize+1))
	if err != nil {
		return nil, true, &fileError{Path: f.path, Op: "load", Err: err}
	}
	if len(data) > maxFileSize {
		return nil, true, &fileError{Path: f.path, Op: "decode", Err: fmt.Errorf("more than %d bytes, more than a cursor file holds", maxFileSize)}
	}
	return data, true, nil
}

// Save atomically and durably replaces the cursor in the file with c (see
// [File]). It returns ctx's error without writing if ctx is already done;
// once started it finishes. A Save that fails leaves the previous cursor,
// except when only the final directory sync failed (docs/cursor-files.md
// in the repository).
func (f *File[C]) Save(ctx context.Context, c C) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	data, err := f.codec.Encode(c)
	if err != nil {
		return &fileError{Path: f.path, Op: "encode", Err: err}
	}
	if len(data) > maxFileSize {
		return &fileError{Path: f.path, Op: "encode", Err: fmt.Errorf("encoding of %d bytes, more than a cursor file holds (%d)", len(data), maxFileSize)}
	}
	if _, err := f.codec.Decode(data); err != nil {
		return &fileError{Path: f.path, Op: "encode", Err: fmt.Errorf("the codec cannot decode its own encoding: %w", err)}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.write(data); err != nil {
		return &fileError{Path: f.path, Op: "save", Err: err}
	}
	return nil
}

// target returns the file Save replaces: the path itself, or the regular
// file its symbolic links lead to now.
func (f *File[C]) target() (string, error) {
	fi, err := os.Lstat(f.path)
	if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		return f.path, nil // not a link: write reports any problem
	}
	fi, err = os.Stat(f.path)
	if err != nil {
		return "", linkCause(f.path, err)
	}
	if err := checkRegular(f.path, fi); err != nil {
		return "", err
	}
	return filepath.EvalSymlinks(f.path)
}

// tempPattern returns the os.CreateTemp pattern of the temporary files of
// Saves to path.
func tempPattern(path string) string {
	return "." + filepath.Base(path) + ".*.tmp"
}

// write replaces the file (the target of the path, for a symbolic link)
// with data through a synced temporary file, and syncs the directory.
func (f *File[C]) write(data []byte) (err error) {
	path, err := f.target()
	if err != nil {
		return err
	}
	dir, pattern := f.dir, f.pattern
	if path != f.path {
		dir, pattern = filepath.Dir(path), tempPattern(path)
	}
	tmp, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return err
	}
	renamed := false
	defer func() {
		if err != nil && !renamed {
			_ = tmp.Close() // already closed on some paths; the error is moot
			_ = os.Remove(tmp.Name())
		}
	}()
	if f.mode != 0o600 { // os.CreateTemp's mode
		if err = tmp.Chmod(f.mode); err != nil {
			return err
		}
	}
	if _, err = tmp.Write(data); err != nil {
		return err
	}
	if err = tmp.Sync(); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	renamed = true
	return fsync.Dir(dir)
}
