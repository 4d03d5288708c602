//go:build !plan9

package cursor_test

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"
	"testing"

	"github.com/resumable-go/resumable/cursor"
)

func TestFileErrorPermanent(t *testing.T) {
	tests := []struct {
		name string
		err  *cursor.FileError
		want bool
	}{
		{name: "corrupt", err: &cursor.FileError{Op: "decode", Err: errors.New("bad")}, want: true},
		{name: "encode", err: &cursor.FileError{Op: "encode", Err: errors.New("bad")}, want: true},
		{name: "new", err: &cursor.FileError{Op: "new", Err: errors.New("bad")}, want: true},
		{name: "permission", err: &cursor.FileError{Op: "save", Err: &fs.PathError{Op: "open", Path: "/x", Err: syscall.EACCES}}, want: true},
		{name: "directory gone", err: &cursor.FileError{Op: "save", Err: &fs.PathError{Op: "open", Path: "/x", Err: syscall.ENOENT}}, want: true},
		{name: "not a directory", err: &cursor.FileError{Op: "load", Err: &fs.PathError{Op: "open", Path: "/x", Err: syscall.ENOTDIR}}, want: true},
		{name: "I/O error", err: &cursor.FileError{Op: "save", Err: &fs.PathError{Op: "sync", Path: "/x", Err: syscall.EIO}}, want: false},
		{name: "disk full", err: &cursor.FileError{Op: "save", Err: &fs.PathError{Op: "write", Path: "/x", Err: syscall.ENOSPC}}, want: false},
		{name: "too many open files", err: &cursor.FileError{Op: "load", Err: &fs.PathError{Op: "open", Path: "/x", Err: syscall.EMFILE}}, want: false},
		{name: "read-only file system", err: &cursor.FileError{Op: "save", Err: &fs.PathError{Op: "open", Path: "/x", Err: syscall.EROFS}}, want: true},
		{name: "link loop", err: &cursor.FileError{Op: "load", Err: &fs.PathError{Op: "open", Path: "/x", Err: syscall.ELOOP}}, want: true},
		{name: "quota exceeded", err: &cursor.FileError{Op: "save", Err: &fs.PathError{Op: "write", Path: "/x", Err: syscall.EDQUOT}}, want: false},
		{name: "unknown", err: &cursor.FileError{Op: "save", Err: errors.New("?")}, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.err.Permanent(); got != tt.want {
				t.Errorf("(%v).Permanent() = %v, want %v", tt.err, got, tt.want)
			}
			// A classifier finds it through wrapping.
			var p interface{ Permanent() bool }
			if !errors.As(fmt.Errorf("stream: %w", tt.err), &p) || p.Permanent() != tt.want {
				t.Errorf("errors.As(wrapped, Permanent) failed or disagrees")
			}
		})
	}
}
