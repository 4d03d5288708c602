package etcd

import (
	"strings"

	"github.com/resumable-go/resumable/cursor"
)

// The building blocks of NewResumer, for the package's tests.
var (
	Resync = resync

	ErrAlreadyRunning = errAlreadyRunning
)

// IsProgress reports whether ev is a progress notification.
func IsProgress(ev Event) bool { return ev.progress }

// Kind names what ev is: "put", "delete", "progress", "resync-start" or
// "resync-end".
func Kind(ev Event) string {
	switch {
	case ev.progress:
		return "progress"
	case ev.ResyncStart:
		return "resync-start"
	case ev.ResyncEnd:
		return "resync-end"
	}
	return strings.ToLower(ev.Type.String())
}

// CursorCodec is the codec the tests store cursors with.
func CursorCodec() cursor.Codec[Cursor] { return cursor.JSON[Cursor]() }
